"""Nominations remembered across cycles, reused while nothing they read has changed.

A head is nominated again in every cycle it is popped, and a waiting preemptor is popped in every cycle while
its victims still hold their quota; in many of those cycles its cohort tree has not changed at all (the other
queues of the tree only parked heads). A nomination reads, besides what is fixed for the engine's life (the
topology and settings): the usage of the nodes of its own cohort tree, the holders of that tree's ClusterQueues
(who, and whether being evicted), the workloads preempted earlier in the instant (`State.preempted_now`: only
grows, by workloads that just stopped holding quota, and is emptied with every instant, as this memo is), the
generation of its ClusterQueue and where its last flavor scans stopped. `Recall` keeps, per workload, the last
outcome with those inputs, compared by value (`tree_state`), so a reused outcome is exactly the one a fresh
nomination would give. The preemption candidate lists of an instant's searches are shared the same way (`Memo`,
keyed by `candidates_key`). Both keys are built here and nowhere else; both memos are off when the engine is
built with ``memoize=False`` (the outcomes must not change: tests/admission/test_memoize.py).
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from dataclasses import dataclass
from typing import Generic, TypeVar

from gitopsq.admission.holders import Holders
from gitopsq.admission.quota import FlavorResource, QuotaNode
from gitopsq.admission.workload import Shape

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class TreeScope:
    """Every quota node and every ClusterQueue's holders of one cohort tree."""

    nodes: tuple[QuotaNode, ...]
    holders: tuple[Holders, ...]


def tree_scope(root: QuotaNode, admitted: Mapping[str, Holders]) -> TreeScope:
    nodes: list[QuotaNode] = []
    pending = [root]
    while pending:
        node = pending.pop()
        nodes.append(node)
        pending.extend(node.child_cohorts)
        pending.extend(node.child_queues)
    return TreeScope(tuple(nodes), tuple(admitted[n.name] for n in nodes if not n.is_cohort))


def tree_state(scope: TreeScope) -> tuple[int, ...]:
    """The usage of every node and the version of every holders set of the tree, by value, as plain integers.

    A node's usage is listed as its number of flavor-resources and their amounts: usage dicts only ever gain keys
    (removal leaves a zero), so at one node an equal count means the same keys in the same order. Integers only:
    the garbage collector stops tracking such a tuple, which matters as one is kept per remembered nomination."""
    out: list[int] = []
    append, extend = out.append, out.extend
    for n in scope.nodes:
        usage = n.usage
        append(len(usage))
        extend(usage.values())
    extend([h.version for h in scope.holders])
    return tuple(out)


class Recall(Generic[T]):
    """The last value computed per key and the inputs it was computed from."""

    __slots__ = ("_last", "enabled")

    def __init__(self, *, enabled: bool = True) -> None:
        self._last: dict[str, tuple[tuple[object, ...], T]] = {}
        self.enabled = enabled

    def get(self, key: str, inputs: tuple[object, ...]) -> T | None:
        """The value remembered for ``key`` if it was computed from equal ``inputs``."""
        if not self.enabled:
            return None
        last = self._last.get(key)
        if last is None or last[0] != inputs:
            return None
        return last[1]

    def put(self, key: str, inputs: tuple[object, ...], value: T) -> None:
        if self.enabled:
            self._last[key] = (inputs, value)

    def __len__(self) -> int:
        return len(self._last)

    def clear(self) -> None:
        self._last.clear()


def nomination_inputs(cq: str, shape: Shape, generation: int, resume: Mapping[tuple[int, str], int] | None,
                      tree: tuple[int, ...]) -> tuple[object, ...]:
    """Everything a nomination reads that can change within an instant (module docstring), by value."""
    return (cq, shape, generation, None if resume is None else tuple(resume.items()), tree)


class Memo(Generic[T]):
    """Values by key for one instant (emptied with `clear`); remembers nothing when disabled."""

    __slots__ = ("_values", "enabled")

    def __init__(self, *, enabled: bool = True) -> None:
        self._values: dict[Hashable, T] = {}
        self.enabled = enabled

    def get(self, key: Hashable) -> T | None:
        return self._values.get(key) if self.enabled else None

    def put(self, key: Hashable, value: T) -> None:
        if self.enabled:
            self._values[key] = value

    def __len__(self) -> int:
        return len(self._values)

    def clear(self) -> None:
        self._values.clear()


def candidates_key(cq: str, *, priority: int, created: float | None, contested: frozenset[FlavorResource],
                   advantages: tuple[bool, ...], protected: bool, tree: tuple[int, ...]) -> Hashable:
    """What a preemption candidate search reads (`ClassicalPreemption.candidates`): the preemptor's ClusterQueue,
    priority, creation (None unless a policy compares it), contested flavor-resources, the ancestors where it has
    a hierarchical advantage, whether workloads preempted at this instant are left out, and the cohort tree's
    `tree_state`. Which of those workloads hold quota in the tree follows from its `tree_state`: one joins
    `State.preempted_now` only as it releases its quota (a holders change), and the set is emptied with the memo;
    so a preemption completed in another tree leaves this tree's lists valid."""
    return (cq, priority, created, contested, advantages, protected, tree)


def ceilings_key(candidates: Hashable, allow_borrowing: bool, requested: tuple[FlavorResource, ...]) -> Hashable:
    """What the ceilings of a futile victim search read (`ClassicalPreemption.targets`): its candidate lists (by
    their `candidates_key`, which names the tree state too), the attempt, and which flavor-resources it measured."""
    return (candidates, allow_borrowing, requested)
