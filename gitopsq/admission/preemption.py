"""Classical preemption: which admitted workloads to evict so a pending one fits (shared/research/kueue.md §1.4).

1. Candidates use at least one contested flavor-resource. Same-queue candidates need ``withinClusterQueue``;
   other queues' candidates need ``reclaimWithinCohort`` and are collected walking up from the preemptor's
   cohort to the root, skipping subtrees within their quota; only queues over their quota give candidates.
   Each other-queue candidate gets a variant: hierarchical reclaim (the preemptor's requests fit in its own
   queue's or a visited ancestor's quota), reclaim without borrowing, or reclaim while borrowing
   (``borrowWithinCohort`` and ``maxPriorityThreshold``).
2. Each list is ordered by `candidate_order`; the final order is hierarchy, priority, then same-queue, the
   workloads of all three still being evicted (preempted in an earlier cycle of the instant) before the rest.
3. One or two attempts, with and without letting the preemptor borrow, in Kueue's order (`_attempts`).
4. Per attempt remove candidates in order until the preemptor fits, then put back, newest removal first
   (except the last), whatever is not needed: the minimal victim set.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Iterator, Mapping
from collections.abc import Set as AbstractSet
from contextlib import contextmanager
from dataclasses import dataclass
from operator import attrgetter
from typing import cast

from gitopsq.admission import messages as msg
from gitopsq.admission import quota
from gitopsq.admission.holders import Holders
from gitopsq.admission.quota import FlavorResource, QuotaNode, QuotaTree
from gitopsq.admission.recall import Memo, candidates_key, ceilings_key
from gitopsq.admission.topology import QueueSpec
from gitopsq.admission.workload import WorkloadInfo

NEVER, WITHIN_CQ, HIERARCHICAL, WITHOUT_BORROWING, WHILE_BORROWING = range(5)
_REASON = {WITHIN_CQ: msg.IN_CLUSTER_QUEUE, HIERARCHICAL: msg.IN_COHORT_RECLAMATION,
           WITHOUT_BORROWING: msg.IN_COHORT_RECLAMATION, WHILE_BORROWING: msg.IN_COHORT_RECLAIM_WHILE_BORROWING}


@dataclass(frozen=True, slots=True)
class Target:
    """A workload to evict, and the Preempted condition reason it gets."""

    workload: WorkloadInfo
    reason: str


@dataclass(frozen=True, slots=True)
class Preemptor:
    """What preemption needs to know about the incoming workload."""

    workload: WorkloadInfo
    spec: QueueSpec
    requests: Mapping[FlavorResource, int]  # its full usage under the nominated assignment
    contested: frozenset[FlavorResource]  # flavor-resources that need preemption
    # `recall.tree_state` of the preemptor's cohort tree as the search sees it (None: unknown, nothing shared)
    tree_key: tuple[int, ...] | None = None


@dataclass(slots=True)
class _Candidate:
    workload: WorkloadInfo
    lca: QuotaNode | None
    variant: int
    order: tuple[int, int, int, float, int]  # `candidate_order` for the preemptor's ClusterQueue
    node: QuotaNode | None  # the quota node of the workload's ClusterQueue (looked up once, not per check)


Lists = tuple[list[_Candidate], list[_Candidate], list[_Candidate]]  # `ClassicalPreemption.candidates`
Ceilings = dict[FlavorResource, int]  # `ClassicalPreemption.targets`: the most of each the preemptor could get

# In C: candidate lists are sorted with it ~600,000 times an instant.
_order_of = attrgetter("order")


def candidate_order(w: WorkloadInfo, preemptor_cq: str) -> tuple[int, int, int, float, int]:
    """Kueue's ``CandidatesOrdering``: workloads already being evicted first, then other queues, lower priority,
    most recently reserved, then id."""
    return (0 if w.evicting else 1, 1 if w.cluster_queue == preemptor_cq else 0, w.priority,
            -(w.reserved_at or 0.0), w.seq)


def policy_allows(policy: str, preemptor: WorkloadInfo, candidate: WorkloadInfo) -> bool:
    if policy == "Any":
        return True
    if policy == "LowerPriority":
        return candidate.priority < preemptor.priority
    if policy == "LowerOrNewerEqualPriority":
        return candidate.priority < preemptor.priority or (
            candidate.priority == preemptor.priority and preemptor.created < candidate.created)
    return False


def uses(w: WorkloadInfo, frs: Iterable[FlavorResource]) -> bool:
    usage = w.assignment.usage if w.assignment else {}
    return any(fr in usage for fr in frs)


def workload_fits(p: Preemptor, node: QuotaNode, allow_borrowing: bool) -> bool:
    for fr, val in p.requests.items():
        if not allow_borrowing and node.borrowing_with(fr, val):
            return False
        if val > quota.available(node, fr):
            return False
    return True


def _over_quota_below(node: QuotaNode, lca: QuotaNode | None, contested: frozenset[FlavorResource]) -> bool:
    """Whether ``node`` and its ancestors up to, not including, ``lca`` are each over their quota on a contested
    resource (`quota.within_nominal` negated, inlined: asked per candidate per search)."""
    current: QuotaNode | None = node
    while current is not None and current is not lca:
        usage, subtree = current.usage, current.subtree
        for fr in contested:
            if usage.get(fr, 0) > subtree.get(fr, 0):
                break
        else:
            return False
        current = current.parent
    return True


@contextmanager
def without(tree: QuotaTree, victims: Iterable[WorkloadInfo]) -> Iterator[None]:
    """The tree's usage as if ``victims`` had released their quota, restored on leaving (also on an exception).

    What preemption and the cycle measure before any victim is really evicted: whether a workload would fit, or
    which share a queue would have, once the victims are gone."""
    removed: list[tuple[QuotaNode, Mapping[FlavorResource, int]]] = []
    try:
        for v in victims:
            a = v.assignment
            if a is not None:
                node = tree.queues[a.cluster_queue]
                quota.remove_all(node, a.usage)
                removed.append((node, a.usage))
        yield
    finally:
        for node, usage in removed:
            quota.add_all(node, usage)


class ClassicalPreemption:
    """Finds victims in one snapshot state; the tree is restored before every method returns."""

    def __init__(self, tree: QuotaTree, admitted: Mapping[str, Mapping[str, WorkloadInfo]],  # noqa: PLR0917
                 protected: AbstractSet[str] = frozenset(), shared: Memo[Lists] | None = None,
                 ceilings: Memo[Ceilings] | None = None, over_quota: Memo[tuple[QuotaNode, ...]] | None = None) -> None:
        self.tree, self.admitted = tree, admitted
        # Preempted (and evicted) once already in this instant: not a candidate again (a victim still being
        # evicted is not in it: it stays a candidate, and comes first, `candidate_order`).
        self.protected = protected
        # `candidates` by everything they read, shared by the searches of one instant (`State.candidate_lists`):
        # protected must only gain workloads as they stop holding quota (`State.preempted_now`), and the memo be
        # emptied with it: which holders it leaves out then follows from the tree state the key names.
        self.shared = shared
        # Per shared candidate lists and attempt, what a search that took every candidate it could still lacked
        # (`targets`); and `_over_quota_queues` by cohort, contested and tree state: the lifetime of ``shared``.
        self.ceilings, self.over_quota = ceilings, over_quota

    def _variant(self, p: Preemptor, w: WorkloadInfo, advantage: bool) -> int:
        same = w.cluster_queue == p.spec.name
        pre = p.spec.preemption
        policy = pre.within_cluster_queue if same else pre.reclaim_within_cohort
        if not uses(w, p.contested) or not policy_allows(policy, p.workload, w):
            return NEVER
        if same:
            return WITHIN_CQ
        if advantage:
            return HIERARCHICAL
        bwc = pre.borrow_within_cohort
        if bwc is None or bwc.policy == "Never":
            return WITHOUT_BORROWING
        if w.priority >= p.workload.priority or (
                bwc.max_priority_threshold is not None and w.priority > bwc.max_priority_threshold):
            return WITHOUT_BORROWING
        return WHILE_BORROWING

    def _from_queue(self, p: Preemptor, cq: str, lca: QuotaNode | None, advantage: bool) -> list[_Candidate]:
        pre = p.spec.preemption
        same = cq == p.spec.name
        policy = pre.within_cluster_queue if same else pre.reclaim_within_cohort
        if policy == "Never":
            return []
        holders = self.admitted.get(cq, {})
        # Everything `_candidates_in` reads besides the holders themselves (`Holders.derived` is emptied when
        # they change); `protected` is applied afterwards.
        bwc = pre.borrow_within_cohort
        # ``borrowWithinCohort`` by its fields: a dataclass's hash is a Python call, this key is hashed per queue.
        key = (same, policy, p.workload.priority,
               p.workload.created if policy == "LowerOrNewerEqualPriority" else None, p.contested, lca,
               None if same else (advantage, None if bwc is None else (bwc.policy, bwc.max_priority_threshold)))
        derived = holders.derived if isinstance(holders, Holders) else None
        remembered = derived.get(key) if derived is not None else None
        if remembered is None:
            found = self._candidates_in(p, holders, policy, lca, advantage)
            if derived is not None:
                derived[key] = found
        else:
            found = cast(tuple[_Candidate, ...], remembered)  # only `_candidates_in` fills this memo
        protected = self.protected
        if not protected:
            return list(found)
        return [c for c in found if c.workload.key not in protected]

    def _candidates_in(self, p: Preemptor, holders: Mapping[str, WorkloadInfo], policy: str, lca: QuotaNode | None,
                       advantage: bool) -> tuple[_Candidate, ...]:
        """The holders of one queue that may be preempted for ``p`` (before `protected`), in `candidate_order`."""
        out = []
        priority, contested = p.workload.priority, p.contested
        for w in holders.values():
            # Cheap filters first; `_variant` decides the rest.
            if policy == "LowerPriority" and w.priority >= priority:
                continue
            a = w.assignment
            if a is None or not any(fr in a.usage for fr in contested):
                continue
            variant = self._variant(p, w, advantage)
            if variant != NEVER:
                out.append(_Candidate(w, lca, variant, candidate_order(w, p.spec.name),
                                      self.tree.queues.get(w.cluster_queue or "")))
        out.sort(key=_order_of)
        return tuple(out)

    def _in_subtree(self, p: Preemptor, cohort: QuotaNode, root: QuotaNode, skip: QuotaNode | None, *,
                    advantage: bool, out: list[_Candidate]) -> None:
        contested = p.contested
        for child in cohort.child_cohorts:
            if child is skip or quota.within_nominal(child, contested):
                continue
            self._in_subtree(p, child, root, skip, advantage=advantage, out=out)
        name = p.spec.name
        for child in self._over_quota_queues(cohort, contested, p.tree_key):
            if child.name != name:
                out.extend(self._from_queue(p, child.name, root, advantage))

    def _over_quota_queues(self, cohort: QuotaNode, contested: frozenset[FlavorResource],
                           tree_key: tuple[int, ...] | None) -> tuple[QuotaNode, ...]:
        """``cohort``'s ClusterQueues over their quota of a contested flavor-resource, in order, remembered by the
        tree state (as ``tree_key`` names it when a search starts): every head of a cohort nominated in one cycle
        sees one state, so a hundred queues are scanned once a cycle, not once per head."""
        memo, key = self.over_quota if tree_key is not None else None, (cohort.name, cohort.is_cohort, contested,
                                                                         tree_key)
        if memo is not None and (found := memo.get(key)) is not None:
            return found
        over = tuple(child for child in cohort.child_queues  # `quota.within_nominal` negated, inlined
                     if any(child.usage.get(fr, 0) > child.subtree.get(fr, 0) for fr in contested))
        if memo is not None:
            memo.put(key, over)
        return over

    def candidates(self, p: Preemptor) -> Lists:
        """`_candidates` without its memo key."""
        return self._candidates(p)[0]

    def _candidates(self, p: Preemptor) -> tuple[Lists, Hashable | None]:
        """(hierarchy, priority, same-queue) candidates, each in `candidate_order`, never to be mutated (shared);
        and their key in the shared memo (None when not shared).

        Besides the tree's usage and holders (``p.tree_key``) and whether `protected` applies, they read of the
        preemptor only its ClusterQueue, priority, creation (when a policy compares it), contested
        flavor-resources, and, of its requests, at which ancestors it has a hierarchical advantage: workloads of
        one ClusterQueue nominated against an unchanged tree (a BestEffortFIFO queue's heads parked one after the
        other) share them."""
        node = self.tree.queues[p.spec.name]
        pre = p.spec.preemption
        # Per ancestor, whether the preemptor's requests fit in the quota of its queue or a lower ancestor.
        advantages: list[bool] = []
        if node.parent is not None and pre.reclaim_within_cohort != "Never":
            advantage, remaining = quota.fits_in_quota(node, p.requests)
            for ancestor in node.path_to_root():
                advantages.append(advantage)
                fits, remaining = quota.fits_in_quota(ancestor, remaining)
                advantage = advantage or fits
        shared, key = self.shared, None
        if shared is not None and p.tree_key is not None:
            compares_creation = "LowerOrNewerEqualPriority" in (pre.within_cluster_queue, pre.reclaim_within_cohort)
            key = candidates_key(p.spec.name, priority=p.workload.priority,
                                 created=p.workload.created if compares_creation else None, contested=p.contested,
                                 advantages=tuple(advantages), protected=bool(self.protected), tree=p.tree_key)
            remembered = shared.get(key)
            if remembered is not None:
                return remembered, key
        same = self._from_queue(p, p.spec.name, None, False) if pre.within_cluster_queue != "Never" else []
        hierarchy: list[_Candidate] = []
        priority: list[_Candidate] = []
        previous: QuotaNode | None = None
        for ancestor, advantage in zip(node.path_to_root(), advantages, strict=False):
            self._in_subtree(p, ancestor, ancestor, previous, advantage=advantage,
                             out=hierarchy if advantage else priority)
            previous = ancestor
        for group in (hierarchy, priority, same):
            group.sort(key=_order_of)
        found = (hierarchy, priority, same)
        if shared is not None and key is not None:
            shared.put(key, found)
        return found, key

    def _attempts(self, p: Preemptor, hierarchy: list[_Candidate], priority: list[_Candidate]) -> tuple[bool, ...]:
        bwc = p.spec.preemption.borrow_within_cohort
        forbidden = bwc is None or bwc.policy == "Never"
        if not hierarchy and not priority:
            return (True,)
        if forbidden:
            node = self.tree.queues[p.spec.name]
            if not all(node.usage.get(fr, 0) < node.nominal(fr) for fr in p.contested):
                return (True,)
            if not hierarchy:
                return (False, True)
        return (True, False)

    def _remove(self, w: WorkloadInfo) -> None:
        assert w.assignment is not None
        quota.remove_all(self.tree.queues[w.assignment.cluster_queue], w.assignment.usage)

    def _add(self, w: WorkloadInfo) -> None:
        assert w.assignment is not None
        quota.add_all(self.tree.queues[w.assignment.cluster_queue], w.assignment.usage)

    def _minimal(self, p: Preemptor, ordered: list[_Candidate], allow_borrowing: bool
                 ) -> tuple[list[Target], Ceilings]:
        """The minimal victim set, or [] and the `Ceilings` once every candidate it could take was gone."""
        node = self.tree.queues[p.spec.name]
        chosen: list[_Candidate] = []
        fits = False
        # Candidates of one queue share the walk up the tree, whose answer holds until the next removal.
        verdicts: dict[tuple[QuotaNode, QuotaNode | None], bool] = {}
        name, contested, queues = p.spec.name, p.contested, self.tree.queues
        for c in ordered:
            # Whether ``c`` may still be taken (inlined: asked a million times an instant). Same-queue candidates
            # always may; others not while borrowing if borrowing forbids them, else while still over quota.
            cq = c.workload.cluster_queue
            if cq != name:
                if allow_borrowing and c.variant == WITHOUT_BORROWING:
                    continue
                cnode = c.node if c.node is not None else queues[cq or ""]
                key = (cnode, c.lca)
                verdict = verdicts.get(key)
                if verdict is None:
                    verdict = verdicts[key] = _over_quota_below(cnode, c.lca, contested)
                if not verdict:
                    continue
            self._remove(c.workload)
            verdicts.clear()
            chosen.append(c)
            if workload_fits(p, node, allow_borrowing):
                fits = True
                break
        if not fits:
            ceilings = {fr: quota.available(node, fr) if allow_borrowing
                        else min(quota.available(node, fr), node.subtree.get(fr, 0) - node.usage.get(fr, 0))
                        for fr in p.requests}  # what `workload_fits` compares each request with
            for c in chosen:
                self._add(c.workload)
            return [], ceilings
        kept = chosen[-1:]
        for c in reversed(chosen[:-1]):
            self._add(c.workload)
            if workload_fits(p, node, allow_borrowing):
                continue  # not needed: it stays admitted
            self._remove(c.workload)
            kept.append(c)
        for c in kept:
            self._add(c.workload)
        order = {id(c): i for i, c in enumerate(chosen)}
        kept.sort(key=lambda c: order[id(c)])
        return [Target(c.workload, _REASON[c.variant]) for c in kept], {}

    def targets(self, p: Preemptor) -> list[Target]:
        """The minimal victim set that lets ``p`` fit, or [] when none exists.

        Which candidates an attempt takes while ``p`` does not fit yet depends on the lists, the tree and the
        attempt, never on ``p``'s requests, and taking one only frees quota: so once an attempt took all it could
        and ``p`` still did not fit, another preemptor with the same lists (same key) and no smaller requests fails
        the same way. Heads of one queue parked one after the other in an unchanged tree (a BestEffortFIFO queue
        after a requeue, while victims elsewhere are still evicted) each ran that futile search; the ceilings it
        reached are remembered with the lists instead (`recall.ceilings_key`)."""
        (hierarchy, priority, same), key = self._candidates(p)
        if not (hierarchy or priority or same):
            return []
        ordered: list[_Candidate] | None = None
        for allow_borrowing in self._attempts(p, hierarchy, priority):
            remembered, at = None, None
            if key is not None and self.ceilings is not None:
                at = ceilings_key(key, allow_borrowing, tuple(p.requests))
                remembered = self.ceilings.get(at)
            if remembered is not None and any(val > remembered[fr] for fr, val in p.requests.items()):
                continue  # even every candidate this attempt may take would not make room
            if ordered is None:
                # Kueue's candidate iterator takes the workloads already being evicted of every list first.
                ordered = [c for group in (hierarchy, priority, same) for c in group if c.workload.evicting]
                ordered += [c for group in (hierarchy, priority, same) for c in group if not c.workload.evicting]
            found, ceilings = self._minimal(p, ordered, allow_borrowing)
            if found:
                return found
            if at is not None and self.ceilings is not None:
                self.ceilings.put(at, ceilings)
        return []
