"""The one registry of the Kubernetes resource kinds gitopsq reads or writes, and their REST paths.

Each `Kind` says where its objects live on the API server (group, version, plural, namespaced) and how the
shell uses it: ``watched`` kinds get an informer in the admission loop's cache (in the order of `KINDS`),
``topology`` kinds are the queue objects the admission core's topology is built from, and ``synced`` kinds may
be applied, read or pruned by a sync. Job kinds (batch/v1 Job, JobSet, ...) are watched when their integration
runs (gitopsq/admission_loop/integrations/registry.py), not listed here as watched. Short names are the ones the CRDs
(gitopsq/data/crds) and Kubernetes declare. Adding a kind is one line in `KINDS`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

KUEUE_GROUP: Final = "kueue.x-k8s.io"
KUEUE_VERSION: Final = "v1beta2"


@dataclass(frozen=True, slots=True)
class Kind:
    """One API resource kind as gitopsq addresses it."""

    kind: str
    group: str  # "" for the core group
    version: str  # the version gitopsq reads and watches
    plural: str  # the REST resource name, also the watch cache's name for the kind
    namespaced: bool
    short_names: tuple[str, ...] = ()
    watched: bool = False  # an informer in the admission loop's cache
    topology: bool = False  # decoded into the admission core's topology
    synced: bool = True  # a sync may apply, read or prune it (a queue repository's kinds, and the GitSource)
    label_selector: str = ""  # an informer lists and watches only the objects it selects (managed Pods)

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    def collection_path(self, namespace: str = "", *, version: str | None = None) -> str:
        """The REST path of the collection (in ``namespace`` when namespaced and given); ``version``
        overrides the registry's (a manifest may name another served version)."""
        served = version or self.version
        base = f"/apis/{self.group}/{served}" if self.group else f"/api/{served}"
        if self.namespaced and namespace:
            return f"{base}/namespaces/{namespace}/{self.plural}"
        return f"{base}/{self.plural}"

    def object_path(self, name: str, namespace: str = "", *, version: str | None = None) -> str:
        return f"{self.collection_path(namespace, version=version)}/{name}"


NAMESPACE: Final = Kind("Namespace", "", "v1", "namespaces", False, ("ns",), watched=True, topology=True)
PRIORITY_CLASS: Final = Kind("PriorityClass", "scheduling.k8s.io", "v1", "priorityclasses", False, ("pc",),
                             watched=True, topology=True)
RESOURCE_FLAVOR: Final = Kind("ResourceFlavor", KUEUE_GROUP, KUEUE_VERSION, "resourceflavors", False,
                              ("rf", "flavor", "flavors"), watched=True, topology=True)
COHORT: Final = Kind("Cohort", KUEUE_GROUP, KUEUE_VERSION, "cohorts", False, ("co",), watched=True, topology=True)
CLUSTER_QUEUE: Final = Kind("ClusterQueue", KUEUE_GROUP, KUEUE_VERSION, "clusterqueues", False, ("cq",),
                            watched=True, topology=True)
LOCAL_QUEUE: Final = Kind("LocalQueue", KUEUE_GROUP, KUEUE_VERSION, "localqueues", True, ("lq", "queue", "queues"),
                          watched=True, topology=True)
WORKLOAD_PRIORITY_CLASS: Final = Kind("WorkloadPriorityClass", KUEUE_GROUP, KUEUE_VERSION, "workloadpriorityclasses",
                                      False, ("wpc",), watched=True, topology=True)
ADMISSION_CHECK: Final = Kind("AdmissionCheck", KUEUE_GROUP, KUEUE_VERSION, "admissionchecks", False, ("ac",),
                              watched=True, topology=True)
TOPOLOGY_KIND: Final = Kind("Topology", KUEUE_GROUP, KUEUE_VERSION, "topologies", False, ("topo",))
PROVISIONING_REQUEST_CONFIG: Final = Kind("ProvisioningRequestConfig", KUEUE_GROUP, KUEUE_VERSION,
                                          "provisioningrequestconfigs", False, ("prc",))
MULTIKUEUE_CONFIG: Final = Kind("MultiKueueConfig", KUEUE_GROUP, KUEUE_VERSION, "multikueueconfigs", False, ("mkconf",))
MULTIKUEUE_CLUSTER: Final = Kind("MultiKueueCluster", KUEUE_GROUP, KUEUE_VERSION, "multikueueclusters", False, ("mkc",))
WORKLOAD: Final = Kind("Workload", KUEUE_GROUP, KUEUE_VERSION, "workloads", True, ("wl", "kwl"), watched=True)
JOB: Final = Kind("Job", "batch", "v1", "jobs", True, synced=False)  # watched through its integration (batch/job)
GIT_SOURCE: Final = Kind("GitSource", "gitopsq.dev", "v1alpha1", "gitsources", True, ("gs",))

KINDS: Final[tuple[Kind, ...]] = (NAMESPACE, PRIORITY_CLASS, RESOURCE_FLAVOR, COHORT, CLUSTER_QUEUE, LOCAL_QUEUE,
                                  WORKLOAD_PRIORITY_CLASS, ADMISSION_CHECK, TOPOLOGY_KIND, PROVISIONING_REQUEST_CONFIG,
                                  MULTIKUEUE_CONFIG, MULTIKUEUE_CLUSTER, WORKLOAD, JOB, GIT_SOURCE)
BY_PLURAL: Final[Mapping[str, Kind]] = {k.plural: k for k in KINDS}
BY_GROUP_KIND: Final[Mapping[tuple[str, str], Kind]] = {(k.group, k.kind): k for k in KINDS}
WATCHED: Final[tuple[str, ...]] = tuple(k.plural for k in KINDS if k.watched)
TOPOLOGY: Final[tuple[str, ...]] = tuple(k.plural for k in KINDS if k.topology)


def kind_of(group: str, kind: str) -> Kind | None:
    """The registered kind for (group, kind), or None when gitopsq does not know it."""
    return BY_GROUP_KIND.get((group, kind))
