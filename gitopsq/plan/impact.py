"""Impact of a pull request on the work queued now: the admission engine run on base and on head.

Snapshot impact (`assess`), from the workloads that exist now (read from a cluster or a snapshot file):

1. Each side gets a fresh engine over its own queue definitions. Every workload is submitted; one admitted now
   is placed back where it runs (its ClusterQueue and flavors), unless that side no longer offers them — then
   it *loses its quota* (Kueue could not keep counting it there) and waits again as a pending workload.
2. Each engine settles the instant once: pending workloads that fit are admitted, and reclamation or priority
   preemption picks victims exactly as the controller would.
3. The two outcomes are compared workload by workload (base first, so a snapshot that is not at rest does not
   show up as the pull request's doing):
   - ``preempted``: admitted under base, evicted under head (reason and message as Kueue writes them);
   - ``loses-quota``: admitted under base, without quota under head (removed queue or flavor, or displaced);
   - ``admissible``: pending under base, admitted under head;
   - ``pending-changed``: pending on both sides, but for another reason or in another ClusterQueue;
   - ``checks-changed``: holding quota on both sides, but admitted on one and waiting for admission checks on
     the other (a ClusterQueue gaining or losing an admission check).
4. Borrowing headroom per ClusterQueue and flavor-resource — how much it could still take beyond its own
   unused nominal quota, given the cohort's current usage — before and after; only changes are listed.

Trace impact (`compare_trace`): the simulator replays one trace on each side; mean and p95 wait per
ClusterQueue (time from submission, or from requeue, to quota reservation) before and after.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Literal

from gitopsq.admission import quota
from gitopsq.admission.engine import ADMITTED, QUOTA_RESERVED, Engine, View
from gitopsq.admission.quota import FlavorResource
from gitopsq.admission.topology import Settings, Topology, build_topology
from gitopsq.api import model as m
from gitopsq.simulate.replay import simulate
from gitopsq.simulate.scenario import Scenario, TraceWorkload
from gitopsq.simulate.text_report import percentile

ImpactKind = Literal["preempted", "loses-quota", "admissible", "pending-changed", "checks-changed"]
KIND_ORDER: tuple[ImpactKind, ...] = ("preempted", "loses-quota", "admissible", "pending-changed", "checks-changed")


@dataclass(frozen=True, slots=True)
class CurrentAdmission:
    cluster_queue: str
    flavors: Mapping[str, Mapping[str, str]]  # pod set -> resource -> flavor
    at: float  # when its quota was reserved (orders preemption victims)


@dataclass(frozen=True, slots=True)
class CurrentWorkload:
    """A workload that exists now: pending, or admitted with its current admission."""

    namespace: str
    name: str
    queue: str
    pod_sets: tuple[m.PodSet, ...]
    priority: int | None = None
    priority_class: str | None = None
    created: float = 0.0
    admitted: CurrentAdmission | None = None

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True, slots=True)
class WorkloadImpact:
    key: str
    kind: ImpactKind
    cluster_queue_before: str
    cluster_queue_after: str
    reason: str
    message: str
    state_after: str = ""  # Admitted | QuotaReserved | Pending under head
    flavors_after: str = ""  # "pod set: resource=flavor, …" when it holds quota under head

    @property
    def readmitted(self) -> bool:
        """A preempted workload that the same instant admits again (another flavor or after requeueing)."""
        return self.kind == "preempted" and self.state_after in (ADMITTED, QUOTA_RESERVED)


@dataclass(frozen=True, slots=True)
class HeadroomChange:
    cluster_queue: str
    flavor: str
    resource: str
    before: int | None  # milli-units; None: the queue does not offer it on that side
    after: int | None


@dataclass(frozen=True, slots=True)
class SnapshotImpact:
    workloads: int
    admitted_before: int
    admitted_after: int
    changes: tuple[WorkloadImpact, ...]
    headroom: tuple[HeadroomChange, ...]

    def of_kind(self, kind: ImpactKind) -> tuple[WorkloadImpact, ...]:
        return tuple(c for c in self.changes if c.kind == kind)


@dataclass(frozen=True, slots=True)
class WaitRow:
    cluster_queue: str
    admissions_before: int
    admissions_after: int
    mean_before: float
    mean_after: float
    p95_before: float
    p95_after: float


@dataclass(frozen=True, slots=True)
class TraceImpact:
    scenario: str
    workloads: int
    waits: tuple[WaitRow, ...]
    preempted_before: int
    preempted_after: int
    pending_before: int  # still pending at the end of the replay
    pending_after: int


def from_trace(workloads: Iterable[TraceWorkload]) -> tuple[CurrentWorkload, ...]:
    """Snapshot-file entries (the scenario ``workloads`` format) as current workloads."""
    return tuple(CurrentWorkload(
        namespace=t.namespace, name=t.name, queue=t.queue, pod_sets=t.pod_sets, priority=t.priority,
        priority_class=t.priority_class, created=t.submit_at,
        admitted=CurrentAdmission(t.admitted.cluster_queue, t.admitted.flavors, t.admitted.at)
        if t.admitted is not None else None) for t in workloads)


def _unplaceable(topology: Topology, w: CurrentWorkload) -> str:
    """Why ``w``'s current admission cannot stand on this side ('' when it can)."""
    assert w.admitted is not None
    cq = w.admitted.cluster_queue
    spec = topology.queues.get(cq)
    if spec is None:
        return f"ClusterQueue {cq} is removed"
    for pod_set, chosen in sorted(w.admitted.flavors.items()):
        for resource, flavor in sorted(chosen.items()):
            if (flavor, resource) not in spec.limits:
                return f"ClusterQueue {cq} no longer offers {resource} in flavor {flavor} (pod set {pod_set})"
    return ""


@dataclass(frozen=True, slots=True)
class _Side:
    views: Mapping[str, View]
    lost: Mapping[str, str]
    evicted: Mapping[str, tuple[str, str]]  # key -> (reason, message) of its first eviction
    headroom: Mapping[tuple[str, FlavorResource], int]


def _settle(objects: Sequence[m.QueueObject], settings: Settings, workloads: Sequence[CurrentWorkload],
            now: float) -> _Side:
    topology = build_topology(objects, settings)
    engine = Engine(topology)
    lost: dict[str, str] = {}
    for w in workloads:
        engine.submit(key=w.key, namespace=w.namespace, queue=w.queue, created=w.created, pod_sets=w.pod_sets,
                      priority=engine.priority_of(w.priority, w.priority_class))
        if w.admitted is not None:
            why = _unplaceable(topology, w)
            if why:
                lost[w.key] = why
            else:
                engine.restore(w.key, cluster_queue=w.admitted.cluster_queue, flavors=w.admitted.flavors,
                               at=w.admitted.at)
    engine.schedule(now)
    evicted: dict[str, tuple[str, str]] = {}
    for event in engine.take_events():
        if event.type in ("Preempted", "Evicted"):
            evicted.setdefault(event.workload, (event.reason, event.message))
    headroom = {}
    for name, node in engine.state.tree.queues.items():
        for fr, lim in node.limits.items():
            own_left = max(0, lim.nominal - node.usage.get(fr, 0))
            headroom[(name, fr)] = max(0, quota.available(node, fr) - own_left)
    return _Side({w.key: engine.view(w.key) for w in workloads}, lost, evicted, headroom)


def _holds_quota(view: View) -> bool:
    return view.state in (ADMITTED, QUOTA_RESERVED)


def _compare(key: str, before: _Side, after: _Side) -> WorkloadImpact | None:
    b, a = before.views[key], after.views[key]
    held_before, held_after = _holds_quota(b), _holds_quota(a)
    if held_before and key in after.lost:
        return WorkloadImpact(key, "loses-quota", b.cluster_queue, a.cluster_queue, "QuotaRemoved",
                              after.lost[key])
    if held_before and key in after.evicted and key not in before.evicted:
        reason, message = after.evicted[key]
        flavors = "; ".join(f"{ps}: " + ", ".join(f"{r}={f}" for r, f in sorted(per.items())) for ps, per in a.flavors)
        return WorkloadImpact(key, "preempted", b.cluster_queue, a.cluster_queue, reason, message, a.state, flavors)
    if held_before and not held_after:
        return WorkloadImpact(key, "loses-quota", b.cluster_queue, a.cluster_queue, a.reason, a.message)
    if not held_before and held_after:
        return WorkloadImpact(key, "admissible", b.cluster_queue, a.cluster_queue, "", "")
    if not held_before and not held_after and (b.reason, b.cluster_queue) != (a.reason, a.cluster_queue):
        return WorkloadImpact(key, "pending-changed", b.cluster_queue, a.cluster_queue, a.reason, a.message)
    if held_before and held_after and b.state != a.state:
        waits = "now waits for its admission checks" if a.state == QUOTA_RESERVED else \
            "no longer waits for admission checks"
        return WorkloadImpact(key, "checks-changed", b.cluster_queue, a.cluster_queue, "AdmissionCheck",
                              f"{b.state} → {a.state}: {waits}", a.state)
    return None


def assess(base: Sequence[m.QueueObject], head: Sequence[m.QueueObject], workloads: Iterable[CurrentWorkload], *,
           base_settings: Settings | None = None, head_settings: Settings | None = None,
           now: float | None = None) -> SnapshotImpact:
    """Compare what the admission engine does with today's workloads under base and under head."""
    ordered = sorted(workloads, key=lambda w: (w.created, w.key))
    instant = now if now is not None else max([0.0, *(w.created for w in ordered),
                                              *(w.admitted.at for w in ordered if w.admitted)])
    before = _settle(base, base_settings or Settings(), ordered, instant)
    after = _settle(head, head_settings or Settings(), ordered, instant)
    changes = [c for w in ordered if (c := _compare(w.key, before, after)) is not None]
    changes.sort(key=lambda c: (KIND_ORDER.index(c.kind), c.key))
    headroom = [HeadroomChange(cq, fr[0], fr[1], before.headroom.get((cq, fr)), after.headroom.get((cq, fr)))
                for cq, fr in sorted(before.headroom.keys() | after.headroom.keys())
                if before.headroom.get((cq, fr)) != after.headroom.get((cq, fr))]
    return SnapshotImpact(
        workloads=len(ordered),
        admitted_before=sum(1 for v in before.views.values() if _holds_quota(v)),
        admitted_after=sum(1 for v in after.views.values() if _holds_quota(v)),
        changes=tuple(changes), headroom=tuple(headroom))


def compare_trace(scenario: Scenario, base: Sequence[m.QueueObject], head: Sequence[m.QueueObject], *,
                  base_settings: Settings | None = None, head_settings: Settings | None = None) -> TraceImpact:
    """Replay ``scenario``'s workloads on base's and on head's queue definitions (its own objects ignored)."""
    runs = []
    for objects, settings in ((base, base_settings), (head, head_settings)):
        runs.append(simulate(replace(scenario, objects=tuple(objects), expectations=(),
                                     settings=settings or scenario.settings)))
    rb, rh = runs
    rows = []
    for cq in sorted(rb.waits.keys() | rh.waits.keys()):
        wb, wh = rb.waits.get(cq, ()), rh.waits.get(cq, ())
        if not wb and not wh:
            continue
        rows.append(WaitRow(cq, len(wb), len(wh), sum(wb) / len(wb) if wb else 0.0, sum(wh) / len(wh) if wh else 0.0,
                            percentile(wb, 0.95), percentile(wh, 0.95)))
    return TraceImpact(
        scenario=scenario.name, workloads=len(scenario.workloads), waits=tuple(rows),
        preempted_before=rb.count("Preempted"), preempted_after=rh.count("Preempted"),
        pending_before=sum(1 for w in rb.workloads.values() if w.state == "Pending"),
        pending_after=sum(1 for w in rh.workloads.values() if w.state == "Pending"))
