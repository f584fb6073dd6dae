"""Admission writes in flight: sent on their own pool, not awaited by the pass that decided them.

On a saturated API server (Kueue's large-scale runner creates a thousand Workloads a second, and a write waits
1–5 s among its requests) a pass that waited for its batch wrote about as many admissions a second as it had
writers in flight divided by that wait, whatever the budget. Kueue's scheduler assumes a Workload admitted in its
cache and applies the admission from a goroutine; this does the same:

- `send` files the Workload as admitted (its status as the write will make it), then queues the write;
- a pass takes a `snapshot` before it reads the cache and `overlay`s it on what it read: a write answered in
  between is in one or the other, never in neither, so its quota is never seen free while it is held;
- an answered write has put its answer into the cache (`Writer.workload_status`) before it is forgotten here;
  a failed one is only forgotten: the next pass decides again from what the API server holds (every status
  write carries the resourceVersion it was computed from, so a stale decision is a 409, never an overwrite);
- `unsent` counts writes queued and not yet holding a token: the pass sizes its batch by the tokens banked
  less those, so two passes do not spend the same tokens;
- evictions and pending reasons go out the same way (`send_write`), assumed nothing: an evicted Workload holds
  its quota until the answer is in the cache (so a preemptor is admitted only in a pass after its victims'
  evictions were answered), and a Workload with a write in flight gets no other until it is answered (`busy`).
  Passes that waited for them took 11–25 s at the end of Kueue's large-scale creation ramp, for a few dozen
  writes queued among a thousand creates.
A crash loses only writes not yet answered: the API server is the truth the next leader starts from.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, MutableMapping
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import Any

from gitopsq import logs
from gitopsq.cluster.admission.live_workload import LiveWorkload, read_workload

_log = logs.get("admission")


@dataclass(frozen=True, slots=True, eq=False)
class Assumed:
    """One admission sent and not yet answered: the version it was computed from and the Workload as admitted."""

    base_version: str
    view: LiveWorkload


def assumed_raw(raw: Mapping[str, Any], status: Mapping[str, Any]) -> dict[str, Any]:
    """``raw`` as the merge patch of ``status`` leaves it (None removes a field), resourceVersion unchanged."""
    merged = {**(raw.get("status") or {}), **status}
    return {**raw, "status": {k: v for k, v in merged.items() if v is not None}}


def overlay(live: MutableMapping[str, LiveWorkload], snapshot: Mapping[str, Assumed]) -> set[str]:
    """Put the assumed admissions of ``snapshot`` into ``live`` where it still holds the version they were
    computed from (or does not hold them: a pending Workload beyond the pass's window). A newer version — the
    answer, or someone else's change that will make the write a 409 — is left as read. Returns the keys
    overlaid: the pass writes nothing else to them while their admission is in flight."""
    overlaid: set[str] = set()
    for key, assumed in snapshot.items():
        current = live.get(key)
        if current is None or _version(current) == assumed.base_version:
            live[key] = assumed.view
            overlaid.add(key)
    return overlaid


def _version(w: LiveWorkload) -> str:
    return str((w.raw.get("metadata") or {}).get("resourceVersion") or "")


class InFlight:
    """The admission writes of one loop (module docstring)."""

    def __init__(self, workers: int) -> None:
        self._pool = ThreadPoolExecutor(max_workers=max(1, workers), thread_name_prefix="admission-send")
        self._lock = threading.Lock()
        self._assumed: dict[str, Assumed] = {}
        self._futures: set[Future[None]] = set()
        self._writes: set[str] = set()  # Workloads with an eviction or a pending reason in flight
        self._unsent = 0

    @property
    def unsent(self) -> int:
        with self._lock:
            return self._unsent

    def __len__(self) -> int:
        with self._lock:
            return len(self._assumed)

    def busy(self) -> set[str]:
        """The Workloads with any write in flight."""
        with self._lock:
            return self._writes | self._assumed.keys()

    def snapshot(self) -> dict[str, Assumed]:
        with self._lock:
            return dict(self._assumed)

    def send(self, w: LiveWorkload, status: Mapping[str, Any], write: Callable[[], None]) -> None:
        """File ``w`` as admitted with ``status``, then run ``write`` on the pool."""
        view = read_workload(assumed_raw(w.raw, status))
        if view is None:  # cannot happen for a Workload the engine admitted; write without assuming
            view = w
        assumed = Assumed(_version(w), view)
        with self._lock:
            self._assumed[w.key] = assumed
        self._submit(w.key, assumed, write)

    def send_write(self, key: str, write: Callable[[], None]) -> None:
        """Run ``write`` (an eviction or pending reason of Workload ``key``) on the pool, assuming nothing;
        `busy` names ``key`` until it is answered."""
        with self._lock:
            self._writes.add(key)
        self._submit(key, None, write)

    def _submit(self, key: str, assumed: Assumed | None, write: Callable[[], None]) -> None:
        with self._lock:
            self._unsent += 1
        future = self._pool.submit(self._run, key, assumed, write)
        with self._lock:
            self._futures.add(future)
        future.add_done_callback(self._done)

    def _run(self, key: str, assumed: Assumed | None, write: Callable[[], None]) -> None:
        with self._lock:
            self._unsent -= 1
        try:
            write()
        except Exception:  # a bug, not an API answer (those are handled in the write): seen, not silent
            _log.exception("admission write raised", workload=key)
        finally:
            with self._lock:
                if assumed is None:
                    self._writes.discard(key)
                elif self._assumed.get(key) is assumed:
                    del self._assumed[key]

    def _done(self, future: Future[None]) -> None:
        with self._lock:
            self._futures.discard(future)

    def drain(self, timeout: float | None = None) -> bool:
        """Wait until every write sent so far is answered (True) or ``timeout`` passes (False)."""
        with self._lock:
            pending = set(self._futures)
        if not pending:
            return True
        _, left = wait(pending, timeout=timeout)
        return not left

    def close(self, timeout: float | None = None) -> None:
        """Wait for the writes in flight (up to ``timeout``), then stop the pool."""
        self.drain(timeout)
        self._pool.shutdown(wait=False, cancel_futures=True)
