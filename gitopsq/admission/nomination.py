"""Nomination: one head's flavor assignment and preemption targets against the current usage (Kueue
``nominate``, shared/research/kueue.md §1.1, §1.4, §1.5).

An `Entry` carries the outcome into the cycle (`cycle.py`): FIT, PREEMPT (with its targets) or NO_FIT (with its
reason, and the capacity a preemptor that cannot always reclaim holds for the rest of the cycle). Partial admission
searches the smallest reduction that fits or finds victims; a nomination whose inputs have not changed since is
recalled rather than run again (`recall.py`).
"""

from __future__ import annotations

from collections.abc import Mapping

from gitopsq.admission import messages as msg
from gitopsq.admission import quota
from gitopsq.admission.entry import FIT, NO_FIT, PREEMPT, Entry
from gitopsq.admission.fair_preemption import FairPreemption
from gitopsq.admission.flavors import Mode, Nomination, assign_flavors
from gitopsq.admission.preemption import ClassicalPreemption, Preemptor, Target, policy_allows, without
from gitopsq.admission.quota import FlavorResource, QuotaNode
from gitopsq.admission.recall import nomination_inputs, tree_state
from gitopsq.admission.state import State
from gitopsq.admission.topology import QueueSpec
from gitopsq.admission.workload import Shape, WorkloadInfo, reduced, reducible


def preemption_engine(state: State, *, protect: bool = True) -> ClassicalPreemption:
    """The victim search; ``protect`` leaves out the workloads already preempted at this instant."""
    protected = state.preempted_now if protect else frozenset()
    if state.topology.settings.fair_sharing:
        return FairPreemption(state.tree, state.admitted, state.topology, protected)
    return ClassicalPreemption(state.tree, state.admitted, protected, state.candidate_lists, state.search_ceilings,
                               state.over_quota)


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
    inputs = nomination_inputs(spec.name, w.shape, generation, resume, current)
    if state.tas is not None:
        inputs = (*inputs, state.tas.version)  # placements read the nodes' usage, shared across cohort trees
    remembered = state.nominations.get(w.key, inputs)
    if remembered is not None:
        return remembered.copy()
    entry = _nominate(state, w, spec, generation, resume, tree_key=current)
    state.nominations.put(w.key, inputs, entry)  # the cycle may set its `preemptor`: `Entry.copy` drops that
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


class _Searches:
    """One nomination's victim searches, each run once (the oracle's single-resource search is often the final
    search too), and the flavor scan's oracle on top of them. A class rather than closures: closures referring to
    one another form reference cycles (one per nomination in the compiled engine) for the collector to find."""

    __slots__ = ("engine", "node", "scan_engine", "searched", "spec", "state", "tree_key", "w")

    def __init__(self, state: State, w: WorkloadInfo, spec: QueueSpec, node: QuotaNode, *,
                 engine: ClassicalPreemption, scan_engine: ClassicalPreemption, tree_key: tuple[int, ...]) -> None:
        self.state, self.w, self.spec, self.node = state, w, spec, node
        self.engine, self.scan_engine, self.tree_key = engine, scan_engine, tree_key
        self.searched: dict[tuple[frozenset[tuple[FlavorResource, int]], frozenset[FlavorResource], bool],
                            list[Target]] = {}

    def targets(self, requests: dict[FlavorResource, int], contested: frozenset[FlavorResource], *,
                scan: bool = False) -> list[Target]:
        scan = scan and self.scan_engine is not self.engine
        key = (frozenset(requests.items()), contested, scan)
        found = self.searched.get(key)
        if found is None:
            found = self.searched[key] = (self.scan_engine if scan else self.engine).targets(
                Preemptor(self.w, self.spec, requests, contested, self.tree_key))
        return found

    def oracle(self, fr: FlavorResource, val: int) -> tuple[Mode, int]:
        found = self.targets({fr: val}, frozenset({fr}), scan=True)
        if not found:
            return Mode.NO_CANDIDATES, 0  # the scan keeps its own borrowing level for a flavor without candidates
        with without(self.state.tree, [t.workload for t in found]):
            borrow = quota.borrowing_level(self.node, fr, val)[0]
        return _oracle_mode(found, self.spec.name), borrow


def _nominate_shape(state: State, w: WorkloadInfo, spec: QueueSpec, shape: Shape, *, generation: int,
                    resume: Mapping[tuple[int, str], int] | None, tree_key: tuple[int, ...]) -> Entry:
    """``generation``, ``resume``: `_resume` (the caller's: nothing it reads changes during a nomination);
    ``tree_key``: `tree_state` of the workload's cohort tree (unchanged whenever a search starts: the oracle and
    the victim search restore the tree before returning)."""
    # The API server labels every namespace with its own name, declared or not (topology adds it to declared ones).
    labels = state.topology.namespace_labels.get(w.namespace) or {"kubernetes.io/metadata.name": w.namespace}
    if spec.namespace_selector is None or not spec.namespace_selector.matches(labels):
        return Entry(w, spec, NO_FIT, reason=msg.MISCONFIGURED, message=msg.NAMESPACE_MISMATCH,
                     always_inadmissible=True)
    node = state.tree.queues[spec.name]
    engine = preemption_engine(state)
    # The flavor scan asks Kueue's question (could preemption make room?) with every workload a candidate, even
    # one already preempted at this instant, which gitopsq will not preempt again (docs/admission.md): otherwise
    # a scan that Kueue stops at that flavor (whenCanPreempt: MayStopSearch) goes on to the next (random 170098).
    scan_engine = preemption_engine(state, protect=False) if _protection_matters(state, w, spec) else engine
    search = _Searches(state, w, spec, node, engine=engine, scan_engine=scan_engine, tree_key=tree_key)
    pre = spec.preemption
    while_borrowing = (pre.borrow_within_cohort is not None and pre.borrow_within_cohort.policy != "Never") or (
        state.topology.settings.fair_sharing and pre.reclaim_within_cohort != "Never")
    n = assign_flavors(spec, node, shape, state.topology.flavors, search.oracle,
                       preempt_while_borrowing=while_borrowing, resume=resume, tas=state.tas)
    resumed = resume is not None and any(i != -1 for i in resume.values())
    if n.mode == Mode.FIT:
        return Entry(w, spec, FIT, n, generation=generation, resumed=resumed)
    if n.mode >= Mode.NO_CANDIDATES:
        found = search.targets(dict(n.usage), n.needs_preemption) if n.mode >= Mode.PREEMPT else []
        if found:
            return Entry(w, spec, PREEMPT, n, list(found), msg.WAITING_FOR_PREEMPTED,
                         msg.pending_preemption(n.message, len(found)), generation=generation, resumed=resumed)
        entry = Entry(w, spec, NO_FIT, n, reason=msg.WAITING_FOR_QUOTA, message=n.message, generation=generation,
                      resumed=resumed)
        if pre.reclaim_within_cohort != "Any":
            entry.reserve = _to_reserve(node, spec, n)
        return entry
    return Entry(w, spec, NO_FIT, n, reason=n.reason, message=n.message, generation=generation, resumed=resumed)

