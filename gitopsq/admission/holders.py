"""The workloads holding quota in one ClusterQueue, with a memo of what preemption searches derive from them.

Waiting preemptors are nominated again in every cycle, each time with a full preemption search over the
holders of every ClusterQueue of their cohort tree, while most of those holders have not changed since the last
search. `Holders.derived` keeps such derived values (the candidates a kind of preemptor finds in this queue) and
is emptied by every change of the set, and by `reordered` when a holder's eviction state changes, so what it
returns is always what a fresh computation would give; `Holders.version` counts those changes (for memos kept
elsewhere, `recall`).
"""

from __future__ import annotations

from collections.abc import Hashable, ItemsView, Iterator, KeysView, MutableMapping, ValuesView

from gitopsq.admission.workload import WorkloadInfo


class Holders(MutableMapping[str, WorkloadInfo]):
    """Workloads by key; every mutation (including the `MutableMapping` mixins, which go through
    ``__setitem__``/``__delitem__``) clears `derived`."""

    __slots__ = ("_by_key", "derived", "version")

    def __init__(self) -> None:
        self._by_key: dict[str, WorkloadInfo] = {}
        self.derived: dict[Hashable, tuple[object, ...]] = {}
        self.version = 0  # counts the changes: equal versions of one Holders mean the same holders, alike ordered

    def __getitem__(self, key: str) -> WorkloadInfo:
        return self._by_key[key]

    def __setitem__(self, key: str, w: WorkloadInfo) -> None:
        self.reordered()
        self._by_key[key] = w

    def __delitem__(self, key: str) -> None:
        self.reordered()
        del self._by_key[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._by_key)

    def __len__(self) -> int:
        return len(self._by_key)

    def __contains__(self, key: object) -> bool:
        return key in self._by_key

    def __repr__(self) -> str:
        return f"Holders({list(self._by_key)})"

    # The plain dict's views and lookup, without the mixins' per-item indirection.
    def keys(self) -> KeysView[str]:
        return self._by_key.keys()

    def values(self) -> ValuesView[WorkloadInfo]:
        return self._by_key.values()

    def items(self) -> ItemsView[str, WorkloadInfo]:
        return self._by_key.items()

    def reordered(self) -> None:
        """A holder's place in preemption order changed (it is being evicted, or no longer)."""
        self.derived.clear()
        self.version += 1
