"""Fair sharing's dominant resource share and the admission tournament built on it (kueue.md §1.5).

1. The *dominant resource share* (DRS) of a node with a parent: per resource, what it borrows beyond its
   subtree quota (summed over flavors) per 1000 of what its parent could lend (``potential_available``);
   the largest ratio, divided by the node's weight. Not borrowing = 0; weight 0 while borrowing = infinite.
   Shares are compared as Kueue's ``CompareDRS`` does (``DominantShare.rank``): a node of weight 0 that
   borrows ranks above every other node, and two such nodes compare by their unweighted ratios.
2. Admission order within a cohort tree is a tournament: at each cohort, the candidates of its children are
   compared on (would not borrow first, lower DRS of the child including the candidate, higher priority,
   older); one winner is processed at a time and shares are recomputed.

Fair preemption (rule 3) is in ``fairsharing``.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from gitopsq.admission import quota
from gitopsq.admission.quota import FlavorResource, QuotaNode, QuotaTree
from gitopsq.admission.topology import Topology

if TYPE_CHECKING:
    from gitopsq.admission.cycle import Entry


def weight_of(node: QuotaNode, topology: Topology) -> int:
    if node.is_cohort:
        return topology.cohort_weights.get(node.name, 1000)
    spec = topology.queues.get(node.name)
    return spec.weight if spec else 1000


# Kueue's NegativeDRS rank: below every real share, the starting point of "highest share" searches.
NEGATIVE_RANK: tuple[int, float] = (0, -1.0)


@dataclass(frozen=True, slots=True)
class DominantShare:
    """A node's dominant resource share as Kueue's ``DRS`` holds it: the unweighted ratio and the weight apart,
    so that nodes of weight 0 can still be told apart."""

    ratio: float  # borrowed × 1000 / lendable, of the dominant resource; 0 when not borrowing (or nothing lendable)
    weight: int  # milli-units

    @property
    def weighted(self) -> float:
        """Kueue's ``PreciseWeightedShare``: 0 when not borrowing, infinite for weight 0, else ratio / weight."""
        if self.ratio == 0:
            return 0.0
        if self.weight == 0:
            return math.inf
        # Kueue divides by the weight as a float (1000 milli = 1.0), not the ratio × 1000 by the milli-units:
        # the rounding differs, and equal shares must stay equal.
        return self.ratio / (self.weight / 1000)

    @property
    def rank(self) -> tuple[int, float]:
        """Sort key equivalent to Kueue's ``CompareDRS``: weight 0 while borrowing ranks above everything and
        compares by the unweighted ratio; other shares compare by the weighted share."""
        if self.weight == 0 and self.ratio != 0:
            return (1, self.ratio)
        return (0, self.weighted)


def drs(node: QuotaNode, topology: Topology, extra: Mapping[FlavorResource, int] | None = None) -> DominantShare:
    """Dominant resource share of ``node`` with ``extra`` usage added (rule 1)."""
    weight = weight_of(node, topology)
    parent = node.parent
    if parent is None:
        return DominantShare(0.0, weight)
    borrowed: dict[str, int] = {}
    frs = set(node.subtree) | set(node.usage) | set(extra or ())
    for fr in frs:
        over = node.usage.get(fr, 0) + (extra.get(fr, 0) if extra else 0) - node.subtree.get(fr, 0)
        if over > 0:
            borrowed[fr[1]] = borrowed.get(fr[1], 0) + over
    if not borrowed:
        return DominantShare(0.0, weight)
    # What the parent could lend counts every flavor of the resource in the whole tree, including flavors the
    # node itself has no quota for (Kueue's calculateLendable walks the root's flavor-resources).
    lendable: dict[str, int] = {}
    for fr in node.root().subtree:
        if fr[1] in borrowed:
            lendable[fr[1]] = lendable.get(fr[1], 0) + quota.potential_available(parent, fr)
    # A resource with nothing lendable does not count (Kueue skips it); no share at all means 0, even at weight 0.
    ratio = max((b * 1000 / lendable[r] for r, b in borrowed.items() if lendable.get(r)), default=0.0)
    return DominantShare(ratio, weight)


def borrowing(node: QuotaNode) -> bool:
    """Whether the node uses more than its subtree quota of any flavor-resource (Kueue's ``DRS.IsBorrowing``)."""
    return any(node.usage.get(fr, 0) > q for fr, q in node.subtree.items())


def _chain(node: QuotaNode) -> list[QuotaNode]:
    """The node and its ancestors, root last."""
    return [node, *node.path_to_root()]


def almost_lcas(a: QuotaNode, b: QuotaNode) -> tuple[QuotaNode, QuotaNode]:
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
    standing: list[tuple[int, tuple[int, float]]]  # (would borrow, DRS rank with the entry's usage) per path node


def _contender(tree: QuotaTree, topology: Topology, e: Entry) -> _Contender:
    usage = e.nomination.usage if e.nomination else {}
    path = list(reversed(_chain(tree.queues[e.spec.name])[:-1]))
    standing = [(1 if any(n.borrowing_with(fr, v) for fr, v in usage.items()) else 0, drs(n, topology, usage).rank)
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
