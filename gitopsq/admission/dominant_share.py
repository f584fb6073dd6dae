"""Fair sharing's dominant resource share (DRS) of a quota node (kueue.md §1.5 rule 1).

Per resource, what a node with a parent borrows beyond its subtree quota (summed over flavors) per 1000 of what
its parent could lend (``potential_available``); the largest ratio, divided by the node's weight. Not borrowing =
0; weight 0 while borrowing = infinite. Shares are compared as Kueue's ``CompareDRS`` does
(``DominantShare.rank``): a node of weight 0 that borrows ranks above every other node, and two such nodes compare
by their unweighted ratios. The admission tournament (`tournament`) and fair preemption (`fair_preemption`) both
rank nodes by it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from gitopsq.admission import quota
from gitopsq.admission.quota import FlavorResource, QuotaNode
from gitopsq.admission.topology import Topology


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


def chain(node: QuotaNode) -> list[QuotaNode]:
    """The node and its ancestors, root last."""
    return [node, *node.path_to_root()]


def almost_lcas(a: QuotaNode, b: QuotaNode) -> tuple[QuotaNode, QuotaNode]:
    """The ancestors (or selves) of ``a`` and ``b`` just below their lowest common ancestor: Kueue compares
    the shares of these two nodes, so siblings compete as queues and distant queues as their cohorts."""
    chain_a, chain_b = chain(a), chain(b)
    in_b = {id(n): i for i, n in enumerate(chain_b)}
    for i, n in enumerate(chain_a):
        j = in_b.get(id(n))
        if j is not None:
            return chain_a[max(i - 1, 0)], chain_b[max(j - 1, 0)]
    return a, b
