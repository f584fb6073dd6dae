"""The controller's sync runnable: one `Syncer.sync` per interval or trigger (a Git push webhook), with
exponential backoff while the remote or the API is unreachable (the last applied state stays untouched)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace

from gitopsq import logs
from gitopsq.errors import GitopsqError
from gitopsq.sync.syncer import Syncer
from gitopsq.sync.values import SyncOptions, SyncResult

_log = logs.get("controller")

# Outcomes after which polling goes on at the normal interval: the pass reached a final answer. A stalled
# source waits for a person, so backing off would only delay noticing the repair.
FINAL_OUTCOMES = ("applied", "unchanged", "rejected", "refused", "health-pending", "unhealthy", "suspended",
                  "stalled", "rewound")
HEALTH_TIMEOUT = 120.0  # seconds a new revision's queues have to become healthy before it is reported unhealthy


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
                 max_backoff: float = 300.0, on_result: Callable[[SyncResult | str], None] | None = None,
                 health_timeout: float | None = HEALTH_TIMEOUT) -> None:
        self.syncer = syncer
        # the controller checks the applied queues' health (docs/sync.md, "Health after apply"); None: it does not
        self.options = options if options.health_timeout is not None else \
            replace(options, health_timeout=health_timeout, health_wait=False)
        self.interval = interval
        self.drift_interval = drift_interval  # polls in between only look at Git (Flux: source vs apply interval)
        self._last_drift_check: float | None = None
        self.max_backoff = max_backoff
        self.stats = SyncStats()
        self._wake = threading.Event()
        self._on_result = on_result or (lambda _: None)

    def trigger(self, why: str = "requested") -> None:
        """Sync now instead of at the next poll (where a Git push webhook wakes the loop)."""
        _log.info("sync triggered", why=why)
        self._wake.set()

    def run(self, stop: threading.Event, may_write: Callable[[], bool]) -> None:
        self.syncer.executor.may_write = may_write
        while not stop.is_set():
            self._wake.clear()
            if may_write():
                self.once()
            interval = self.poll_interval
            delay = interval if self.stats.consecutive_failures == 0 else \
                min(self.max_backoff, interval * 2 ** min(self.stats.consecutive_failures, 16) / 4)
            self._sleep(stop, delay)

    @property
    def poll_interval(self) -> float:
        """The GitSource's ``spec.interval`` when set (read at every pass), else the controller's interval."""
        return self.syncer.interval or self.interval

    def _sleep(self, stop: threading.Event, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while not stop.is_set() and not self._wake.is_set():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return
            self._wake.wait(min(remaining, 0.2))

    def once(self) -> SyncResult | None:
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
        if outcome in FINAL_OUTCOMES:
            self.stats.consecutive_failures = 0
            self.stats.last_success = time.monotonic()
        else:
            self.stats.consecutive_failures += 1
        _log.info("sync pass", outcome=outcome, revision=getattr(result, "revision", None), error=error)
        self._on_result(result if result is not None else outcome)
        return result
