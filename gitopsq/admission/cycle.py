"""Scheduling cycles, run back to back until one instant settles (shared/research/kueue.md §1.1, §1.6).

One cycle is Kueue's: (1) pop the head of every active ClusterQueue; (2) nominate each head against the
current usage (flavor assignment, preemption targets); (3) order the entries (classical order or the fair
sharing tournament); (4) process them one by one, each seeing the usage of those before it: admit what still
fits, reserve quota for preemptors, requeue the rest with their reason; (5) mark the new victims preempted: they
keep their quota (Kueue's eviction is asynchronous) until a cycle changes nothing in their cohort tree, then
release it and go back to their queues; (6) requeue inadmissible workloads of every cohort tree whose capacity was
released.

Kueue admits at most one workload per ClusterQueue per cycle and sleeps between cycles; here cycles follow each
other within the same simulated instant until a cycle changes nothing, so an instant ends in the state Kueue
would reach after enough cycles with no clock advancing (see docs/admission.md for where that can differ).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field

from gitopsq.admission import fairsharing, quota
from gitopsq.admission import messages as msg
from gitopsq.admission.flavors import Mode, Nomination, assign_flavors
from gitopsq.admission.preemption import ClassicalPreemption, Preemptor, Target, policy_allows
from gitopsq.admission.quota import FlavorResource, QuotaNode
from gitopsq.admission.recall import tree_state
from gitopsq.admission.state import State, Status
from gitopsq.admission.topology import BATCHED, QueueSpec
from gitopsq.admission.workload import Assignment, Shape, WorkloadInfo, reduced, reducible

MAX_CYCLES_PER_INSTANT = 20_000  # a guard against preemption ping-pong; settled instants need far fewer
FIT, PREEMPT, NO_FIT = "Fit", "Preempt", "NoFit"


@dataclass(slots=True)
class Entry:
    w: WorkloadInfo
    spec: QueueSpec
    kind: str
    nomination: Nomination | None = None
    targets: list[Target] = field(default_factory=list)
    reason: str = ""
    message: str = ""
    always_inadmissible: bool = False  # namespace mismatch: not retried even by StrictFIFO
    reserve: dict[FlavorResource, int] = field(default_factory=dict)
    preemptor: bool = False  # issued preemptions last cycle and PrioritizePreemptorWorkloads is on: goes first
    generation: int = 0  # of the ClusterQueue when nominated (decides whether the flavor scan may resume)
    resumed: bool = False  # the flavor scan started after the first flavor somewhere (Kueue's LastAssignment)

    def order_key(self) -> tuple[int, int, int, float, int]:
        borrow = self.nomination.borrow if self.nomination else 0
        return (0 if self.preemptor else 1, borrow, -self.w.priority, self.w.created, self.w.seq)

    def copy(self) -> Entry:
        """An entry the cycle may change without changing this one."""
        return Entry(self.w, self.spec, self.kind, nomination=self.nomination, targets=list(self.targets),
                     reason=self.reason, message=self.message, always_inadmissible=self.always_inadmissible,
                     reserve=dict(self.reserve), preemptor=self.preemptor, generation=self.generation,
                     resumed=self.resumed)


def preemption_engine(state: State, *, protect: bool = True) -> ClassicalPreemption:
    """The victim search; ``protect`` leaves out the workloads already preempted at this instant."""
    protected = state.preempted_now if protect else frozenset()
    if state.topology.settings.fair_sharing:
        return fairsharing.FairPreemption(state.tree, state.admitted, state.topology, protected)
    return ClassicalPreemption(state.tree, state.admitted, protected, state.candidate_lists)


def _oracle_mode(targets: list[Target], cq: str) -> Mode:
    if not targets:
        return Mode.NO_CANDIDATES
    return Mode.PREEMPT if any(t.workload.cluster_queue == cq for t in targets) else Mode.RECLAIM


def _protection_matters(state: State, w: WorkloadInfo, spec: QueueSpec) -> bool:
    """Whether a workload preempted at this instant is admitted again in ``spec``'s cohort tree where ``w``'s
    policies allow preempting it: only then do the scan's check and the victim search differ."""
    readmitted = state.readmitted.get(state.root_by_queue[spec.name])
    if not readmitted:
        return False
    for key in readmitted:
        v = state.workloads[key]
        a = v.assignment
        assert a is not None
        policy = spec.preemption.within_cluster_queue if a.cluster_queue == spec.name \
            else spec.preemption.reclaim_within_cohort
        if policy_allows(policy, w, v):
            return True
    return False


def _to_reserve(node: QuotaNode, spec: QueueSpec, n: Nomination) -> dict[FlavorResource, int]:
    """Capacity a preemptor that cannot always reclaim holds for the rest of the cycle (Kueue's reservation)."""
    out: dict[FlavorResource, int] = {}
    for fr, req in n.usage.items():
        lim = spec.limits.get(fr)
        nominal = lim.nominal if lim else 0
        used = node.usage.get(fr, 0)
        if n.borrow > 0:
            amount = req if lim is None or lim.borrowing is None else min(req, nominal + lim.borrowing - used)
        else:
            amount = min(req, nominal - used)
        if amount > 0:
            out[fr] = amount
    return out


def nominate(state: State, w: WorkloadInfo, spec: QueueSpec, tree_states: dict[str, tuple[int, ...]] | None = None
             ) -> Entry:
    """Flavor assignment and, when needed, preemption targets for one head (Kueue ``nominate``); the outcome of
    the workload's last nomination when nothing it read has changed since (`recall`).

    ``tree_states``: `tree_state` by root, shared by nominations that all see one state (a cycle's heads)."""
    generation, resume = _resume(state, w, spec)
    root = state.root_by_queue[spec.name]
    current = tree_states.get(root) if tree_states is not None else None
    if current is None:
        current = tree_state(state.scopes[root])
        if tree_states is not None:
            tree_states[root] = current
    inputs = (spec.name, w.shape, generation, None if resume is None else tuple(resume.items()), current)
    remembered = state.nominations.get(w.key, inputs)
    if remembered is not None:
        return remembered.copy()
    entry = _nominate(state, w, spec, generation, resume, tree_key=current)
    state.nominations.put(w.key, inputs, entry.copy())
    return entry


def _resume(state: State, w: WorkloadInfo, spec: QueueSpec) -> tuple[int, Mapping[tuple[int, str], int] | None]:
    """The ClusterQueue's generation, and where the workload's flavor scans resume (None: from the first)."""
    # Kueue's lastAssignmentOutdated: the scan resumes where it stopped if that was in this or the previous
    # cycle, or if no workload has left the ClusterQueue since.
    generation = state.generation.get(spec.name, 0)
    fresh = state.cycle - w.last_cycle <= 1 or w.last_generation >= generation
    return generation, w.last_tried if fresh and state.topology.settings.preserve_flavor_scan_progress else None


def _nominate(state: State, w: WorkloadInfo, spec: QueueSpec, generation: int,
              resume: Mapping[tuple[int, str], int] | None, *, tree_key: tuple[int, ...]) -> Entry:
    """Partial admission: when the full size neither fits nor finds victims and some pod set has a ``minCount``,
    binary-search the smallest reduction that does (Kueue's PodSetReducer)."""
    entry = _nominate_shape(state, w, spec, w.shape, generation=generation, resume=resume, tree_key=tree_key)
    total = reducible(w.shape)
    if entry.kind != NO_FIT or total == 0 or entry.always_inadmissible:
        return entry
    best: Entry | None = None
    low, high = 1, total
    while low <= high:
        mid = (low + high) // 2
        trial = _nominate_shape(state, w, spec, reduced(w.shape, mid), generation=generation,
                                resume=resume, tree_key=tree_key)
        if trial.kind == NO_FIT:
            low = mid + 1
        else:
            best, high = trial, mid - 1
    return best or entry


def _nominate_shape(state: State, w: WorkloadInfo, spec: QueueSpec, shape: Shape, *, generation: int,
                    resume: Mapping[tuple[int, str], int] | None, tree_key: tuple[int, ...]) -> Entry:
    """``generation``, ``resume``: `_resume` (the caller's: nothing it reads changes during a nomination);
    ``tree_key``: `tree_state` of the workload's cohort tree (unchanged whenever a search starts: the oracle and
    the victim search restore the tree before returning)."""
    labels = state.topology.namespace_labels.get(w.namespace, {})
    if spec.namespace_selector is None or not spec.namespace_selector.matches(labels):
        return Entry(w, spec, NO_FIT, reason=msg.MISCONFIGURED, message=msg.NAMESPACE_MISMATCH,
                     always_inadmissible=True)
    node = state.tree.queues[spec.name]
    engine = preemption_engine(state)
    # The flavor scan asks Kueue's question (could preemption make room?) with every workload a candidate, even
    # one already preempted at this instant, which gitopsq will not preempt again (docs/admission.md): otherwise
    # a scan that Kueue stops at that flavor (whenCanPreempt: MayStopSearch) goes on to the next (random 170098).
    scan_engine = preemption_engine(state, protect=False) if _protection_matters(state, w, spec) else engine

    searched: dict[tuple[frozenset[tuple[FlavorResource, int]], frozenset[FlavorResource], bool], list[Target]] = {}

    def targets(requests: dict[FlavorResource, int], contested: frozenset[FlavorResource], *,
                scan: bool = False) -> list[Target]:
        # The oracle's single-resource search is often the final search too: run each search once.
        scan = scan and scan_engine is not engine
        key = (frozenset(requests.items()), contested, scan)
        if key not in searched:
            searched[key] = (scan_engine if scan else engine).targets(Preemptor(w, spec, requests, contested,
                                                                                 tree_key))
        return searched[key]

    def oracle(fr: FlavorResource, val: int) -> tuple[Mode, int]:
        found = targets({fr: val}, frozenset({fr}), scan=True)
        gone = [t.workload for t in found if t.workload.assignment is not None]
        for v in gone:
            assert v.assignment is not None
            quota.remove_all(state.tree.queues[v.assignment.cluster_queue], v.assignment.usage)
        borrow = quota.borrowing_level(node, fr, val)[0]
        for v in gone:
            assert v.assignment is not None
            quota.add_all(state.tree.queues[v.assignment.cluster_queue], v.assignment.usage)
        return _oracle_mode(found, spec.name), borrow

    pre = spec.preemption
    while_borrowing = (pre.borrow_within_cohort is not None and pre.borrow_within_cohort.policy != "Never") or (
        state.topology.settings.fair_sharing and pre.reclaim_within_cohort != "Never")
    n = assign_flavors(spec, node, shape, state.topology.flavors, oracle, preempt_while_borrowing=while_borrowing,
                       resume=resume)
    resumed = resume is not None and any(i != -1 for i in resume.values())
    if n.mode == Mode.FIT:
        return Entry(w, spec, FIT, n, generation=generation, resumed=resumed)
    if n.mode >= Mode.NO_CANDIDATES:
        found = targets(dict(n.usage), n.needs_preemption) if n.mode >= Mode.PREEMPT else []
        if found:
            return Entry(w, spec, PREEMPT, n, list(found), msg.WAITING_FOR_PREEMPTED,
                         msg.pending_preemption(n.message, len(found)), generation=generation, resumed=resumed)
        entry = Entry(w, spec, NO_FIT, n, reason=msg.WAITING_FOR_QUOTA, message=n.message, generation=generation,
                      resumed=resumed)
        if pre.reclaim_within_cohort != "Any":
            entry.reserve = _to_reserve(node, spec, n)
        return entry
    return Entry(w, spec, NO_FIT, n, reason=n.reason, message=n.message, generation=generation, resumed=resumed)


def _pop_head(state: State, spec: QueueSpec) -> tuple[WorkloadInfo | None, bool]:
    """The next head of one queue; BestEffortFIFO heads equivalent to one already found blocked are parked."""
    queue = state.queues[spec.name]
    parked = False
    while (w := queue.pop()) is not None:
        blocked = None if queue.strict else queue.blocked_shapes.get(w.equivalence())
        if blocked is None:
            return w, parked
        queue.park(w)
        current = state.status.get(w.key)
        if current is None or current.reason != msg.PENDING_EVALUATION:
            # A preempted workload moved aside with its equivalents keeps "pending evaluation", as in Kueue: no
            # scheduler pass looks at it, so nothing rewrites the condition its eviction left.
            state.status[w.key] = Status(*blocked)
        parked = True
    return None, parked


def _heads(state: State) -> tuple[list[tuple[QueueSpec, WorkloadInfo]], set[str]]:
    """One head per active ClusterQueue, in name order (the processing order is decided later), and the roots of
    the cohort trees where heads equivalent to a blocked one were parked."""
    heads = []
    parked: set[str] = set()
    for name, spec in state.topology.queues.items():
        if not spec.active or not state.queues[name].has_active():
            continue
        w, p = _pop_head(state, spec)
        if p:
            parked.add(state.root_by_queue[name])
        if w is not None:
            heads.append((spec, w))
    return heads, parked


def _fits(state: State, e: Entry, without: Iterable[WorkloadInfo]) -> bool:
    """Whether ``e``'s usage fits its ClusterQueue once ``without`` have released their quota."""
    assert e.nomination is not None
    removed = [w for w in without if w.assignment is not None]
    for v in removed:
        assert v.assignment is not None
        quota.remove_all(state.tree.queues[v.assignment.cluster_queue], v.assignment.usage)
    node = state.tree.queues[e.spec.name]
    ok = all(val <= quota.available(node, fr) for fr, val in e.nomination.usage.items())
    for v in removed:
        assert v.assignment is not None
        quota.add_all(state.tree.queues[v.assignment.cluster_queue], v.assignment.usage)
    return ok


def path_of(node: QuotaNode) -> str:
    names = [node.name, *(a.name for a in node.path_to_root())]
    return "/" + "/".join(reversed(names))


def _ordered(state: State, entries: list[Entry]) -> Iterator[Entry]:
    if state.topology.settings.fair_sharing:
        return fairsharing.tournament(state.tree, state.topology, entries)  # reads ``entries`` as it grows
    return iter(sorted(entries, key=Entry.order_key))


def scan_retries(spec: QueueSpec) -> int:
    """Immediate retries per instant of a head whose flavor scans could go on: one per flavor of its widest
    resource group. Kueue retries such a head every cycle for as long as nothing changes; which scan it is in
    when something does is timing (docs/differential.md, "What is compared")."""
    return max((len(g.flavors) for g in spec.groups), default=0)


def run_cycle(state: State, heads: list[tuple[QueueSpec, WorkloadInfo]], now: float) -> set[str]:
    """One scheduling cycle over ``heads``; returns the roots of the cohort trees it changed anything in."""
    state.cycle += 1
    tree_states: dict[str, tuple[int, ...]] = {}  # every head is nominated against the cycle-start state
    entries = [nominate(state, w, spec, tree_states) for spec, w in heads]
    for e in entries:
        e.preemptor = state.topology.settings.prioritize_preemptors and e.w.key in state.preemptors
    state.preemptors = set()
    fair = state.topology.settings.fair_sharing
    victims: dict[str, tuple[Target, WorkloadInfo]] = {}
    victims_by_root: dict[str, list[WorkloadInfo]] = {}  # the same workloads, by the cohort tree they are in
    held: list[tuple[QuotaNode, dict[FlavorResource, int]]] = []
    changed: set[str] = set()
    for e in _ordered(state, entries):
        queue = state.queues[e.spec.name]
        # Remember where the flavor scans stopped, for the next attempt (cleared again on admission).
        e.w.last_tried = e.nomination.tried if e.nomination else None
        e.w.last_generation = e.generation
        e.w.last_cycle = state.cycle
        node = state.tree.queues[e.spec.name]
        if e.kind == NO_FIT:
            state.status[e.w.key] = Status(e.reason, e.message)
            if e.reserve:
                quota.add_all(node, e.reserve)
                held.append((node, e.reserve))
            untried = e.nomination is not None and any(i != -1 for i in e.nomination.tried.values())
            # Kueue pops a StrictFIFO head again in every cycle: an attempt that resumed after the first flavor
            # and reached the last one is followed by a scan from the first flavor, which may fit.
            untried = untried or (queue.strict and e.resumed)
            if untried:
                # Scans of several groups or pod sets can take turns without ever all reaching their last
                # flavor; within one instant, one retry per flavor of the widest group is enough.
                retries = state.untried_retries.get(e.w.key, 0)
                untried = retries < scan_retries(e.spec)
                state.untried_retries[e.w.key] = retries + 1
            if (queue.strict or untried) and not e.always_inadmissible:
                queue.push(e.w)  # StrictFIFO keeps its head; flavors left untried get the next cycle
                if untried:
                    changed.add(state.root_by_queue[e.spec.name])
            else:
                queue.park(e.w)
                if not e.always_inadmissible and not queue.strict:
                    queue.blocked_shapes[e.w.equivalence()] = (e.reason, e.message)
                changed.add(state.root_by_queue[e.spec.name])
            continue
        assert e.nomination is not None
        if any(t.workload.key in victims for t in e.targets):
            state.status[e.w.key] = Status(msg.WAITING_FOR_QUOTA, msg.OVERLAPPING_TARGETS)
            queue.push(e.w)
            continue
        # Victims of other cohort trees cannot change whether this entry fits: their quota is left alone.
        gone = victims_by_root.get(state.root_by_queue[e.spec.name], []) + [t.workload for t in e.targets]
        if not _fits(state, e, gone):
            state.status[e.w.key] = Status(msg.WAITING_FOR_QUOTA, msg.NO_LONGER_FITS)
            queue.push(e.w)
            if any(i != -1 for i in e.nomination.tried.values()):
                # Its next attempt resumes at a later flavor (Kueue pops it again in the next cycle, a millisecond
                # on): its tree is not quiet yet, so victims there keep their quota (random 220046). Bounded
                # like the no-fit retries above, so a skip repeated every cycle cannot hold victims for ever.
                retries = state.untried_retries.get(e.w.key, 0)
                if retries < scan_retries(e.spec):
                    state.untried_retries[e.w.key] = retries + 1
                    changed.add(state.root_by_queue[e.spec.name])
            continue
        assignment = Assignment(e.spec.name, e.nomination.flavors, e.nomination.usage)
        if e.kind == FIT:
            changed.add(state.root_by_queue[e.spec.name])
            e.w.last_tried = None
            state.reserve(e.w, assignment, now, checks=e.spec.checks_for(assignment.flavors_used()))
            if fair and state.topology.settings.fair_sharing_look_ahead:
                # Look-ahead: the queue's next workload joins this cycle's tournament (docs/admission.md).
                nxt, _ = _pop_head(state, e.spec)
                if nxt is not None:
                    entries.append(nominate(state, nxt, e.spec))
            continue
        quota.add_all(node, e.nomination.usage)
        held.append((node, dict(e.nomination.usage)))
        for t in e.targets:
            victims[t.workload.key] = (t, e.w)
            victims_by_root.setdefault(state.root_by_queue[e.spec.name], []).append(t.workload)
            # A target still being evicted is Kueue's "preemption ongoing": nothing new happens.
            if not t.workload.evicting:
                changed.add(state.root_by_queue[e.spec.name])
        e.w.last_tried = None  # Kueue's markPreemptionOutcome: the next attempt scans every flavor again
        state.preemptors.add(e.w.key)
        state.status[e.w.key] = Status(e.reason, e.message)
        queue.push(e.w)
        if not queue.strict:
            queue.sticky = e.w
    for node, usage in held:
        quota.remove_all(node, usage)
    for target, preemptor in victims.values():
        victim = target.workload
        if victim.evicting:
            continue  # preempted in an earlier cycle; its eviction is still under way
        assert victim.assignment is not None and preemptor.cluster_queue is not None
        message = msg.preempted(target.reason, preemptor.key, path_of(state.tree.queues[preemptor.cluster_queue]),
                                path_of(state.tree.queues[victim.assignment.cluster_queue]))
        state.preempt(victim, now, reason=target.reason, message=message)
    return changed


def settle(state: State, now: float) -> None:
    """Run cycles at ``now`` until nothing changes (module docstring).

    Preempted workloads hold their quota until a cycle changes nothing in their cohort tree (`State.due_evictions`):
    Kueue's scheduler only sets their Evicted condition, and its cache keeps counting them until the job controller
    has cleared the reservation, while further cycles, each well under a millisecond without API writes, run
    meanwhile (random 150006: the victim still held in the ninth cycle after its preemption; another queue of its
    tree admitted a head in each of the two cycles after it). Other trees still busy do not hold it: their heads
    cannot use its quota, and a preemptor waiting for it would otherwise be nominated again, with a full
    preemption search, in every one of their cycles. With batched requeues (Kueue's default) the inadmissible
    workloads of a cohort tree whose capacity was released come back only when the instant is otherwise quiet:
    Kueue requeues them 1 s after the release, and its cycles, milliseconds apart, try everything already in the
    heaps first (new arrivals, StrictFIFO heads, preemptors). Immediate requeues bring them back after every cycle.
    """
    state.preempted_now = set()
    state.readmitted = {}
    state.untried_retries = {}
    state.nominations.clear()  # they were made with the last instant's `preempted_now`
    state.candidate_lists.clear()  # likewise
    batched = state.topology.settings.inadmissible_requeue == BATCHED
    if not batched:
        state.requeue_released()
    for _ in range(MAX_CYCLES_PER_INSTANT):
        heads, parked = _heads(state)
        changed = run_cycle(state, heads, now) if heads else set()
        changed |= parked
        if not batched:
            changed |= state.requeue_released()
        moving = bool(heads or parked) and bool(changed)
        # Victims of the trees this pass left alone release their quota (every victim once nothing moves).
        released = state.complete_evictions(now, changed if moving else frozenset())
        if moving or released:
            continue
        if batched and state.requeue_released():
            continue  # the batch fires once nothing else moves
        return
    state.complete_evictions(now)
    state.unsettled.append(now)  # the guard stopped this instant: a bug to report, never silent
