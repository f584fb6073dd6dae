"""The Kueue object model, normalised to ``kueue.x-k8s.io/v1beta2``.

Every kind a queue-definition repository may hold (shared/interfaces.md §2) plus the Workload, as frozen
dataclasses. Field names are Kueue's, in snake_case. Quantities are `Quantity` values parsed once. Defaults are
Kueue's v1beta2 defaults, so two manifests that mean the same thing decode to equal objects. ``source`` records
where an object came from (file and line) and takes no part in equality.

The wire shape (camelCase dicts, v1beta1 vs v1beta2) is known only to `gitopsq.api.codec`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import ClassVar, Final

from gitopsq.api.frozenmap import FrozenMap
from gitopsq.api.quantity import Quantity
from gitopsq.errors import Location

KUEUE_GROUP: Final = "kueue.x-k8s.io"
KUEUE_V1BETA2: Final = "kueue.x-k8s.io/v1beta2"
KUEUE_V1BETA1: Final = "kueue.x-k8s.io/v1beta1"

EMPTY: Final[FrozenMap[str, str]] = FrozenMap()
NO_REQUESTS: Final[FrozenMap[str, Quantity]] = FrozenMap()


@dataclass(frozen=True, slots=True, kw_only=True)
class ObjectMeta:
    """The metadata we model: identity, labels and annotations."""

    name: str
    namespace: str | None = None
    labels: FrozenMap[str, str] = EMPTY
    annotations: FrozenMap[str, str] = EMPTY


@dataclass(frozen=True, slots=True, kw_only=True)
class ObjectKey:
    """Identity of an object: group, kind, namespace, name. Totally ordered (group, kind, namespace, name)."""

    group: str
    kind: str
    namespace: str
    name: str

    def sort_key(self) -> tuple[str, str, str, str]:
        return (self.group, self.kind, self.namespace, self.name)

    def __lt__(self, other: ObjectKey) -> bool:
        return self.sort_key() < other.sort_key()

    def __str__(self) -> str:
        return f"{self.kind}/{self.namespace}/{self.name}" if self.namespace else f"{self.kind}/{self.name}"


# --- ResourceFlavor -------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class Taint:
    key: str
    value: str = ""
    effect: str  # NoSchedule | PreferNoSchedule | NoExecute
    time_added: str | None = None  # RFC 3339, kept as written: Kueue only stores it


@dataclass(frozen=True, slots=True, kw_only=True)
class Toleration:
    key: str = ""
    operator: str = "Equal"  # Equal | Exists
    value: str = ""
    effect: str = ""  # empty matches every effect
    toleration_seconds: int | None = None

    def tolerates(self, taint: Taint) -> bool:
        """Kubernetes' matching rule: effect (empty = any), key (empty with Exists = any), then value."""
        if self.effect and self.effect != taint.effect:
            return False
        if self.key and self.key != taint.key:
            return False
        if self.operator == "Exists":
            return True
        return bool(self.key) and self.value == taint.value


@dataclass(frozen=True, slots=True, kw_only=True)
class ResourceFlavor:
    KIND: ClassVar[str] = "ResourceFlavor"
    meta: ObjectMeta
    node_labels: FrozenMap[str, str] = EMPTY
    node_taints: tuple[Taint, ...] = ()
    tolerations: tuple[Toleration, ...] = ()
    topology_name: str | None = None
    source: Location | None = field(default=None, compare=False)


# --- ClusterQueue and Cohort quotas ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class ResourceQuota:
    """Quota of one resource in one flavor. ``None`` limits mean unlimited borrowing / lending."""

    name: str
    nominal_quota: Quantity
    borrowing_limit: Quantity | None = None
    lending_limit: Quantity | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class FlavorQuotas:
    name: str
    resources: tuple[ResourceQuota, ...]

    def quota(self, resource: str) -> ResourceQuota | None:
        return next((r for r in self.resources if r.name == resource), None)


@dataclass(frozen=True, slots=True, kw_only=True)
class ResourceGroup:
    covered_resources: tuple[str, ...]
    flavors: tuple[FlavorQuotas, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class LabelSelectorRequirement:
    key: str
    operator: str  # In | NotIn | Exists | DoesNotExist
    values: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class LabelSelector:
    """A Kubernetes label selector. An empty selector matches everything."""

    match_labels: FrozenMap[str, str] = EMPTY
    match_expressions: tuple[LabelSelectorRequirement, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        for key, value in self.match_labels.items():
            if labels.get(key) != value:
                return False
        for req in self.match_expressions:
            present = req.key in labels
            if req.operator == "In" and (not present or labels[req.key] not in req.values):
                return False
            if req.operator == "NotIn" and present and labels[req.key] in req.values:
                return False
            if req.operator == "Exists" and not present:
                return False
            if req.operator == "DoesNotExist" and present:
                return False
        return True


@dataclass(frozen=True, slots=True, kw_only=True)
class BorrowWithinCohort:
    policy: str = "Never"  # Never | LowerPriority
    max_priority_threshold: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Preemption:
    within_cluster_queue: str = "Never"  # Never | LowerPriority | LowerOrNewerEqualPriority
    reclaim_within_cohort: str = "Never"  # Never | LowerPriority | Any
    borrow_within_cohort: BorrowWithinCohort | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class FlavorFungibility:
    when_can_borrow: str = "MayStopSearch"  # MayStopSearch | TryNextFlavor
    when_can_preempt: str = "TryNextFlavor"  # MayStopSearch | TryNextFlavor
    preference: str | None = None  # BorrowingOverPreemption | PreemptionOverBorrowing


@dataclass(frozen=True, slots=True, kw_only=True)
class FairSharing:
    weight: Quantity | None = None  # None = the default weight 1


@dataclass(frozen=True, slots=True, kw_only=True)
class AdmissionCheckRule:
    name: str
    on_flavors: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class ConcurrentAdmission:
    """concurrentAdmissionPolicy.migration: how Kueue moves an admitted workload to a preferred flavor."""

    mode: str  # TryPreferredFlavors | RetainFirstAdmission
    last_acceptable_flavor: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ClusterQueue:
    KIND: ClassVar[str] = "ClusterQueue"
    meta: ObjectMeta
    cohort_name: str | None = None
    resource_groups: tuple[ResourceGroup, ...] = ()
    namespace_selector: LabelSelector | None = None  # None = no namespace; empty selector = every namespace
    queueing_strategy: str = "BestEffortFIFO"  # BestEffortFIFO | StrictFIFO
    preemption: Preemption = Preemption()
    flavor_fungibility: FlavorFungibility = FlavorFungibility()
    fair_sharing: FairSharing | None = None
    admission_checks: tuple[AdmissionCheckRule, ...] = ()
    stop_policy: str = "None"  # None | Hold | HoldAndDrain
    admission_mode: str | None = None  # admissionScope.admissionMode; None = no admissionScope
    concurrent_admission: ConcurrentAdmission | None = None
    source: Location | None = field(default=None, compare=False)

    def flavor_names(self) -> tuple[str, ...]:
        return tuple(f.name for rg in self.resource_groups for f in rg.flavors)


@dataclass(frozen=True, slots=True, kw_only=True)
class Cohort:
    KIND: ClassVar[str] = "Cohort"
    meta: ObjectMeta
    parent_name: str | None = None
    resource_groups: tuple[ResourceGroup, ...] = ()
    fair_sharing: FairSharing | None = None
    source: Location | None = field(default=None, compare=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class LocalQueue:
    KIND: ClassVar[str] = "LocalQueue"
    meta: ObjectMeta
    cluster_queue: str
    stop_policy: str = "None"
    fair_sharing: FairSharing | None = None
    source: Location | None = field(default=None, compare=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class WorkloadPriorityClass:
    KIND: ClassVar[str] = "WorkloadPriorityClass"
    meta: ObjectMeta
    value: int
    description: str = ""
    source: Location | None = field(default=None, compare=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class AdmissionCheck:
    KIND: ClassVar[str] = "AdmissionCheck"
    meta: ObjectMeta
    controller_name: str
    parameters: FrozenMap[str, str] | None = None  # {apiGroup, kind, name}
    source: Location | None = field(default=None, compare=False)


# --- Kueue's configuration kinds: topologies and the admission checks' parameters -----------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class Topology:
    KIND: ClassVar[str] = "Topology"
    meta: ObjectMeta
    levels: tuple[str, ...]  # node label keys, highest level first
    source: Location | None = field(default=None, compare=False)

    @property
    def name(self) -> str:
        return self.meta.name


@dataclass(frozen=True, slots=True, kw_only=True)
class RetryStrategy:
    backoff_limit_count: int = 3
    backoff_base_seconds: int = 60
    backoff_max_seconds: int = 1800


@dataclass(frozen=True, slots=True, kw_only=True)
class ProvisioningRequestConfig:
    KIND: ClassVar[str] = "ProvisioningRequestConfig"
    meta: ObjectMeta
    provisioning_class_name: str
    parameters: FrozenMap[str, str] = EMPTY
    managed_resources: tuple[str, ...] = ()
    retry_strategy: RetryStrategy = RetryStrategy()
    pod_set_updates: tuple[tuple[str, str], ...] = ()  # nodeSelector (key, valueFromProvisioningClassDetail)
    pod_set_merge_policy: str | None = None  # IdenticalPodTemplates | IdenticalWorkloadSchedulingRequirements
    source: Location | None = field(default=None, compare=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class MultiKueueConfig:
    KIND: ClassVar[str] = "MultiKueueConfig"
    meta: ObjectMeta
    clusters: tuple[str, ...]  # MultiKueueCluster names
    quota_management: str | None = None  # Manual | Automated
    source: Location | None = field(default=None, compare=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class MultiKueueCluster:
    """Where the worker cluster's credentials come from: exactly one of a kubeconfig and a ClusterProfile."""

    KIND: ClassVar[str] = "MultiKueueCluster"
    meta: ObjectMeta
    kubeconfig_location: str | None = None
    kubeconfig_location_type: str = "Secret"  # Secret | Path
    cluster_profile: str | None = None
    source: Location | None = field(default=None, compare=False)


# --- core / scheduling kinds a repository may hold ------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class Namespace:
    KIND: ClassVar[str] = "Namespace"
    meta: ObjectMeta
    source: Location | None = field(default=None, compare=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class PriorityClass:
    KIND: ClassVar[str] = "PriorityClass"
    meta: ObjectMeta
    value: int
    global_default: bool = False
    description: str = ""
    preemption_policy: str = "PreemptLowerPriority"
    source: Location | None = field(default=None, compare=False)


# --- Workload ---------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class PriorityClassRef:
    group: str  # kueue.x-k8s.io | scheduling.k8s.io
    kind: str  # WorkloadPriorityClass | PriorityClass
    name: str


@dataclass(frozen=True, slots=True, kw_only=True)
class PodSet:
    """One pod set: ``count`` pods, each requesting ``requests``. Scheduling constraints come from the template."""

    name: str = "main"
    count: int = 1
    min_count: int | None = None
    requests: FrozenMap[str, Quantity] = NO_REQUESTS
    node_selector: FrozenMap[str, str] = EMPTY
    tolerations: tuple[Toleration, ...] = ()
    # Required node-affinity terms (ORed); each term is a tuple of requirements (ANDed).
    required_affinity: tuple[tuple[LabelSelectorRequirement, ...], ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class Workload:
    KIND: ClassVar[str] = "Workload"
    meta: ObjectMeta
    queue_name: str
    pod_sets: tuple[PodSet, ...]
    priority: int | None = None
    priority_class_ref: PriorityClassRef | None = None
    active: bool = True
    maximum_execution_time_seconds: int | None = None
    source: Location | None = field(default=None, compare=False)


QueueObject = (
    ResourceFlavor | ClusterQueue | Cohort | LocalQueue | WorkloadPriorityClass | AdmissionCheck | Namespace
    | PriorityClass | Topology | ProvisioningRequestConfig | MultiKueueConfig | MultiKueueCluster
)
AnyObject = QueueObject | Workload

# kind -> (API group, namespaced?)
KINDS: Final[Mapping[str, tuple[str, bool]]] = MappingProxyType({
    "ResourceFlavor": (KUEUE_GROUP, False),
    "ClusterQueue": (KUEUE_GROUP, False),
    "Cohort": (KUEUE_GROUP, False),
    "LocalQueue": (KUEUE_GROUP, True),
    "WorkloadPriorityClass": (KUEUE_GROUP, False),
    "AdmissionCheck": (KUEUE_GROUP, False),
    "Topology": (KUEUE_GROUP, False),
    "ProvisioningRequestConfig": (KUEUE_GROUP, False),
    "MultiKueueConfig": (KUEUE_GROUP, False),
    "MultiKueueCluster": (KUEUE_GROUP, False),
    "Workload": (KUEUE_GROUP, True),
    "Namespace": ("", False),
    "PriorityClass": ("scheduling.k8s.io", False),
})


def key_of(obj: AnyObject) -> ObjectKey:
    """The identity of a modelled object."""
    group, _ = KINDS[obj.KIND]
    return ObjectKey(group=group, kind=obj.KIND, namespace=obj.meta.namespace or "", name=obj.meta.name)
