"""Scheduling cycles, run back to back until one instant settles (shared/research/kueue.md §1.1, §1.6).

One cycle is Kueue's: (1) pop the head of every active ClusterQueue; (2) nominate each head against the
current usage (flavor assignment, preemption targets: `nomination.py`); (3) order the entries (classical order or
the fair sharing tournament); (4) process them one by one, each seeing the usage of those before it: admit what
still fits, reserve quota for preemptors, requeue the rest with their reason; (5) mark the new victims preempted:
they keep their quota (Kueue's eviction is asynchronous) until a cycle changes nothing in their cohort tree, then
release it and go back to their queues; (6) requeue inadmissible workloads of every cohort tree whose capacity was
released.

Kueue admits at most one workload per ClusterQueue per cycle and sleeps between cycles; here cycles follow each
other within the same simulated instant until a cycle changes nothing, so an instant ends in the state Kueue
would reach after enough cycles with no clock advancing (see docs/admission.md for where that can differ).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from gitopsq.admission import messages as msg
from gitopsq.admission import quota, tas_fit, tournament
from gitopsq.admission.entry import FIT, NO_FIT, PREEMPT, Entry
from gitopsq.admission.flavors import Nomination
from gitopsq.admission.messages import Status
from gitopsq.admission.nomination import nominate, preemption_engine
from gitopsq.admission.preemption import Target, without
from gitopsq.admission.quota import FlavorResource, QuotaNode
from gitopsq.admission.state import State
from gitopsq.admission.topology import BATCHED, QueueSpec
from gitopsq.admission.workload import Assignment, WorkloadInfo

# Nomination lives in `nomination.py`, the entry in `entry.py`; their names stay importable from here.
__all__ = ["FIT", "MAX_CYCLES_PER_INSTANT", "NO_FIT", "PREEMPT", "Entry", "nominate", "path_of",
           "preemption_engine", "run_cycle", "scan_retries", "settle"]

MAX_CYCLES_PER_INSTANT = 20_000  # a guard against preemption ping-pong; settled instants need far fewer


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
            state.status[w.key] = blocked
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


def path_of(node: QuotaNode) -> str:
    names = [node.name, *(a.name for a in node.path_to_root())]
    return "/" + "/".join(reversed(names))


def _ordered(state: State, entries: list[Entry]) -> Iterator[Entry]:
    if state.topology.settings.fair_sharing:
        return tournament.tournament(state.tree, state.topology, entries)  # reads ``entries`` as it grows
    return iter(sorted(entries, key=Entry.order_key))


def scan_retries(spec: QueueSpec) -> int:
    """Immediate retries per instant of a head whose flavor scans could go on: one per flavor of its widest
    resource group. Kueue retries such a head every cycle for as long as nothing changes; which scan it is in
    when something does is timing (docs/differential.md, "What is compared")."""
    return max((len(g.flavors) for g in spec.groups), default=0)


@dataclass(slots=True)
class _Cycle:
    """What one cycle accumulates while it processes its entries one by one."""

    state: State
    now: float
    entries: list[Entry]  # grows while processed: the look-ahead adds a queue's next head
    victims: dict[str, tuple[Target, WorkloadInfo]] = field(default_factory=dict)  # by key, with their preemptor
    victims_by_root: dict[str, list[WorkloadInfo]] = field(default_factory=dict)  # the same, by cohort tree
    held: list[tuple[QuotaNode, dict[FlavorResource, int]]] = field(default_factory=list)  # until the cycle ends
    changed: set[str] = field(default_factory=set)  # roots of the cohort trees where anything moved

    def touch(self, e: Entry) -> None:
        """``e``'s cohort tree is not quiet: its victims keep their quota a while longer (`State.due_evictions`)."""
        self.changed.add(self.state.root_by_queue[e.spec.name])

    def hold(self, node: QuotaNode, usage: dict[FlavorResource, int]) -> None:
        """Count ``usage`` at ``node`` for the rest of the cycle (a preemptor's quota, a reservation)."""
        quota.add_all(node, usage)
        self.held.append((node, usage))


def run_cycle(state: State, heads: list[tuple[QueueSpec, WorkloadInfo]], now: float) -> set[str]:
    """One scheduling cycle over ``heads``; returns the roots of the cohort trees it changed anything in.

    Kueue's phases (module docstring): (2) nominate every head, (3) order the entries, (4) process each with the
    helper for its outcome, then release what the cycle held and (5) mark the new victims preempted."""
    state.cycle += 1
    c = _Cycle(state, now, _nominate_heads(state, heads))  # (2)
    for e in _ordered(state, c.entries):  # (3) classical order, or the fair-sharing tournament
        _remember_scan(state, e)  # (4) one outcome per entry, each seeing the usage of those before it
        if e.kind == NO_FIT:
            _no_fit(c, e)
        elif any(t.workload.key in c.victims for t in e.targets):
            _overlapping_targets(c, e)
        elif not _still_fits(c, e):
            _no_longer_fits(c, e)
        elif e.kind == FIT:
            _admit(c, e)
        else:
            assert e.kind == PREEMPT
            _reserve_for_preemption(c, e)
    for node, usage in c.held:  # reservations and preemptors' quota count only within the cycle
        quota.remove_all(node, usage)
    _preempt_victims(c)  # (5)
    return c.changed


def _nominate_heads(state: State, heads: list[tuple[QueueSpec, WorkloadInfo]]) -> list[Entry]:
    """Phase 2: every head nominated against the cycle-start state; last cycle's preemptors go first if asked."""
    tree_states: dict[str, tuple[int, ...]] = {}  # one `tree_state` per cohort tree: nothing changes meanwhile
    entries = [nominate(state, w, spec, tree_states) for spec, w in heads]
    for e in entries:
        e.preemptor = state.topology.settings.prioritize_preemptors and e.w.key in state.preemptors
    state.preemptors = set()
    return entries


def _remember_scan(state: State, e: Entry) -> None:
    """Where the flavor scans stopped, for the next attempt (cleared again on admission and preemption)."""
    e.w.last_tried = e.nomination.tried if e.nomination else None
    e.w.last_generation = e.generation
    e.w.last_cycle = state.cycle


def _retry_untried(state: State, e: Entry) -> bool:
    """Whether ``e`` gets another immediate try for flavors its scan left untried: within one instant, one retry
    per flavor of its widest group (scans of several groups or pod sets can take turns without ever all reaching
    their last flavor)."""
    retries = state.untried_retries.get(e.w.key, 0)
    state.untried_retries[e.w.key] = retries + 1
    return retries < scan_retries(e.spec)


def _no_fit(c: _Cycle, e: Entry) -> None:
    """Neither fits nor finds victims: wait with the reason; a preemptor that cannot always reclaim holds capacity."""
    state = c.state
    queue = state.queues[e.spec.name]
    status = state.status[e.w.key] = Status(e.reason, e.message)
    if e.reserve:
        c.hold(state.tree.queues[e.spec.name], e.reserve)
    untried = e.nomination is not None and any(i != -1 for i in e.nomination.tried.values())
    # Kueue pops a StrictFIFO head again in every cycle: an attempt that resumed after the first flavor and reached
    # the last one is followed by a scan from the first flavor, which may fit.
    untried = untried or (queue.strict and e.resumed)
    if untried:
        untried = _retry_untried(state, e)
    if (queue.strict or untried) and not e.always_inadmissible:
        queue.push(e.w)  # StrictFIFO keeps its head; flavors left untried get the next cycle
        if untried:
            c.touch(e)
    else:
        queue.park(e.w)
        if not e.always_inadmissible and not queue.strict:
            queue.blocked_shapes[e.w.equivalence()] = status
        c.touch(e)


def _overlapping_targets(c: _Cycle, e: Entry) -> None:
    """A target is already another entry's victim in this cycle: try again next cycle."""
    _skipped(c, e, msg.OVERLAPPING_TARGETS)


def _still_fits(c: _Cycle, e: Entry) -> bool:
    """Whether ``e``'s usage fits its ClusterQueue now, once this cycle's victims in its cohort tree and its own
    targets have released their quota. Victims of other cohort trees cannot change that: they are left alone."""
    assert e.nomination is not None
    state = c.state
    gone = c.victims_by_root.get(state.root_by_queue[e.spec.name], []) + [t.workload for t in e.targets]
    node = state.tree.queues[e.spec.name]
    with without(state.tree, gone):
        fits = all(val <= quota.available(node, fr) for fr, val in e.nomination.usage.items())
    # An entry admitted earlier in the cycle may have taken the nodes this one was placed on: Kueue
    # (TASRecomputeAssignmentWithinSchedulingCycle) places it again in the flavors it was nominated in.
    n = e.nomination
    if fits and n.topology and state.tas is not None:
        flavors = state.topology.flavors
        if tas_fit.still_fits(state.tas, n.topology, flavors):
            return True
        counts = {p.pod_set: sum(c for _, c in p.placement.domains) for p in n.topology}
        again = tas_fit.place_workload(state.tas, e.w.shape, n.flavors, flavors,
                                       only_tas=tas_fit.tas_only(e.spec, flavors, state.tas), simulate_empty=False,
                                       counts=counts)
        if again.error or again.failed:
            return False
        e.nomination = Nomination(n.mode, n.borrow, n.flavors, n.usage, n.needs_preemption, n.reason, n.message,
                                  n.tried, again.placements)
    return fits


def _no_longer_fits(c: _Cycle, e: Entry) -> None:
    """Entries processed before it took the room it was nominated for: try again next cycle."""
    _skipped(c, e, msg.NO_LONGER_FITS)


def _skipped(c: _Cycle, e: Entry, message: str) -> None:
    """Skipped after its nomination (Kueue's ``markSkipped``: no longer fits, or overlapping preemption targets):
    requeued at once, its scan progress kept."""
    assert e.nomination is not None
    c.state.status[e.w.key] = Status(msg.WAITING_FOR_QUOTA, message)
    c.state.queues[e.spec.name].push(e.w)
    if any(i != -1 for i in e.nomination.tried.values()) and _retry_untried(c.state, e):
        # Its next attempt resumes at a later flavor (Kueue pops it again in the next cycle, a millisecond on):
        # its tree is not quiet yet, so victims there keep their quota (random 220046 for a skip as no longer
        # fitting, random 202612070032 for overlapping targets). Bounded like the no-fit retries, so a skip
        # repeated every cycle cannot hold victims for ever.
        c.touch(e)


def _admit(c: _Cycle, e: Entry) -> None:
    """Fits: reserve its quota (admitted unless admission checks apply); with the fair-sharing look-ahead, the
    queue's next head joins this cycle's tournament (docs/admission.md)."""
    assert e.nomination is not None
    state = c.state
    c.touch(e)
    e.w.last_tried = None
    assignment = Assignment(e.spec.name, e.nomination.flavors, e.nomination.usage, e.nomination.topology)
    state.reserve(e.w, assignment, c.now, checks=e.spec.checks_for(assignment.flavors_used()))
    settings = state.topology.settings
    if settings.fair_sharing and settings.fair_sharing_look_ahead:
        nxt, _ = _pop_head(state, e.spec)
        if nxt is not None:
            c.entries.append(nominate(state, nxt, e.spec))


def _reserve_for_preemption(c: _Cycle, e: Entry) -> None:
    """Fits once its targets are gone: its quota is held for the rest of the cycle, the targets become victims,
    and it waits in its queue (first in line unless StrictFIFO) for their eviction."""
    assert e.nomination is not None
    state = c.state
    root = state.root_by_queue[e.spec.name]
    c.hold(state.tree.queues[e.spec.name], dict(e.nomination.usage))
    for t in e.targets:
        c.victims[t.workload.key] = (t, e.w)
        c.victims_by_root.setdefault(root, []).append(t.workload)
        # A target still being evicted is Kueue's "preemption ongoing": nothing new happens.
        if not t.workload.evicting:
            c.changed.add(root)
    e.w.last_tried = None  # Kueue's markPreemptionOutcome: the next attempt scans every flavor again
    state.preemptors.add(e.w.key)
    state.status[e.w.key] = Status(e.reason, e.message)
    queue = state.queues[e.spec.name]
    queue.push(e.w)
    if not queue.strict:
        queue.sticky = e.w


def _preempt_victims(c: _Cycle) -> None:
    """Phase 5: mark this cycle's new victims preempted (they hold their quota until `State.complete_evictions`)."""
    state = c.state
    for target, preemptor in c.victims.values():
        victim = target.workload
        if victim.evicting:
            continue  # preempted in an earlier cycle; its eviction is still under way
        assert victim.assignment is not None and preemptor.cluster_queue is not None
        message = msg.preempted(target.reason, preemptor.key, path_of(state.tree.queues[preemptor.cluster_queue]),
                                path_of(state.tree.queues[victim.assignment.cluster_queue]))
        state.preempt(victim, c.now, reason=target.reason, message=message)


def settle(state: State, now: float, *, enough: int | None = None) -> None:
    """Run cycles at ``now`` until nothing changes (module docstring), or, with ``enough``, until the cycles run
    have reserved quota for at least that many workloads. The live loop writes at most that many admissions a
    pass and decides the rest afresh in the next one (docs/admission-loop.md): the cycles after that point would
    only fill the quota with admissions it will not write, and reclaim them from each other within the instant.

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
    state.search_ceilings.clear()  # named by those lists
    state.over_quota.clear()  # named by tree states of this instant's searches
    batched = state.topology.settings.inadmissible_requeue == BATCHED
    if not batched:
        state.requeue_released()
    state.reserved_now = 0
    for _ in range(MAX_CYCLES_PER_INSTANT):
        heads, parked = _heads(state)
        changed = run_cycle(state, heads, now) if heads else set()
        if enough is not None and state.reserved_now >= enough:
            return  # the rest of the instant is the next pass's
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
