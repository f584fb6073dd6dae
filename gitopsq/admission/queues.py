"""Pending workloads of one ClusterQueue: an active heap and an inadmissible set (shared/research/kueue.md §1.6).

Order in the heap: priority descending, queue-order timestamp ascending, then the workload's unique sequence
number. After a failed attempt a StrictFIFO queue puts the workload straight back (the same head blocks the
queue); a BestEffortFIFO queue parks it as *inadmissible* so the next workload becomes head, until capacity
is released in its cohort tree (`requeue_inadmissible`). Removal is lazy: heap entries carry a version and
stale ones are skipped when they surface, so no operation re-sorts the queue.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator

from gitopsq.admission.messages import Status
from gitopsq.admission.workload import Shape, WorkloadInfo

Blocked = Status  # what the equivalence class's last attempt got


class ClusterQueueQueue:
    __slots__ = ("_counter", "_heap", "_version", "blocked_shapes", "inadmissible", "name", "sticky", "strict")

    def __init__(self, name: str, *, strict: bool) -> None:
        self.name = name
        self.strict = strict
        self._heap: list[tuple[int, float, int, int, WorkloadInfo]] = []
        self._version: dict[str, int] = {}  # key -> version of its live heap entry
        self._counter = 0
        self.inadmissible: dict[str, WorkloadInfo] = {}
        # Equivalence classes (shape and priority) that found no fit since capacity last changed: their other
        # members skip nomination (Kueue's SchedulingEquivalenceHashing, BestEffortFIFO only).
        self.blocked_shapes: dict[tuple[Shape, int], Blocked] = {}
        # A BestEffortFIFO preemptor stays the head until it is admitted (Kueue's sticky preemptor), so the
        # capacity its victims free is not taken by whoever would otherwise come first.
        self.sticky: WorkloadInfo | None = None

    def __len__(self) -> int:
        return len(self._version) + len(self.inadmissible)

    def push(self, w: WorkloadInfo) -> None:
        self.inadmissible.pop(w.key, None)
        self._counter += 1
        self._version[w.key] = self._counter
        heapq.heappush(self._heap, (-w.priority, w.created, w.seq, self._counter, w))

    def discard(self, key: str) -> None:
        self._version.pop(key, None)
        self.inadmissible.pop(key, None)

    def _clean(self) -> None:
        heap = self._heap
        while heap and self._version.get(heap[0][4].key) != heap[0][3]:
            heapq.heappop(heap)

    def has_active(self) -> bool:
        # Every key in ``_version`` has its live entry in the heap (stale ones only wait to surface), so this needs
        # no cleaning: asked of every ClusterQueue in every cycle.
        return bool(self._version)

    def pop(self) -> WorkloadInfo | None:
        """Remove and return the head of the active heap (the sticky preemptor first)."""
        sticky, self.sticky = self.sticky, None
        if sticky is not None and sticky.key in self._version:
            del self._version[sticky.key]
            return sticky
        self._clean()
        if not self._heap:
            return None
        entry = heapq.heappop(self._heap)
        del self._version[entry[4].key]
        return entry[4]

    def park(self, w: WorkloadInfo) -> None:
        """Mark a popped workload inadmissible until capacity changes."""
        self.inadmissible[w.key] = w

    def requeue_inadmissible(self) -> bool:
        """Capacity changed: every inadmissible workload returns to the heap. True if any moved."""
        self.blocked_shapes.clear()
        if not self.inadmissible:
            return False
        # `push` for each, then one heapify instead of a push each: the heap's keys are unique (the counter), so
        # the order of pops does not depend on how the heap is laid out.
        heap, version, counter = self._heap, self._version, self._counter
        for w in self.inadmissible.values():
            counter += 1
            version[w.key] = counter
            heap.append((-w.priority, w.created, w.seq, counter, w))
        self._counter = counter
        self.inadmissible.clear()
        heapq.heapify(heap)
        return True

    def pending(self) -> Iterator[WorkloadInfo]:
        """Every pending workload, in no particular order."""
        live = set(self._version)
        for entry in self._heap:
            if entry[4].key in live and self._version[entry[4].key] == entry[3]:
                yield entry[4]
        yield from self.inadmissible.values()
