"""The decision half of an admission pass: the admission core asked about live Workloads, no I/O.

`decide` restores admitted work, queues pending work (optionally only the oldest ``window`` of each group of
identical Workloads), settles ``now`` and says what to evict, admit and explain; `heads` picks the pending
Workloads worth a reason; `next_window` sizes the next pass's window.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence, Set
from dataclasses import dataclass, field

from gitopsq.admission.dominant_share import DominantShare, drs
from gitopsq.admission.engine import ADMITTED as V_ADMITTED
from gitopsq.admission.engine import PENDING as V_PENDING
from gitopsq.admission.engine import QUOTA_RESERVED as V_RESERVED
from gitopsq.admission.engine import Engine
from gitopsq.admission.topology import Topology
from gitopsq.admission_loop.live_workload import ADMITTED, EVICTING, PENDING, LiveWorkload
from gitopsq.admission_loop.partial import admitted_counts
from gitopsq.admission_loop.workload_status import Flavors

MIN_WINDOW = 8  # per LocalQueue, priority and shape, at least this many waiting workloads reach the engine
# ... unless groups are so many that the windows would hand the engine more than this many waiting Workloads:
# a thousand ClusterQueues with three shapes each gave it 24,000 at 8 a group, and a pass writes at most the
# client's burst (100) — from the first cycles, where only each queue's first head counts (`window_floor`).
ENGINE_BUDGET = 10_000


@dataclass(frozen=True, slots=True)
class Admission:
    """Reserve quota in ``cluster_queue`` with these flavors; Admitted at once unless ``checks`` remain."""

    cluster_queue: str
    flavors: Flavors  # pod set -> resource -> flavor
    checks: tuple[str, ...]  # admission checks the Workload waits for, sorted
    counts: Mapping[str, int] | None = None  # partial admission: pod set -> pods admitted (None: full size)


@dataclass(frozen=True, slots=True)
class Eviction:
    """Evict an admitted Workload: ``kind`` is the engine's event type (``Preempted`` or ``Evicted``)."""

    kind: str
    reason: str
    message: str
    by_cluster_queue: str  # the preemptor's ClusterQueue, when known
    requeue_state: Mapping[str, object] | None = None  # written with the eviction (waitForPodsReady's backoff)


@dataclass(frozen=True, slots=True)
class PendingReason:
    """Why a waiting Workload is not admitted (its ``QuotaReserved=False`` condition)."""

    reason: str
    message: str


@dataclass(frozen=True, slots=True)
class QueuePosition:
    """Where a waiting Workload stands: its ClusterQueue ("" when it reaches none), then priority and age."""

    cluster_queue: str
    negative_priority: int
    created: float


@dataclass(slots=True)
class Decisions:
    """What one pass writes, by Workload key."""

    admit: dict[str, Admission] = field(default_factory=dict)  # in the engine's admission order
    evict: dict[str, Eviction] = field(default_factory=dict)
    pending: dict[str, PendingReason] = field(default_factory=dict)
    deferred: int = 0  # admissions held back: their quota tree evicted something this pass
    order: dict[str, QueuePosition] = field(default_factory=dict)  # every waiting Workload
    behind: dict[str, str] = field(default_factory=dict)  # pending, not a head: its reason (for metrics)
    active: set[str] = field(default_factory=set)  # pending and still in the admission queue (for metrics)
    shares: dict[str, tuple[str, float]] = field(default_factory=dict)  # fair sharing: CQ -> (cohort, share)
    cohort_shares: dict[str, float] = field(default_factory=dict)
    # ClusterQueue -> the reason of its first explained head: what the waiting Workloads behind it are counted
    # under (for metrics; the pass adds those beyond the window, which it counts from the index)
    head_reasons: dict[str, str] = field(default_factory=dict)
    groups: int = 0  # groups of identical waiting Workloads the window was applied to (`next_window`)


def decide(topology: Topology, live: Mapping[str, LiveWorkload], now: float,
           heads_per_queue: int | None = None, window: int | None = None, *, explain_all: bool = True,
           enough: int | None = None) -> Decisions:
    """The adapter over the admission core: restore admitted work, queue pending work, settle ``now`` (with
    ``enough``, through the cycle that reserves quota for that many: the pass writes no more than that; its first
    admissions are the first a full settle makes, unless later cycles would have reclaimed them, `cycle.settle`).

    ``pending`` gets the reason of every waiting workload, or with ``heads_per_queue`` only of the first ones
    of each ClusterQueue (`heads`); the others go to ``behind`` with the reason the engine already had (or
    their head's), which is what the metrics count.

    ``window``: of the pending workloads of one LocalQueue with the same priority and pod sets, only the
    oldest ``window`` are given to the engine. Identical workloads of one queue are admitted in FIFO order,
    so while no more than ``window`` of them can be written in this pass the decisions written are the
    same, and a pass at 10,000 waiting workloads costs what one at a few hundred does.

    ``explain_all=False``: ``behind`` is left empty (no metrics to feed), so the waiting workloads beyond the
    window cost one grouping step each and nothing else."""
    engine = Engine(topology)
    submitted: list[tuple[LiveWorkload, int]] = []
    groups: dict[tuple[str, str, int, int], list[tuple[LiveWorkload, int]]] = {}
    outside: list[tuple[LiveWorkload, int]] = []  # pending, beyond the window: (workload, priority)
    for w in live.values():
        state = w.state
        if state not in (ADMITTED, EVICTING, PENDING):
            continue  # finished or inactive
        if state != PENDING and w.cluster_queue not in topology.queues:
            continue  # its ClusterQueue is gone: nothing to account the usage against
        priority = w.priority if w.priority is not None else engine.priority_of(None, w.priority_class)
        if window is not None and state == PENDING:
            groups.setdefault((w.namespace, w.queue, priority, id(w.pod_sets)), []).append((w, priority))
        else:
            submitted.append((w, priority))
    for members in groups.values():  # the oldest ``window`` of each group reach the engine
        if len(members) > (window or 0):
            members.sort(key=_age)
            outside.extend(members[window:])
            del members[window:]
        submitted.extend(members)
    submitted.sort(key=_age)
    for w, priority in submitted:
        engine.submit(key=w.key, namespace=w.namespace, queue=w.queue, priority=priority, created=w.created,
                      pod_sets=w.pod_sets)
        if w.state != PENDING and w.cluster_queue is not None:
            engine.restore(w.key, cluster_queue=w.cluster_queue, flavors=w.flavors, at=w.reserved_at,
                           evicting=w.state == EVICTING)
    skipped = {w.key for w, _ in outside}
    engine.schedule(now, enough=enough)
    out = Decisions(groups=len(groups))
    tried = set(engine.state.status)  # found inadmissible by a cycle (before any reason is asked for below)
    blocked: set[str] = set()
    preemptor_cq: dict[str, str] = {}
    events = engine.take_events()
    rank: dict[str, int] = {}  # the engine's admission order
    static: set[str] = set()  # pending, held by their queue: their reason needs no nomination
    released: set[str] = set()  # trees where a victim's quota came back within the instant
    after_release: set[str] = set()  # reserved in such a tree after that: waits for the victims' real release
    for e in events:
        if e.type == "QuotaReserved":
            rank.setdefault(e.workload, len(rank))
            if engine.state.root_of(e.cluster_queue) in released:
                after_release.add(e.workload)
        elif e.type == "Requeued" and e.reason == "Preempted" and e.cluster_queue \
                and live[e.workload].state != PENDING:  # a victim holding quota on the cluster, not the instant's own
            released.add(engine.state.root_of(e.cluster_queue))
        elif e.type in ("Preempted", "Evicted") and live[e.workload].state != PENDING:
            root = engine.state.root_of(e.cluster_queue)
            blocked.add(root)
            if root in released:
                # The settle ran ahead of the cluster: this preemption is for a head that only comes up once the
                # earlier victims are gone. Kueue tries one head per ClusterQueue per cycle and waits for its
                # victims; by then work finishing may have made room, so it is decided afresh in a later pass.
                continue
            if live[e.workload].state == ADMITTED and e.workload not in out.evict:
                out.evict[e.workload] = Eviction(e.type, e.reason, _with_uids(e.message, live),
                                                 preemptor_cq.get(e.workload, ""))
    for key, w in live.items():
        if w.state != PENDING or key in skipped:
            continue
        if key in rank:  # reserved quota in this instant
            v = engine.view(key)
            if v.state in (V_ADMITTED, V_RESERVED):
                if engine.state.root_of(v.cluster_queue) in blocked or key in after_release:
                    out.deferred += 1
                    continue
                flavors = {ps: dict(per) for ps, per in v.flavors}
                reserved = engine.state.workloads[key]
                counts = admitted_counts(reserved.shape, reserved.assignment.usage) if reserved.assignment else None
                out.admit[key] = Admission(v.cluster_queue, flavors, tuple(sorted(reserved.checks)), counts)
                continue
        info = engine.state.workloads.get(key)
        lq = topology.local_queues.get((w.namespace, w.queue))
        out.order[key] = QueuePosition(lq.cluster_queue if lq else "", -(info.priority if info else 0), w.created)
        spec = topology.queues.get(lq.cluster_queue) if lq is not None else None
        if lq is not None and (lq.stop_policy != "None" or spec is None or not spec.active):
            static.add(key)
    # Explaining a workload no cycle looked at costs a dry nomination: only the heads get one. Workloads held by
    # their queue (a stopped LocalQueue, an inactive or missing ClusterQueue) have their reason already and
    # are all explained, as Kueue's workload controller does; they never take a head's place.
    worth = set(out.order) if heads_per_queue is None else heads(out, heads_per_queue, static) | static
    head_reason: dict[str, str] = {}
    for key in sorted(worth, key=lambda k: (out.order[k].negative_priority, out.order[k].created)):
        v = engine.view(key)
        if v.state == V_PENDING:
            out.pending[key] = PendingReason(v.reason, v.message)
            head_reason.setdefault(out.order[key].cluster_queue, v.reason)
    out.head_reasons = head_reason
    if explain_all:
        out.active = _still_queued(topology, out.order, tried, static, {w.key for w, _ in outside})
        if topology.settings.fair_sharing:
            out.shares, out.cohort_shares = _shares(engine, topology)
        for key, position in out.order.items():
            if key not in out.pending:
                status = engine.state.status.get(key)
                out.behind[key] = status.reason if status is not None else head_reason.get(position.cluster_queue,
                                                                                           "Pending")
        for w, priority in outside:
            lq = topology.local_queues.get((w.namespace, w.queue))
            out.order[w.key] = QueuePosition(lq.cluster_queue if lq else "", -priority, w.created)
            out.behind[w.key] = head_reason.get(out.order[w.key].cluster_queue, "Pending")
    out.admit = dict(sorted(out.admit.items(), key=lambda kv: (rank.get(kv[0], len(rank)), kv[0])))
    return out


def _still_queued(topology: Topology, order: Mapping[str, QueuePosition], tried: Set[str], held: Set[str],
                  outside: Set[str]) -> set[str]:
    """Kueue's ``pending_workloads{status="active"}``: waiting Workloads still in their ClusterQueue's heap. A
    StrictFIFO queue keeps its head there (and so everything behind it); a BestEffortFIFO one parks a Workload
    a cycle found inadmissible until something changes. Held ones (stopped or inactive queues) are parked."""
    out = set()
    for key, position in order.items():
        spec = topology.queues.get(position.cluster_queue)
        if spec is None or key in held:
            continue
        if spec.strict_fifo or key in outside or key not in tried:
            out.add(key)
    return out


def _shares(engine: Engine, topology: Topology) -> tuple[dict[str, tuple[str, float]], dict[str, float]]:
    """Fair sharing's weighted share of every ClusterQueue and cohort after the pass (NaN: weight 0, borrowing)."""
    def value(share: DominantShare) -> float:
        return math.nan if math.isinf(share.weighted) else share.weighted

    tree = engine.state.tree
    queues = {name: (topology.queues[name].cohort or "", value(drs(node, topology)))
              for name, node in tree.queues.items() if name in topology.queues}
    return queues, {name: value(drs(node, topology)) for name, node in tree.cohorts.items()}


def window_floor(groups: int) -> int:
    """The least window of a pass whose last one saw ``groups`` groups of waiting Workloads: `MIN_WINDOW`, or
    less when ``groups`` × `MIN_WINDOW` passes `ENGINE_BUDGET` (never below one: every group's oldest)."""
    return max(1, min(MIN_WINDOW, ENGINE_BUDGET // groups)) if groups else MIN_WINDOW


def next_window(window: int, admitted: Sequence[LiveWorkload], groups: int = 0) -> int:
    """The engine's window for the next pass: twice the most one group of identical waiting Workloads got in
    this pass (at least `window_floor`), doubled when a group used the whole window, and no more than
    `ENGINE_BUDGET` spread over the ``groups`` this pass saw. While quota, not the request budget, limits
    admissions (each group gets one or two a pass) the engine sees a few Workloads per group, and a pass stays
    short; when one group can take many, the window grows to follow, as far as the budget allows."""
    per_group: dict[tuple[str, str, int | None, str | None, int], int] = {}
    for w in admitted:
        group = (w.namespace, w.queue, w.priority, w.priority_class, id(w.pod_sets))
        per_group[group] = per_group.get(group, 0) + 1
    most = max(per_group.values(), default=0)
    floor = window_floor(groups)
    proposed = max(floor, window * 2 if most >= window else most * 2)
    return min(proposed, max(floor, ENGINE_BUDGET // groups)) if groups else proposed


def _age(entry: tuple[LiveWorkload, int]) -> tuple[float, str]:
    return entry[0].created, entry[0].key


def heads(decisions: Decisions, per_queue: int, held: Set[str] = frozenset()) -> set[str]:
    """The pending workloads whose reason is worth writing: the first ``per_queue`` of each ClusterQueue in
    queue order (priority, then age), the ones the next admission attempt looks at, and every workload that
    reaches no ClusterQueue. Kueue, too, writes a reason only for the heads it tried (#8095: writing one for
    every waiting workload costs the request budget admissions need). ``held`` workloads (their queue
    stopped or inactive) are no candidates: they would take the place of a head the scheduler does try."""
    by_queue: dict[str, list[tuple[int, float, str]]] = {}
    out: set[str] = set()
    for key, position in decisions.order.items():
        if key in held:
            continue
        if not position.cluster_queue:
            out.add(key)
        else:
            by_queue.setdefault(position.cluster_queue, []).append((position.negative_priority, position.created,
                                                                    key))
    for entries in by_queue.values():
        out.update(key for _, _, key in sorted(entries)[:per_queue])
    return out


def _with_uids(message: str, live: Mapping[str, LiveWorkload]) -> str:
    """The engine names the preemptor by key; the API shows its UID and its job's UID, as Kueue does."""
    start = message.find("(UID: ")
    end = message.find(", JobUID: UNKNOWN)")
    if start < 0 or end < 0:
        return message
    key = message[start + 6:end]
    w = live.get(key)
    if w is None:
        return message
    job_uid = ((w.raw.get("metadata") or {}).get("labels") or {}).get("kueue.x-k8s.io/job-uid", "UNKNOWN")
    return f"{message[:start]}(UID: {w.uid}, JobUID: {job_uid}){message[end + len(', JobUID: UNKNOWN)'):]}"
