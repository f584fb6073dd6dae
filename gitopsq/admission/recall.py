"""Nominations remembered across cycles, reused while nothing they read has changed.

A head is nominated again in every cycle it is popped, and a waiting preemptor is popped in every cycle while
its victims still hold their quota; in many of those cycles its cohort tree has not changed at all (the other
queues of the tree only parked heads). A nomination reads, besides what is fixed for the engine's life (the
topology and settings): the usage of the nodes of its own cohort tree, the holders of that tree's ClusterQueues
(who, and whether being evicted), the workloads preempted earlier in the instant (`State.preempted_now`: only
grows, by workloads that just stopped holding quota, and is emptied with every instant, as this memo is), the
generation of its ClusterQueue and where its last flavor scans stopped. `Recall` keeps, per workload, the last
outcome with those inputs, compared by value (`tree_state`), so a reused outcome is exactly the one a fresh
nomination would give.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Generic, TypeVar

from gitopsq.admission.holders import Holders
from gitopsq.admission.quota import QuotaNode

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

    __slots__ = ("_last",)

    def __init__(self) -> None:
        self._last: dict[str, tuple[tuple[object, ...], T]] = {}

    def get(self, key: str, inputs: tuple[object, ...]) -> T | None:
        """The value remembered for ``key`` if it was computed from equal ``inputs``."""
        last = self._last.get(key)
        if last is None or last[0] != inputs:
            return None
        return last[1]

    def put(self, key: str, inputs: tuple[object, ...], value: T) -> None:
        self._last[key] = (inputs, value)

    def clear(self) -> None:
        self._last.clear()
