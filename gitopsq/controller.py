"""The long-running controller: leader election, a list of runnables that work only while leading, HTTP
endpoints (``/healthz``, ``/readyz``, Git webhooks), metrics, graceful shutdown.

Structure (docs/controller.md):
- `Controller` owns an optional `LeaderElector` and a list of `Runnable`s. When it becomes leader it starts every
  runnable in its own thread with a stop event scoped to that leadership; when leadership is lost or the process
  is asked to stop (SIGTERM/SIGINT) it sets that event, joins the threads, and releases the Lease.
- `SyncLoop` is the sync runnable: poll on an interval, or at once when triggered (webhook), back off
  exponentially while the remote or the API is unreachable (the last applied state stays untouched).
- The admission loop (gitopsq.cluster.admission.loop.AdmissionLoop) is another Runnable in the same list.
- Leadership hooks (`LeaderAudit`, the metrics' replica role) run before the runnables start and after they stop,
  so the audit trail has exactly one writer: the leader.

The audit wiring lives in gitopsq.controller_audit and the HTTP endpoints in gitopsq.controller_http; both are
importable from here too.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol

from gitopsq import logs
from gitopsq.cluster.leader import LeaderElector
from gitopsq.controller_audit import LeaderAudit, SyncAuditRecords
from gitopsq.controller_http import HttpEndpoints
from gitopsq.errors import GitopsqError
from gitopsq.sync import Syncer, SyncOptions

# Import paths other modules use: the audit and HTTP parts live in their own modules.
__all__ = ["Controller", "HttpEndpoints", "LeaderAudit", "LeadershipHook", "RoleHook", "Runnable", "SyncAuditRecords",
           "SyncLoop", "SyncStats", "WakingRunnable", "parse_duration"]


def _log() -> Any:
    """The logger, looked up at use: a module-level bound logger would freeze the configuration of import time."""
    return logs.get("controller")


class Runnable(Protocol):
    name: str

    def run(self, stop: threading.Event, may_write: Callable[[], bool]) -> None:
        """Work until ``stop`` is set; check ``may_write()`` immediately before every cluster write."""
        ...


def parse_duration(text: str) -> float:
    """``30s``, ``1m30s``, ``500ms``, ``2h`` → seconds (Go duration subset); ValueError otherwise."""
    import re

    parts = re.findall(r"(\d+(?:\.\d+)?)(ms|s|m|h)", text.strip())
    if not parts or "".join(n + u for n, u in parts) != text.strip():
        raise ValueError(f"not a duration: {text!r} (use e.g. 30s, 1m30s, 500ms)")
    unit = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
    return sum(float(n) * unit[u] for n, u in parts)


@dataclass
class SyncStats:
    passes: int = 0
    last_outcome: str | None = None
    last_error: str | None = None
    last_success: float | None = None  # monotonic
    consecutive_failures: int = 0


class SyncLoop:
    """The sync runnable: one `Syncer.sync` per interval or trigger, with exponential backoff on failure."""

    name = "sync"

    def __init__(self, syncer: Syncer, options: SyncOptions, *, interval: float, drift_interval: float = 300.0,
                 max_backoff: float = 300.0, on_result: Callable[[Any], None] | None = None) -> None:
        self.syncer = syncer
        self.options = options
        self.interval = interval
        self.drift_interval = drift_interval  # polls in between only look at Git (Flux: source vs apply interval)
        self._last_drift_check: float | None = None
        self.max_backoff = max_backoff
        self.stats = SyncStats()
        self._wake = threading.Event()
        self._on_result = on_result or (lambda _: None)

    def trigger(self, why: str = "requested") -> None:
        _log().info("sync triggered", why=why)
        self._wake.set()

    def run(self, stop: threading.Event, may_write: Callable[[], bool]) -> None:
        self.syncer.executor.may_write = may_write
        while not stop.is_set():
            self._wake.clear()
            if may_write():
                self.once()
            delay = self.interval if self.stats.consecutive_failures == 0 else \
                min(self.max_backoff, self.interval * 2 ** min(self.stats.consecutive_failures, 16) / 4)
            self._sleep(stop, delay)

    def _sleep(self, stop: threading.Event, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while not stop.is_set() and not self._wake.is_set():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return
            self._wake.wait(min(remaining, 0.2))

    def once(self) -> Any:
        self.stats.passes += 1
        now = time.monotonic()
        check = self._last_drift_check is None or now - self._last_drift_check >= self.drift_interval
        try:
            result = self.syncer.sync(replace(self.options, drift_check=check))
            if check and result.outcome in ("applied", "unchanged"):
                self._last_drift_check = now
            outcome, error = result.outcome, result.error
        except GitopsqError as err:
            result, outcome, error = None, "failed", str(err)
        self.stats.last_outcome, self.stats.last_error = outcome, error
        if outcome in ("applied", "unchanged", "rejected"):
            self.stats.consecutive_failures = 0
            self.stats.last_success = time.monotonic()
        else:
            self.stats.consecutive_failures += 1
        _log().info("sync pass", outcome=outcome, revision=getattr(result, "revision", None), error=error)
        self._on_result(result if result is not None else outcome)
        return result


class LeadershipHook(Protocol):
    def lead(self) -> None:
        """Called when this replica starts leading, before the runnables start."""
        ...

    def follow(self) -> None:
        """Called when it stops leading (or shuts down), after the runnables stopped."""
        ...


class Controller:
    """Runs runnables under leader election (or alone when ``elector`` is None) until `stop()`."""

    def __init__(self, runnables: Sequence[Runnable], elector: LeaderElector | None = None, *,
                 hooks: Sequence[LeadershipHook] = ()) -> None:
        self.runnables = list(runnables)
        self.hooks = list(hooks)
        self.elector = elector
        self.stopping = threading.Event()
        self._leadership_stop: threading.Event | None = None
        self._threads: list[threading.Thread] = []
        self.started = threading.Event()

    def may_write(self) -> bool:
        return not self.stopping.is_set() and (self.elector is None or self.elector.is_leading())

    def is_leader(self) -> bool:
        return self._leadership_stop is not None

    def _start_runnables(self) -> None:
        for hook in self.hooks:
            try:
                hook.lead()
            except Exception as err:  # a hook never keeps the runnables from running
                _log().error("leadership hook failed", hook=type(hook).__name__, error=str(err))
        stop = threading.Event()
        self._leadership_stop = stop
        self._threads = [threading.Thread(target=r.run, args=(stop, self.may_write), name=f"gitopsq-{r.name}",
                                          daemon=True) for r in self.runnables]
        for thread in self._threads:
            thread.start()
        _log().info("runnables started", runnables=[r.name for r in self.runnables])

    def _stop_runnables(self) -> None:
        if self._leadership_stop is None:
            return
        self._leadership_stop.set()
        for thread in self._threads:
            thread.join(timeout=60)
        self._leadership_stop, self._threads = None, []
        for hook in self.hooks:
            try:
                hook.follow()
            except Exception as err:
                _log().error("leadership hook failed", hook=type(hook).__name__, error=str(err))
        _log().info("runnables stopped")

    def _on_leadership(self, leading: bool) -> None:
        if leading:
            self._start_runnables()
        else:
            self._stop_runnables()

    def run(self) -> None:
        """Block until `stop()`; then stop runnables and release the lease."""
        self.started.set()
        if self.elector is None:
            self._start_runnables()
            # Timed waits: a SIGTERM the kernel hands to another thread only runs its Python handler when the
            # main thread executes bytecode again; an untimed wait could sleep through it for ever.
            while not self.stopping.wait(0.5):
                pass
            self._stop_runnables()
            return
        self.elector.run(self.stopping, self._on_leadership)
        self._stop_runnables()

    def stop(self) -> None:
        self.stopping.set()


class RoleHook:
    """Sets the ``replica_role`` label of the Kueue metrics to ``leader`` / ``follower``."""

    def __init__(self, metrics: Any) -> None:
        self.metrics = metrics

    def lead(self) -> None:
        self.metrics.set_role("leader")

    def follow(self) -> None:
        self.metrics.set_role("follower")


class WakingRunnable:
    """A runnable whose loop sleeps on an event of its own (the admission loop waits on its watch cache's
    ``changed`` event for up to ``resync`` seconds): setting ``wake`` when ``stop`` is set makes it stop at
    once, so a replica that loses the Lease or receives SIGTERM releases it without waiting a resync."""

    def __init__(self, inner: Any, wake: Callable[[], threading.Event]) -> None:
        self.inner = inner
        self.name = str(inner.name)
        self._wake = wake

    def run(self, stop: threading.Event, may_write: Callable[[], bool]) -> None:
        def waker() -> None:
            stop.wait()
            self._wake().set()

        threading.Thread(target=waker, name=f"gitopsq-{self.name}-waker", daemon=True).start()
        self.inner.run(stop, may_write)
