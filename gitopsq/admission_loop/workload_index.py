"""Workloads indexed as the admission pass reads them, kept current by the watch (under the informer's lock).

A pass used to walk every Workload several times (grouping the waiting ones, finding the quota holders, the
queue counts, the Workloads each Job owns): at 10,000 waiting Workloads that bookkeeping cost more than the
admission engine itself. The index keeps, per change:
- ``holding``: Workloads that hold quota (admitted or being evicted);
- ``pending``: waiting Workloads grouped by LocalQueue, priority (or its class) and pod sets, each group
  sorted by (creation time, key), so the oldest ``window`` of a group are a slice;
- ``owned``: for each controller owner (``namespace/uid``), the keys of the Workloads it owns;
- ``finished``: how many finished Workloads each LocalQueue and ClusterQueue has (Kueue's finished gauges), so
  that metrics never walk the finished ones, which pile up.
With metrics on, the pass reads the window and counts the waiting Workloads beyond it (`beyond`) from here
too: the index is the only path a pass takes.
"""

from __future__ import annotations

import bisect

from gitopsq.admission_loop.live_workload import ADMITTED, EVICTING, FINISHED, PENDING, LiveWorkload
from gitopsq.api.raw_objects import KubeObject

GroupKey = tuple[str, str, int | None, str | None, int]  # namespace, queue, priority, priority class, id(pod sets)


def _group(w: LiveWorkload) -> GroupKey:
    return (w.namespace, w.queue, w.priority, w.priority_class, id(w.pod_sets))


def _owner(raw: KubeObject) -> str | None:
    meta = raw.get("metadata") or {}
    for ref in meta.get("ownerReferences") or ():
        if ref.get("controller"):
            return f"{meta.get('namespace')}/{ref.get('uid')}"
    return None


class WorkloadIndex:
    """See the module docstring. Mutated through `update` / `clear` by the informer, which holds its lock;
    read through the snapshot methods, which the cache calls under the same lock."""

    def __init__(self) -> None:
        self.holding: dict[str, LiveWorkload] = {}
        self.pending: dict[GroupKey, list[tuple[float, str]]] = {}
        self.pending_views: dict[str, LiveWorkload] = {}
        self.owned: dict[str, set[str]] = {}
        self._owner_of: dict[str, str] = {}
        self.finished_lq: dict[tuple[str, str], int] = {}  # (namespace, LocalQueue) -> finished Workloads
        self.finished_cq: dict[str, int] = {}  # ClusterQueue that admitted them -> finished Workloads
        self._finished_of: dict[str, tuple[tuple[str, str], str]] = {}

    def clear(self) -> None:
        self.holding.clear()
        self.pending.clear()
        self.pending_views.clear()
        self.owned.clear()
        self._owner_of.clear()
        self.finished_lq.clear()
        self.finished_cq.clear()
        self._finished_of.clear()

    def update(self, key: str, raw: KubeObject | None, view: LiveWorkload | None) -> None:
        """``key`` now reads ``raw`` / ``view`` (None: deleted, or its pod sets unreadable)."""
        self.holding.pop(key, None)
        old = self.pending_views.pop(key, None)
        if old is not None:
            entries = self.pending.get(_group(old))
            if entries is not None:
                at = bisect.bisect_left(entries, (old.created, key))
                if at < len(entries) and entries[at] == (old.created, key):
                    del entries[at]
                if not entries:
                    del self.pending[_group(old)]
        self._count_finished(key, view)
        if view is not None and view.state in (ADMITTED, EVICTING):
            self.holding[key] = view
        elif view is not None and view.state == PENDING:
            self.pending_views[key] = view
            bisect.insort(self.pending.setdefault(_group(view), []), (view.created, key))
        owner = _owner(raw) if raw is not None else None
        previous = self._owner_of.pop(key, None)
        if previous is not None:
            keys = self.owned.get(previous)
            if keys is not None:
                keys.discard(key)
                if not keys:
                    del self.owned[previous]
        if owner is not None:
            self._owner_of[key] = owner
            self.owned.setdefault(owner, set()).add(key)

    def _count_finished(self, key: str, view: LiveWorkload | None) -> None:
        was = self._finished_of.pop(key, None)
        if was is not None:
            lq, cq = was
            self.finished_lq[lq] -= 1
            if not self.finished_lq[lq]:
                del self.finished_lq[lq]
            self.finished_cq[cq] -= 1
            if not self.finished_cq[cq]:
                del self.finished_cq[cq]
        if view is not None and view.state == FINISHED:
            lq, cq = (view.namespace, view.queue), view.cluster_queue or ""
            self._finished_of[key] = (lq, cq)
            self.finished_lq[lq] = self.finished_lq.get(lq, 0) + 1
            self.finished_cq[cq] = self.finished_cq.get(cq, 0) + 1

    def window(self, size: int) -> dict[str, LiveWorkload]:
        """The quota holders plus the oldest ``size`` of each pending group, by key."""
        out = dict(self.holding)
        for entries in self.pending.values():
            for _, key in entries[:size]:
                out[key] = self.pending_views[key]
        return out

    def beyond(self, size: int) -> dict[GroupKey, int]:
        """How many waiting Workloads of each group `window` leaves out (those after its oldest ``size``)."""
        return {group: len(entries) - size for group, entries in self.pending.items() if len(entries) > size}

    def finished_counts(self) -> tuple[dict[tuple[str, str], int], dict[str, int]]:
        """Finished Workloads per (namespace, LocalQueue) and per ClusterQueue."""
        return dict(self.finished_lq), dict(self.finished_cq)

    def counts(self) -> dict[str, int]:
        """How many Workloads the watch has shown waiting, holding quota and finished so far."""
        return {"pending": len(self.pending_views), "holding": len(self.holding), "finished": len(self._finished_of)}

    def tally(self) -> tuple[list[LiveWorkload], dict[tuple[str, str], int]]:
        """The quota holders, and the number of pending Workloads per (namespace, LocalQueue)."""
        counts: dict[tuple[str, str], int] = {}
        for (namespace, queue, *_), entries in self.pending.items():
            counts[(namespace, queue)] = counts.get((namespace, queue), 0) + len(entries)
        return list(self.holding.values()), counts

    def owners(self) -> dict[str, list[str]]:
        """Controller owner (``namespace/uid``) → keys of the Workloads it owns."""
        return {owner: sorted(keys) for owner, keys in self.owned.items()}
