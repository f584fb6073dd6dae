"""How the controller process keeps Python's cycle collector off its long-lived heap.

The watch caches hold every Workload, queue and job as parsed JSON: at Kueue's large-scale benchmark (50,000
Workloads) about 1.6 million tracked objects. CPython runs a full collection whenever the objects that survived
since the last one exceed a quarter of the old generation, and every admission pass leaves survivors (its
decisions, the next pass's views), so full collections came every two seconds and took 0.5–1 s each, holding the
GIL: a quarter of the controller's time, measured with ``gc.callbacks`` (docs/benchmarks.md).

The cache is garbage only by reference counting (a replaced or deleted object is freed at once; parsed JSON has
no cycles), so scanning it finds nothing. `HeapKeeper` moves what is alive into the permanent generation every
``freeze_every`` seconds (`gc.freeze`: splices lists, no scan), so a full collection walks only what was allocated
since; and every ``full_every`` seconds it takes everything back (`gc.unfreeze`), collects once, and freezes again,
so a cycle that did form among frozen objects lives at most that long.
"""

from __future__ import annotations

import gc
import threading
import time

from gitopsq import logs

_log = logs.get("controller")

FREEZE_EVERY = 1.0  # seconds between freezes of what is alive
FULL_EVERY = 300.0  # seconds between full collections of everything, frozen part included


class HeapKeeper:
    """A daemon thread doing the module docstring's two chores until ``stop`` is set."""

    def __init__(self, *, freeze_every: float = FREEZE_EVERY, full_every: float = FULL_EVERY) -> None:
        self.freeze_every, self.full_every = freeze_every, full_every
        self.freezes = 0
        self.full_collections = 0
        self._thread: threading.Thread | None = None

    def start(self, stop: threading.Event) -> None:
        self._thread = threading.Thread(target=self._run, args=(stop,), name="gitopsq-heap", daemon=True)
        self._thread.start()

    def _run(self, stop: threading.Event) -> None:
        last_full = time.monotonic()
        while not stop.wait(self.freeze_every):
            if time.monotonic() - last_full >= self.full_every:
                self.collect_all()
                last_full = time.monotonic()
            gc.freeze()
            self.freezes += 1
        gc.unfreeze()  # leave the process as it was found

    def collect_all(self) -> int:
        """Everything back into the collector's view, one full collection; returns the objects it freed."""
        started = time.perf_counter()
        gc.unfreeze()
        found = gc.collect()
        self.full_collections += 1
        _log.debug("full collection", unreachable=found, seconds=round(time.perf_counter() - started, 3))
        return found
