"""The quota tree: ClusterQueues and Cohorts as resource nodes, with Kueue's exact arithmetic.

Every ClusterQueue and Cohort is a `QuotaNode` holding, per flavor-resource (``fr`` = ``(flavor, resource)``),
its own limits (nominal, borrowing limit, lending limit), its subtree quota and its usage. All amounts are plain
integers in milli-units (shared/research/kueue.md §1.3, Kueue's ``pkg/cache/scheduler/resource_node.go``):

1. ``local_quota(n)`` = ``max(0, subtree − lendingLimit)`` when a lending limit is set, else 0: capacity the
   node never lends to its parent.
2. A ClusterQueue's subtree quota is its nominal quota; a Cohort's is its own nominal plus, for every child,
   ``child.subtree − child.local_quota``.
3. A Cohort's usage is the sum over children of ``max(0, child.usage − child.local_quota)``; adding usage at a
   node pushes to the parent only the part that exceeds the node's local headroom.
4. ``available(n)`` = local headroom + the parent's available, the latter capped by the borrowing limit as
   ``(subtree − local) − max(0, usage − local) + borrowingLimit``; a root has ``subtree − usage``.
5. ``potential_available(n)`` is the same with zero usage: what a workload could ever get.

Usage is mutated in place (add/remove), the cheapest way to keep it incremental; callers that simulate
(preemption) remove and re-add, always pairwise (`preemption.without`). Removing more than a node uses raises
`NegativeUsageError`: a mispaired removal shows at once instead of as quota that appears from nowhere.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass

from gitopsq.errors import NegativeUsageError

FlavorResource = tuple[str, str]  # (flavor, resource)
Usage = dict[FlavorResource, int]


@dataclass(frozen=True, slots=True)
class Limits:
    """Quota of one flavor-resource on one node, in milli-units. ``None`` = no limit."""

    nominal: int
    borrowing: int | None = None
    lending: int | None = None


class QuotaNode:
    """A ClusterQueue (``is_cohort`` false) or a Cohort in the quota tree."""

    __slots__ = (
        "child_cohorts",
        "child_queues",
        "height",
        "is_cohort",
        "limits",
        "local",
        "name",
        "parent",
        "potential",
        "subtree",
        "usage",
    )

    def __init__(self, name: str, *, is_cohort: bool, limits: Mapping[FlavorResource, Limits]) -> None:
        self.name = name
        self.is_cohort = is_cohort
        self.parent: QuotaNode | None = None
        self.child_cohorts: list[QuotaNode] = []
        self.child_queues: list[QuotaNode] = []
        self.limits: dict[FlavorResource, Limits] = dict(limits)
        self.subtree: dict[FlavorResource, int] = {}
        self.local: dict[FlavorResource, int] = {}
        self.usage: Usage = {}
        self.potential: dict[FlavorResource, int] = {}  # `potential_available` memo, emptied by `QuotaTree.finish`
        self.height = 0

    def __repr__(self) -> str:
        return f"QuotaNode({'cohort' if self.is_cohort else 'cq'} {self.name})"

    def nominal(self, fr: FlavorResource) -> int:
        lim = self.limits.get(fr)
        return lim.nominal if lim else 0

    def borrowing_with(self, fr: FlavorResource, val: int) -> bool:
        """Whether ``val`` more of ``fr`` would take this node past its subtree quota (Kueue ``BorrowingWith``)."""
        return self.usage.get(fr, 0) + val > self.subtree.get(fr, 0)

    def local_available(self, fr: FlavorResource) -> int:
        return max(0, self.local.get(fr, 0) - self.usage.get(fr, 0))

    def path_to_root(self) -> Iterator[QuotaNode]:
        """Ancestors from the parent up to the root."""
        node = self.parent
        while node is not None:
            yield node
            node = node.parent

    def root(self) -> QuotaNode:
        node = self
        while node.parent is not None:
            node = node.parent
        return node


def available(node: QuotaNode, fr: FlavorResource) -> int:
    """Capacity of ``fr`` this node may still use, honouring borrowing limits all the way up (rule 4)."""
    usage = node.usage.get(fr, 0)
    parent = node.parent
    if parent is None:
        return node.subtree.get(fr, 0) - usage
    parent_available = available(parent, fr)
    lim = node.limits.get(fr)
    local = node.local.get(fr, 0)
    if lim is not None and lim.borrowing is not None:
        stored_in_parent = node.subtree.get(fr, 0) - local
        used_in_parent = max(0, usage - local)
        parent_available = min(parent_available, stored_in_parent - used_in_parent + lim.borrowing)
    return max(0, local - usage) + parent_available


def potential_available(node: QuotaNode, fr: FlavorResource) -> int:
    """The most of ``fr`` this node could hold with zero usage anywhere (rule 5); fixed once the tree is finished,
    so remembered per node."""
    value = node.potential.get(fr)
    if value is not None:
        return value
    parent = node.parent
    if parent is None:
        value = node.subtree.get(fr, 0)
    else:
        value = node.local.get(fr, 0) + potential_available(parent, fr)
        lim = node.limits.get(fr)
        if lim is not None and lim.borrowing is not None:
            value = min(value, node.subtree.get(fr, 0) + lim.borrowing)
    node.potential[fr] = value
    return value


def add_usage(node: QuotaNode, fr: FlavorResource, val: int) -> None:
    """Add ``val`` at ``node``; what exceeds its local headroom is pushed to the parent (rule 3)."""
    while True:
        headroom = max(0, node.local.get(fr, 0) - node.usage.get(fr, 0))
        node.usage[fr] = node.usage.get(fr, 0) + val
        parent = node.parent
        if parent is None or val <= headroom:
            return
        val -= headroom
        node = parent




def remove_usage(node: QuotaNode, fr: FlavorResource, val: int) -> None:
    """Remove ``val`` at ``node`` and the part of it that was stored in the parent; `NegativeUsageError` if any node
    would be left with less than nothing (checked before the node changes)."""
    while True:
        used = node.usage.get(fr, 0)
        if val > used:
            raise NegativeUsageError(f"removing {val} of {fr[1]} in flavor {fr[0]} from {node!r}, which uses {used}")
        stored_in_parent = used - node.local.get(fr, 0)
        node.usage[fr] = used - val
        parent = node.parent
        if parent is None or stored_in_parent <= 0:
            return
        val = min(val, stored_in_parent)
        node = parent


def add_all(node: QuotaNode, usage: Mapping[FlavorResource, int]) -> None:
    for fr, val in usage.items():
        add_usage(node, fr, val)


def remove_all(node: QuotaNode, usage: Mapping[FlavorResource, int]) -> None:
    for fr, val in usage.items():
        remove_usage(node, fr, val)


def fits_in_quota(node: QuotaNode, requests: Mapping[FlavorResource, int]) -> tuple[bool, dict[FlavorResource, int]]:
    """Whether ``requests`` fit in the node's own subtree quota, and what exceeds its local headroom.

    Kueue's ``QuantitiesFitInQuota``: used walking up the tree to find where a preemptor has a hierarchical
    advantage over the workloads it would reclaim from.
    """
    fits = True
    remaining: dict[FlavorResource, int] = {}
    for fr, val in requests.items():
        if node.usage.get(fr, 0) + val > node.subtree.get(fr, 0):
            fits = False
        remaining[fr] = max(0, val - node.local_available(fr))
    return fits, remaining


def within_nominal(node: QuotaNode, frs: Iterable[FlavorResource]) -> bool:
    """True when the node's usage exceeds its subtree quota on none of ``frs``."""
    usage, subtree = node.usage, node.subtree
    for fr in frs:  # noqa: SIM110  # no generator: preemption searches call this a million times an instant
        if usage.get(fr, 0) > subtree.get(fr, 0):
            return False
    return True


def borrowing_level(node: QuotaNode, fr: FlavorResource, val: int) -> tuple[int, bool]:
    """Height of the lowest subtree that absorbs ``val`` more of ``fr`` (0 = fits in the queue's own quota).

    Kueue's ``FindHeightOfLowestSubtreeThatFits``: when no subtree fits, the height of the whole tree. The flag
    says whether that subtree has a parent, i.e. whether reclaiming lent capacity is conceivable.
    """
    if node.parent is None or not node.borrowing_with(fr, val):
        return 0, node.parent is not None
    remaining = val - node.local_available(fr)
    tracking = node
    for ancestor in node.path_to_root():
        tracking = ancestor
        if not ancestor.borrowing_with(fr, remaining):
            return ancestor.height, ancestor.parent is not None
        remaining -= ancestor.local_available(fr)
    return tracking.height, tracking.parent is not None


class QuotaTree:
    """Every quota node by name: ClusterQueues in ``queues``, Cohorts in ``cohorts``."""

    __slots__ = ("cohorts", "queues")

    def __init__(self) -> None:
        self.queues: dict[str, QuotaNode] = {}
        self.cohorts: dict[str, QuotaNode] = {}

    def add_queue(self, name: str, limits: Mapping[FlavorResource, Limits], cohort: str | None) -> QuotaNode:
        node = QuotaNode(name, is_cohort=False, limits=limits)
        self.queues[name] = node
        if cohort is not None:
            parent = self.cohorts[cohort]
            node.parent = parent
            parent.child_queues.append(node)
        return node

    def add_cohort(self, name: str, limits: Mapping[FlavorResource, Limits]) -> QuotaNode:
        node = QuotaNode(name, is_cohort=True, limits=limits)
        self.cohorts[name] = node
        return node

    def link_cohort(self, child: str, parent: str) -> None:
        c, p = self.cohorts[child], self.cohorts[parent]
        c.parent = p
        p.child_cohorts.append(c)

    def finish(self) -> None:
        """Compute subtree quotas, local quotas and heights bottom-up, from every root (rule 2)."""
        for node in (*self.cohorts.values(), *self.queues.values()):
            if node.parent is None:
                _accumulate(node)


def _accumulate(node: QuotaNode) -> None:
    subtree = {fr: lim.nominal for fr, lim in node.limits.items()}
    height = min(len(node.child_queues) + len(node.child_cohorts), 1)
    for child in (*node.child_cohorts, *node.child_queues):
        if child.is_cohort:
            _accumulate(child)
            height = max(height, child.height + 1)
        else:
            _accumulate(child)
        for fr, quota in child.subtree.items():
            subtree[fr] = subtree.get(fr, 0) + quota - child.local.get(fr, 0)
    node.subtree = subtree
    node.potential = {}
    node.height = height if node.is_cohort else 0
    node.local = {fr: max(0, subtree.get(fr, 0) - lim.lending)
                  for fr, lim in node.limits.items() if lim.lending is not None}
