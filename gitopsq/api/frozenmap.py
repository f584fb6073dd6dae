"""An immutable, hashable, key-sorted mapping for model fields (labels, requests, node selectors)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Generic, TypeVar

K = TypeVar("K", bound=str)
V = TypeVar("V")


class FrozenMap(Mapping[K, V], Generic[K, V]):
    """A read-only mapping whose keys are kept sorted, so equal maps compare, hash and print alike."""

    __slots__ = ("_data", "_hash")

    def __init__(self, items: Mapping[K, V] | None = None) -> None:
        self._data: dict[K, V] = dict(sorted(items.items())) if items else {}
        self._hash: int | None = None

    def __getitem__(self, key: K) -> V:
        return self._data[key]

    def __iter__(self) -> Iterator[K]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __hash__(self) -> int:
        if self._hash is None:
            self._hash = hash(tuple(self._data.items()))
        return self._hash

    def __eq__(self, other: object) -> bool:
        if isinstance(other, FrozenMap):
            return self._data == other._data
        if isinstance(other, Mapping):
            return self._data == dict(other)
        return NotImplemented

    def __repr__(self) -> str:
        return f"FrozenMap({self._data!r})"
