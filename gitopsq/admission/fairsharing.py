"""Fair sharing: dominant resource share, the admission tournament and fair preemption (kueue.md §1.5).

1. The *dominant resource share* (DRS) of a node with a parent: per resource, what it borrows beyond its
   subtree quota (summed over flavors) per 1000 of what its parent could lend (``potential_available``);
   the largest ratio, divided by the node's weight. Not borrowing = 0; weight 0 while borrowing = infinite.
2. Admission order within a cohort tree is a tournament: at each cohort, the candidates of its children are
   compared on (would not borrow first, lower DRS of the child including the candidate, higher priority,
   older); one winner is processed at a time and shares are recomputed.
3. Fair preemption visits the ClusterQueues with candidates by descending DRS: its own queue's candidates go
   first-come; a preemptor within its nominal quota on the contested flavor-resources reclaims unconditionally
   (FairSharingPreemptWithinNominal); otherwise the configured strategies decide
   on the shares of the two queues' ancestors just below their lowest common ancestor
   (``LessThanOrEqualToFinalShare``: the preemptor's new share ≤ the target's share after the removal;
   ``LessThanInitialShare``: < the target's share before, one victim per queue). Then fill-back.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from typing import TYPE_CHECKING

from gitopsq.admission import messages as msg
from gitopsq.admission import quota
from gitopsq.admission.preemption import (
    ClassicalPreemption,
    Preemptor,
    Target,
    candidate_order,
    policy_allows,
    uses,
    workload_fits,
)
from gitopsq.admission.quota import FlavorResource, QuotaNode, QuotaTree
from gitopsq.admission.topology import Topology
from gitopsq.admission.workload import WorkloadInfo

if TYPE_CHECKING:
    from gitopsq.admission.cycle import Entry


def weight_of(node: QuotaNode, topology: Topology) -> int:
    if node.is_cohort:
        return topology.cohort_weights.get(node.name, 1000)
    spec = topology.queues.get(node.name)
    return spec.weight if spec else 1000


def drs(node: QuotaNode, topology: Topology, extra: Mapping[FlavorResource, int] | None = None) -> float:
    """Weighted dominant resource share of ``node`` with ``extra`` usage added (rule 1)."""
    parent = node.parent
    if parent is None:
        return 0.0
    borrowed: dict[str, int] = {}
    frs = set(node.subtree) | set(node.usage) | set(extra or ())
    for fr in frs:
        over = node.usage.get(fr, 0) + (extra.get(fr, 0) if extra else 0) - node.subtree.get(fr, 0)
        if over > 0:
            borrowed[fr[1]] = borrowed.get(fr[1], 0) + over
    if not borrowed:
        return 0.0
    # What the parent could lend counts every flavor of the resource in the whole tree, including flavors the
    # node itself has no quota for (Kueue's calculateLendable walks the root's flavor-resources).
    lendable: dict[str, int] = {}
    for fr in node.root().subtree:
        if fr[1] in borrowed:
            lendable[fr[1]] = lendable.get(fr[1], 0) + quota.potential_available(parent, fr)
    # A resource with nothing lendable does not count (Kueue skips it); no share at all means 0, even at weight 0.
    share = max((b * 1000 / lendable[r] for r, b in borrowed.items() if lendable.get(r)), default=0.0)
    if share == 0:
        return 0.0
    weight = weight_of(node, topology)
    return math.inf if weight == 0 else share * 1000 / weight


def _chain(node: QuotaNode) -> list[QuotaNode]:
    """The node and its ancestors, root last."""
    return [node, *node.path_to_root()]


def _almost_lcas(a: QuotaNode, b: QuotaNode) -> tuple[QuotaNode, QuotaNode]:
    """The ancestors (or selves) of ``a`` and ``b`` just below their lowest common ancestor: Kueue compares
    the shares of these two nodes, so siblings compete as queues and distant queues as their cohorts."""
    chain_a, chain_b = _chain(a), _chain(b)
    in_b = {id(n): i for i, n in enumerate(chain_b)}
    for i, n in enumerate(chain_a):
        j = in_b.get(id(n))
        if j is not None:
            return chain_a[max(i - 1, 0)], chain_b[max(j - 1, 0)]
    return a, b


def tournament(tree: QuotaTree, topology: Topology, entries: list[Entry]) -> Iterator[Entry]:
    """Yield entries in fair-sharing order, recomputing shares after each one is processed (rule 2).

    ``entries`` is consumed in place: entries the caller appends while iterating join the tournament.
    """
    remaining = entries
    while remaining:
        by_root: dict[str, list[Entry]] = {}
        for e in remaining:
            root = tree.queues[e.spec.name].root()
            by_root.setdefault(f"{int(root.is_cohort)}/{root.name}", []).append(e)
        first_root = sorted(by_root)[0]
        group = by_root[first_root]
        winner = _winner(tree, topology, group)
        remaining.remove(winner)
        yield winner


@dataclass(slots=True)
class _Contender:
    """An entry with, from the root down, the node of its path below each cohort and that node's standing."""

    entry: Entry
    path: list[QuotaNode]
    standing: list[tuple[int, float]]  # (would borrow, DRS including the entry's usage) per path node


def _contender(tree: QuotaTree, topology: Topology, e: Entry) -> _Contender:
    usage = e.nomination.usage if e.nomination else {}
    path = list(reversed(_chain(tree.queues[e.spec.name])[:-1]))
    standing = [(1 if any(n.borrowing_with(fr, v) for fr, v in usage.items()) else 0, drs(n, topology, usage))
                for n in path]
    return _Contender(e, path, standing)


def _less(a: _Contender, b: _Contender, depth: int) -> bool:
    """Whether ``a`` beats ``b`` where their paths part (``depth``): preemptor first, then not borrowing and the
    lower share of the node at that depth, then priority and queue order (Kueue's entryComparer)."""
    if a.entry.preemptor != b.entry.preemptor:
        return a.entry.preemptor
    if depth < len(a.standing) and depth < len(b.standing) and a.standing[depth] != b.standing[depth]:
        return a.standing[depth] < b.standing[depth]
    wa, wb = a.entry.w, b.entry.w
    return (-wa.priority, wa.created, wa.seq) < (-wb.priority, wb.created, wb.seq)


def _tournament(contenders: list[_Contender], depth: int) -> _Contender:
    """Kueue's runTournament: every child of the cohort at ``depth`` puts up its own winner (recursively), and
    the winners are compared on the standing of those children. A linear scan is not the same: a queue that
    loses inside its cohort must not win against another cohort."""
    if len(contenders) == 1:
        return contenders[0]
    by_child: dict[int, list[_Contender]] = {}
    for c in contenders:
        by_child.setdefault(id(c.path[depth]), []).append(c)
    finalists = []
    for members in by_child.values():
        if len(members) > 1 and all(depth + 1 < len(m.path) for m in members):
            finalists.append(_tournament(members, depth + 1))
            continue
        best = members[0]  # one queue's entries (look-ahead): its own order decides
        for m in members[1:]:
            if _less(m, best, len(m.path)):
                best = m
        finalists.append(best)
    best = finalists[0]
    for c in finalists[1:]:
        if _less(c, best, depth):
            best = c
    return best


def _winner(tree: QuotaTree, topology: Topology, group: list[Entry]) -> Entry:
    return _tournament([_contender(tree, topology, e) for e in group], 0).entry


class _TargetOrdering:
    """Kueue's fair-sharing target ordering (``fairsharing/ordering.go``): from the root down, the child with the
    highest share among those still holding candidates. A queue that does not borrow (other than the
    preemptor's), or has no candidate left, is pruned for good; so is a cohort that does not borrow and is not
    above the preemptor. Equal queue shares go to the queue whose next candidate comes first; a cohort wins a
    tie with a queue, and the last of equally shared cohorts wins (Kueue compares with >=)."""

    def __init__(self, topology: Topology, preemptor: QuotaNode, pool: dict[str, list[WorkloadInfo]]) -> None:
        self.topology = topology
        self.preemptor = preemptor
        self.pool = pool
        self.above_preemptor = {id(a) for a in preemptor.path_to_root()}
        self.pruned: set[int] = set()

    def __iter__(self) -> Iterator[str]:
        me = self.preemptor
        if me.parent is None:
            while id(me) not in self.pruned and self.pool.get(me.name):
                yield me.name
            return
        root = me.root()
        while id(root) not in self.pruned:
            name = self._next(root)
            if name is not None:  # None: this pass only pruned
                yield name

    def drop(self, cq: QuotaNode) -> None:
        self.pruned.add(id(cq))

    def _next(self, cohort: QuotaNode) -> str | None:
        best_queue: QuotaNode | None = None
        queue_share = -1.0
        for q in sorted(cohort.child_queues, key=lambda c: c.name):
            if id(q) in self.pruned:
                continue
            share = drs(q, self.topology)
            if (q is not self.preemptor and not borrowing(q)) or not self.pool.get(q.name):
                self.pruned.add(id(q))
            elif best_queue is None or share > queue_share:
                best_queue, queue_share = q, share
            elif share == queue_share and (candidate_order(self.pool[q.name][0], self.preemptor.name)
                                           < candidate_order(self.pool[best_queue.name][0], self.preemptor.name)):
                best_queue = q
        best_cohort: QuotaNode | None = None
        cohort_share = -1.0
        for c in sorted(cohort.child_cohorts, key=lambda c: c.name):
            if id(c) in self.pruned:
                continue
            share = drs(c, self.topology)
            if not borrowing(c) and id(c) not in self.above_preemptor:
                self.pruned.add(id(c))
            elif share >= cohort_share:
                best_cohort, cohort_share = c, share
        if best_cohort is None and best_queue is None:
            self.pruned.add(id(cohort))
            return None
        if best_cohort is not None and cohort_share >= queue_share:
            return self._next(best_cohort)
        assert best_queue is not None
        return best_queue.name


def borrowing(node: QuotaNode) -> bool:
    """Whether the node uses more than its subtree quota of any flavor-resource (Kueue's ``DRS.IsBorrowing``)."""
    return any(node.usage.get(fr, 0) > q for fr, q in node.subtree.items())


class FairPreemption(ClassicalPreemption):
    """Preemption under fair sharing (rule 3; Kueue's ``fairPreemptions``); same interface as the classical
    search."""

    def __init__(self, tree: QuotaTree, admitted: Mapping[str, Mapping[str, WorkloadInfo]],
                 topology: Topology, protected: AbstractSet[str] = frozenset()) -> None:
        super().__init__(tree, admitted, protected)
        self.topology = topology

    def _fair_candidates(self, p: Preemptor) -> dict[str, list[WorkloadInfo]]:
        node = self.tree.queues[p.spec.name]
        out: dict[str, list[WorkloadInfo]] = {}
        pre = p.spec.preemption
        members = [p.spec.name] if node.parent is None else [
            n for n, q in self.tree.queues.items() if q.root() is node.root()]
        for cq in members:
            same = cq == p.spec.name
            policy = pre.within_cluster_queue if same else pre.reclaim_within_cohort
            if not same and quota.within_nominal(self.tree.queues[cq], p.contested):
                continue
            found = [w for w in self.admitted.get(cq, {}).values() if w.assignment is not None
                     and w.key not in self.protected and uses(w, p.contested) and policy_allows(policy, p.workload, w)]
            if found:
                found.sort(key=lambda w: candidate_order(w, p.spec.name))
                out[cq] = found
        return out

    def targets(self, p: Preemptor) -> list[Target]:
        candidates = self._fair_candidates(p)
        if not candidates:
            return []
        node = self.tree.queues[p.spec.name]
        strategies = self.topology.settings.preemption_strategies
        chosen: list[Target] = []
        quota.add_all(node, p.requests)  # shares are computed with the incoming workload admitted
        try:
            fits, retry = self._first_strategy(p, node, candidates, strategies[0], chosen)
            if not fits and len(strategies) > 1:
                fits = self._second_strategy(p, node, retry, chosen)
        finally:
            quota.remove_all(node, p.requests)
        if not fits:
            for t in chosen:
                self._add(t.workload)
            return []
        kept = chosen[-1:]
        for t in reversed(chosen[:-1]):
            self._add(t.workload)
            if not workload_fits(p, node, True):
                self._remove(t.workload)
                kept.append(t)
        for t in kept:
            self._add(t.workload)
        order = {id(t): i for i, t in enumerate(chosen)}
        return sorted(kept, key=lambda t: order[id(t)])

    def _take(self, p: Preemptor, node: QuotaNode, w: WorkloadInfo, reason: str, chosen: list[Target]) -> bool:
        """Remove ``w`` as a target; whether the incoming workload fits now."""
        self._remove(w)
        chosen.append(Target(w, reason))
        quota.remove_all(node, p.requests)
        fits = workload_fits(p, node, True)
        quota.add_all(node, p.requests)
        return fits

    def _shares(self, node: QuotaNode, target_cq: str) -> tuple[QuotaNode, float, float]:
        """The target's almost-LCA, the preemptor's share and the target's share where their paths part."""
        mine, theirs = _almost_lcas(node, self.tree.queues[target_cq])
        return theirs, drs(mine, self.topology), drs(theirs, self.topology)

    def _first_strategy(self, p: Preemptor, node: QuotaNode, candidates: dict[str, list[WorkloadInfo]],
                        strategy: str, chosen: list[Target]) -> tuple[bool, list[WorkloadInfo]]:
        """Kueue's ``runFirstFsStrategy``: (fits, the candidates the strategy rejected, for the second one).

        Within a target queue the candidates are tried in order until one passes (a rejected one does not
        end the queue's turn: a smaller victim may leave the target above the preemptor); after a victim the
        ordering is recomputed. A preemptor within its nominal quota on the contested flavor-resources, as
        measured once before any removal, reclaims unconditionally (FairSharingPreemptWithinNominal)."""
        within_nominal = all(node.usage.get(fr, 0) <= node.nominal(fr) for fr in p.contested)
        ordering = _TargetOrdering(self.topology, node, {cq: list(ws) for cq, ws in candidates.items()})
        retry: list[WorkloadInfo] = []
        for cq in ordering:
            pool = ordering.pool[cq]
            if cq == p.spec.name or within_nominal:
                reason = msg.IN_CLUSTER_QUEUE if cq == p.spec.name else msg.IN_COHORT_RECLAMATION
                if self._take(p, node, pool.pop(0), reason, chosen):
                    return True, []
                continue
            theirs, preemptor_new, target_old = self._shares(node, cq)
            if math.isinf(preemptor_new) and not math.isinf(target_old):
                retry.extend(pool)  # no candidate here can pass either strategy
                pool.clear()
                continue
            while pool:
                w = pool.pop(0)
                self._remove(w)
                target_new = drs(theirs, self.topology)
                self._add(w)
                ok = (preemptor_new <= target_new if strategy == "LessThanOrEqualToFinalShare"
                      else preemptor_new < target_old)
                if not ok:
                    retry.append(w)
                    continue
                if self._take(p, node, w, msg.IN_COHORT_FAIR_SHARING, chosen):
                    return True, []
                break  # shares changed: the ordering picks the next queue
        return False, retry

    def _second_strategy(self, p: Preemptor, node: QuotaNode, retry: list[WorkloadInfo],
                         chosen: list[Target]) -> bool:
        """Kueue's ``runSecondFsStrategy`` (LessThanInitialShare): the first rejected candidate of each queue,
        in target order, goes if the preemptor's share stays below the target's; one try per queue."""
        pool: dict[str, list[WorkloadInfo]] = {}
        for w in retry:
            pool.setdefault(w.cluster_queue or "", []).append(w)
        ordering = _TargetOrdering(self.topology, node, pool)
        for cq in ordering:
            _, preemptor_new, target_old = self._shares(node, cq)
            w = pool[cq].pop(0)
            if preemptor_new < target_old and self._take(p, node, w, msg.IN_COHORT_FAIR_SHARING, chosen):
                return True
            ordering.drop(self.tree.queues[cq])
        return False
