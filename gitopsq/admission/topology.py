"""The static picture the engine schedules against: queue definitions resolved once into plain values.

`build_topology` takes the model objects of one revision (api.model) and the admission settings, and returns a
`Topology`: every ClusterQueue with its quotas in milli-units, its cohort path, whether it is active (and, if
not, Kueue's ``Active=False`` reason and message), LocalQueues, namespaces' labels, priority classes and the
quota tree. Nothing here changes while the engine runs.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from gitopsq.admission import quota
from gitopsq.admission.quota import FlavorResource, Limits, QuotaTree
from gitopsq.api import model as m

STRATEGIES = ("LessThanOrEqualToFinalShare", "LessThanInitialShare")
BATCHED, IMMEDIATE = "Batched", "Immediate"
REQUEUE_MODES = (BATCHED, IMMEDIATE)
# the Kueue gates a scenario may set
FEATURE_GATES = ("FlavorFungibilityPreserveScanProgress", "PrioritizePreemptorWorkloads")


@dataclass(frozen=True, slots=True)
class Settings:
    """Admission settings a Kueue manager configuration would hold (the scenario's ``settings``).

    The defaults decide as Kueue v0.19.2 does. Two opt-in departures (docs/admission.md):

    - ``inadmissible_requeue``: ``Batched`` (Kueue) returns inadmissible workloads to their queues only once
      everything else of the instant has been tried — Kueue's 1 s requeue batch after quota is released, during
      which new arrivals and StrictFIFO heads get the capacity first. ``Immediate`` requeues them in the next
      cycle, so nobody wins by timing alone.
    - ``fair_sharing_look_ahead``: when a fair-sharing tournament admits a queue's head, that queue's next
      workload joins the same tournament (admissions follow the weighted shares). Kueue considers one head per
      queue per cycle.
    """

    fair_sharing: bool = False
    preemption_strategies: tuple[str, ...] = STRATEGIES
    inadmissible_requeue: str = BATCHED
    fair_sharing_look_ahead: bool = False
    # Kueue's FlavorFungibilityPreserveScanProgress gate (Beta, on in v0.19): a failed attempt's flavor scan
    # resumes after the flavor where it stopped. Off: every attempt scans from the first flavor.
    preserve_flavor_scan_progress: bool = True
    # Kueue's PrioritizePreemptorWorkloads gate (Alpha, off in v0.19): a workload whose preemptions were issued in
    # the previous cycle is processed first in the next. Off: it competes in the usual order (it stays the head
    # of its own BestEffortFIFO queue either way).
    prioritize_preemptors: bool = False


@dataclass(frozen=True, slots=True)
class Group:
    """One resource group of a ClusterQueue: the resources it covers and its flavors in order."""

    resources: tuple[str, ...]
    flavors: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class QueueSpec:
    """A ClusterQueue, resolved."""

    name: str
    cohort: str | None
    groups: tuple[Group, ...]
    group_of: Mapping[str, int]  # resource -> index in groups
    limits: Mapping[FlavorResource, Limits]
    preemption: m.Preemption
    fungibility: m.FlavorFungibility
    strict_fifo: bool
    namespace_selector: m.LabelSelector | None
    weight: int  # fair-sharing weight in milli-units (1000 = 1)
    checks: tuple[m.AdmissionCheckRule, ...]
    stop_policy: str
    inactive_reason: str = ""  # empty = active
    inactive_message: str = ""

    @property
    def active(self) -> bool:
        return not self.inactive_reason

    def checks_for(self, flavors: Iterable[str]) -> tuple[str, ...]:
        """Admission checks that apply to a workload assigned ``flavors`` (``onFlavors`` empty = all)."""
        used = set(flavors)
        return tuple(sorted({c.name for c in self.checks if not c.on_flavors or used & set(c.on_flavors)}))


@dataclass(frozen=True, slots=True)
class Topology:
    settings: Settings
    queues: Mapping[str, QueueSpec]
    flavors: Mapping[str, m.ResourceFlavor]
    local_queues: Mapping[tuple[str, str], m.LocalQueue]  # (namespace, name)
    namespace_labels: Mapping[str, Mapping[str, str]]
    workload_priority_classes: Mapping[str, int]
    priority_classes: Mapping[str, int]
    default_priority: int
    cohort_weights: Mapping[str, int]
    cohort_parents: Mapping[str, str | None]
    tree: QuotaTree = field(compare=False)
    cohort_objects: frozenset[str] = frozenset()  # cohorts defined by a Cohort object (not only named)


def _limits(groups: tuple[m.ResourceGroup, ...]) -> dict[FlavorResource, Limits]:
    out: dict[FlavorResource, Limits] = {}
    for rg in groups:
        for fq in rg.flavors:
            for rq in fq.resources:
                out[(fq.name, rq.name)] = Limits(
                    nominal=rq.nominal_quota.milli,
                    borrowing=rq.borrowing_limit.milli if rq.borrowing_limit is not None else None,
                    lending=rq.lending_limit.milli if rq.lending_limit is not None else None)
    return out


def _weight(fs: m.FairSharing | None) -> int:
    return 1000 if fs is None or fs.weight is None else fs.weight.milli


def _cyclic_cohorts(parents: Mapping[str, str | None]) -> set[str]:
    """Cohorts on, or below, a parent cycle: their ClusterQueues are inactive (Kueue ``HasCycle``)."""
    bad: set[str] = set()
    for start in parents:
        seen: list[str] = []
        node: str | None = start
        while node is not None and node not in seen:
            seen.append(node)
            node = parents.get(node)
        if node is not None:
            bad.add(start)
    return bad


def build_topology(objects: Iterable[m.QueueObject], settings: Settings | None = None) -> Topology:
    """Resolve one revision's objects into the engine's static view (see the module docstring)."""
    objs = list(objects)
    flavors = {o.meta.name: o for o in objs if isinstance(o, m.ResourceFlavor)}
    cqs = sorted((o for o in objs if isinstance(o, m.ClusterQueue)), key=lambda o: o.meta.name)
    cohort_objs = {o.meta.name: o for o in objs if isinstance(o, m.Cohort)}
    checks = {o.meta.name for o in objs if isinstance(o, m.AdmissionCheck)}
    parents: dict[str, str | None] = {n: c.parent_name for n, c in cohort_objs.items()}
    for name in [*(c.cohort_name for c in cqs if c.cohort_name), *(p for p in list(parents.values()) if p)]:
        parents.setdefault(name, None)  # implicit cohorts: named but never defined
    cyclic = _cyclic_cohorts(parents)

    tree = QuotaTree()
    for name in sorted(parents):
        if name not in cyclic:
            co = cohort_objs.get(name)
            tree.add_cohort(name, _limits(co.resource_groups) if co else {})
    for name in sorted(parents):
        parent = parents[name]
        if name not in cyclic and parent is not None:
            tree.link_cohort(name, parent)

    queues: dict[str, QueueSpec] = {}
    for cq in cqs:
        reasons, messages = [], []
        if cq.stop_policy != "None":
            reasons.append("Stopped")
            messages.append("is stopped")
        missing = [f for f in dict.fromkeys(cq.flavor_names()) if f not in flavors]
        if missing:
            reasons.append("FlavorNotFound")
            messages.append(f"references missing ResourceFlavor(s): {','.join(missing)}")
        missing_checks = [c.name for c in cq.admission_checks if c.name not in checks]
        if missing_checks:
            reasons.append("AdmissionCheckNotFound")
            messages.append(f"references missing AdmissionCheck(s): {','.join(missing_checks)}")
        if cq.cohort_name in cyclic:
            reasons.append("CohortHasCycle")
            messages.append(f"cohort {cq.cohort_name} is part of a cycle")
        groups = tuple(Group(rg.covered_resources, tuple(f.name for f in rg.flavors)) for rg in cq.resource_groups)
        limits = _limits(cq.resource_groups)
        cohort = cq.cohort_name if cq.cohort_name not in cyclic else None
        tree.add_queue(cq.meta.name, limits, cohort)
        queues[cq.meta.name] = QueueSpec(
            name=cq.meta.name, cohort=cohort, groups=groups,
            group_of={r: i for i, g in enumerate(groups) for r in g.resources}, limits=limits,
            preemption=cq.preemption, fungibility=cq.flavor_fungibility,
            strict_fifo=cq.queueing_strategy == "StrictFIFO", namespace_selector=cq.namespace_selector,
            weight=_weight(cq.fair_sharing), checks=cq.admission_checks, stop_policy=cq.stop_policy,
            inactive_reason=",".join(reasons),
            inactive_message=f"Can't admit new workloads: {', '.join(messages)}." if messages else "")
    tree.finish()

    pcs = {o.meta.name: o for o in objs if isinstance(o, m.PriorityClass)}
    defaults = sorted(p.value for p in pcs.values() if p.global_default)
    return Topology(
        settings=settings or Settings(), queues=queues, flavors=flavors,
        local_queues={(o.meta.namespace or "", o.meta.name): o for o in objs if isinstance(o, m.LocalQueue)},
        namespace_labels={o.meta.name: {**o.meta.labels, "kubernetes.io/metadata.name": o.meta.name}
                          for o in objs if isinstance(o, m.Namespace)},
        workload_priority_classes={o.meta.name: o.value for o in objs if isinstance(o, m.WorkloadPriorityClass)},
        priority_classes={n: p.value for n, p in pcs.items()},
        default_priority=defaults[0] if defaults else 0,
        cohort_weights={n: _weight(cohort_objs[n].fair_sharing if n in cohort_objs else None) for n in parents},
        cohort_parents=parents, tree=tree, cohort_objects=frozenset(cohort_objs))


def fresh_tree(topology: Topology) -> QuotaTree:
    """A new quota tree with the same structure and zero usage (for independent runs over one topology)."""
    tree = QuotaTree()
    src = topology.tree
    for name, node in src.cohorts.items():
        tree.add_cohort(name, node.limits)
    for name, node in src.cohorts.items():
        if node.parent is not None:
            tree.link_cohort(name, node.parent.name)
    for name, node in src.queues.items():
        tree.add_queue(name, node.limits, node.parent.name if node.parent else None)
    tree.finish()
    return tree


__all__ = ["Group", "QueueSpec", "Settings", "Topology", "build_topology", "fresh_tree", "quota"]
