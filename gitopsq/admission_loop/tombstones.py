"""Deletions an informer's watch has shown, so that the answer of a write made just before one, arriving after
it, cannot bring the object back into the cache (watch_cache.py). A pod kept that way after it was gone held its
group's Workload, whose finalizer waits for the pods to go, for ever."""

from __future__ import annotations

from collections.abc import Iterable

from gitopsq.api.raw_objects import KubeObject

LIMIT = 10_000  # deletions remembered per informer; the oldest are forgotten first


def resource_version(obj: KubeObject) -> int:
    text = (obj.get("metadata") or {}).get("resourceVersion") or "0"
    return int(text) if text.isdigit() else 0


class Tombstones:
    """key → the resourceVersion at which the watch (or a relist) saw it deleted; bounded, oldest first out."""

    def __init__(self, limit: int = LIMIT) -> None:
        self.limit = limit
        self._deleted: dict[str, int] = {}

    def bury(self, keys: Iterable[str], rv: int) -> None:
        for key in keys:
            self._deleted.pop(key, None)
            self._deleted[key] = rv
        while len(self._deleted) > self.limit:
            del self._deleted[next(iter(self._deleted))]

    def hides(self, key: str, obj: KubeObject) -> bool:
        """Whether ``obj`` (a write's answer) is older than the deletion already seen of ``key``."""
        rv = resource_version(obj)
        return 0 < rv <= self._deleted.get(key, 0)

    def __len__(self) -> int:
        return len(self._deleted)
