"""Fair preemption (kueue.md §1.5 rule 3; the shares it compares are in ``dominant_share``).

Fair preemption visits the ClusterQueues with candidates by descending DRS: its own queue's candidates go
first-come; a preemptor within its nominal quota on the contested flavor-resources reclaims unconditionally
(FairSharingPreemptWithinNominal); otherwise the configured strategies decide on the shares of the two queues'
ancestors just below their lowest common ancestor (``LessThanOrEqualToFinalShare``: the preemptor's new share ≤
the target's share after the removal; ``LessThanInitialShare``: < the target's share before, one victim per
queue). Then fill-back.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from collections.abc import Set as AbstractSet

from gitopsq.admission import messages as msg
from gitopsq.admission import quota
from gitopsq.admission.dominant_share import NEGATIVE_RANK, DominantShare, almost_lcas, borrowing, drs
from gitopsq.admission.preemption import (
    ClassicalPreemption,
    Preemptor,
    Target,
    candidate_order,
    policy_allows,
    uses,
    without,
    workload_fits,
)
from gitopsq.admission.quota import QuotaNode, QuotaTree
from gitopsq.admission.topology import Topology
from gitopsq.admission.workload import WorkloadInfo


class _TargetOrdering:
    """Kueue's fair-sharing target ordering (``fairsharing/ordering.go``): from the root down, the child with the
    highest share among those still holding candidates. A queue that does not borrow (other than the
    preemptor's), or has no candidate left, is pruned for good; so is a cohort that does not borrow and is not
    above the preemptor. Equal queue shares go to the queue whose next candidate comes first; a cohort wins a
    tie with a queue, and the last of equally shared cohorts wins (Kueue compares with >=). Shares compare by
    ``DominantShare.rank`` (Kueue's CompareDRS), so borrowing queues of weight 0 go by their unweighted ratios."""

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
        queue_share = NEGATIVE_RANK
        for q in sorted(cohort.child_queues, key=lambda c: c.name):
            if id(q) in self.pruned:
                continue
            if (q is not self.preemptor and not borrowing(q)) or not self.pool.get(q.name):
                self.pruned.add(id(q))
                continue
            share = drs(q, self.topology).rank
            if best_queue is None or share > queue_share:
                best_queue, queue_share = q, share
            elif share == queue_share and (candidate_order(self.pool[q.name][0], self.preemptor.name)
                                           < candidate_order(self.pool[best_queue.name][0], self.preemptor.name)):
                best_queue = q
        best_cohort: QuotaNode | None = None
        cohort_share = NEGATIVE_RANK
        for c in sorted(cohort.child_cohorts, key=lambda c: c.name):
            if id(c) in self.pruned:
                continue
            if not borrowing(c) and id(c) not in self.above_preemptor:
                self.pruned.add(id(c))
                continue
            share = drs(c, self.topology).rank
            if share >= cohort_share:
                best_cohort, cohort_share = c, share
        if best_cohort is None and best_queue is None:
            self.pruned.add(id(cohort))
            return None
        if best_cohort is not None and cohort_share >= queue_share:
            return self._next(best_cohort)
        assert best_queue is not None
        return best_queue.name


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

    def _shares(self, node: QuotaNode, target_cq: str) -> tuple[QuotaNode, DominantShare, DominantShare]:
        """The target's almost-LCA, the preemptor's share and the target's share where their paths part."""
        mine, theirs = almost_lcas(node, self.tree.queues[target_cq])
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
            # Kueue's fsStrategyUnsatisfiable: a weight-0 borrowing preemptor ranks above any target that is not
            # one too, before and after any removal. Two weight-0 borrowers go on to compare unweighted ratios.
            if math.isinf(preemptor_new.weighted) and not math.isinf(target_old.weighted):
                retry.extend(pool)  # no candidate here can pass either strategy
                pool.clear()
                continue
            while pool:
                w = pool.pop(0)
                with without(self.tree, [w]):
                    target_new = drs(theirs, self.topology)
                ok = (preemptor_new.rank <= target_new.rank if strategy == "LessThanOrEqualToFinalShare"
                      else preemptor_new.rank < target_old.rank)
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
            if preemptor_new.rank < target_old.rank and self._take(p, node, w, msg.IN_COHORT_FAIR_SHARING, chosen):
                return True
            ordering.drop(self.tree.queues[cq])
        return False
