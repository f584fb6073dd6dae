"""The controller's manager: leader election and a list of runnables that work only while leading.

Structure (docs/controller.md):
- `Controller` owns an optional `LeaderElector` and a list of `Runnable`s. When it becomes leader it starts every
  runnable in its own thread with a stop event scoped to that leadership; when leadership is lost or the process
  is asked to stop (SIGTERM/SIGINT) it sets that event, joins the threads, and releases the Lease.
- The sync loop (gitopsq.sync.runnable.SyncLoop) is the sync runnable: poll on an interval, or at once when
  triggered (webhook), back off exponentially while the remote or the API is unreachable.
- The admission loop (gitopsq.admission_loop.loop.AdmissionLoop) is another Runnable in the same list.
- Leadership hooks (`LeaderAudit`, the metrics' replica role) run before the runnables start and after they stop,
  so the audit trail has exactly one writer: the leader.

The audit wiring lives in gitopsq.controller.leader_audit, the HTTP endpoints in gitopsq.controller.endpoints, and the
parts are built from the command's flags in gitopsq.controller.wiring.
"""

from __future__ import annotations

import re
import threading
import traceback
from collections.abc import Callable, Sequence
from typing import Protocol

from gitopsq import logs
from gitopsq.cluster.apply import Backoff
from gitopsq.cluster.leader import LeaderElector
from gitopsq.metrics import KueueMetrics

_log = logs.get("controller")


class Runnable(Protocol):
    name: str

    def run(self, stop: threading.Event, may_write: Callable[[], bool]) -> None:
        """Work until ``stop`` is set; check ``may_write()`` immediately before every cluster write."""
        ...


def parse_duration(text: str) -> float:
    """``30s``, ``1m30s``, ``500ms``, ``2h`` → seconds (Go duration subset); ValueError otherwise."""
    parts = re.findall(r"(\d+(?:\.\d+)?)(ms|s|m|h)", text.strip())
    if not parts or "".join(n + u for n, u in parts) != text.strip():
        raise ValueError(f"not a duration: {text!r} (use e.g. 30s, 1m30s, 500ms)")
    unit = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
    return sum(float(n) * unit[u] for n, u in parts)


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
                _log.error("leadership hook failed", hook=type(hook).__name__, error=str(err))
        stop = threading.Event()
        self._leadership_stop = stop
        self._threads = [threading.Thread(target=self._guarded, args=(r, stop), name=f"gitopsq-{r.name}",
                                          daemon=True) for r in self.runnables]
        for thread in self._threads:
            thread.start()
        _log.info("runnables started", runnables=[r.name for r in self.runnables])

    def _guarded(self, runnable: Runnable, stop: threading.Event) -> None:
        """Run ``runnable`` for this term; one that raises is logged (where, what) and run again after a backoff
        (1 s doubling to a minute) while the term lasts — a thread dying on its own would leave a replica that
        holds the Lease and does nothing."""
        delays = iter(Backoff(initial=1.0, maximum=60.0, deadline=float("inf")).delays())
        while not stop.is_set():
            try:
                runnable.run(stop, self.may_write)
                return
            except Exception as err:
                frame = traceback.extract_tb(err.__traceback__)[-1] if err.__traceback__ else None
                delay = next(delays, 60.0)
                _log.error("runnable failed; restarting it", runnable=runnable.name,
                           error=f"{type(err).__name__}: {err}",
                           at=f"{frame.filename}:{frame.lineno}" if frame else "", delay=delay)
                stop.wait(delay)

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
                _log.error("leadership hook failed", hook=type(hook).__name__, error=str(err))
        _log.info("runnables stopped")

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

    def __init__(self, metrics: KueueMetrics) -> None:
        self.metrics = metrics

    def lead(self) -> None:
        self.metrics.set_role("leader")

    def follow(self) -> None:
        self.metrics.set_role("follower")


class WakingRunnable:
    """A runnable whose loop sleeps on an event of its own (the admission loop waits on its watch cache's
    ``changed`` event for up to ``resync`` seconds): setting ``wake`` when ``stop`` is set makes it stop at
    once, so a replica that loses the Lease or receives SIGTERM releases it without waiting a resync."""

    def __init__(self, inner: Runnable, wake: Callable[[], threading.Event]) -> None:
        self.inner = inner
        self.name = str(inner.name)
        self._wake = wake

    def run(self, stop: threading.Event, may_write: Callable[[], bool]) -> None:
        def waker() -> None:
            stop.wait()
            self._wake().set()

        threading.Thread(target=waker, name=f"gitopsq-{self.name}-waker", daemon=True).start()
        self.inner.run(stop, may_write)
