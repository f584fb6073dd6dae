"""What the controller tells the forge and people about each revision (docs/source.md "Commit statuses",
docs/notifications.md): a commit status on every revision it validates or applies, and notifications on a
failed sync, a rejected revision and drift that keeps coming back.

The sync never waits for the forge: statuses go on a bounded queue that one daemon thread posts (a full queue
drops the status); every forge error is logged (never the token) and counted in
``gitopsq_forge_status_total{outcome}``. Each (revision, state) is posted once per process, so a poll that finds
nothing new posts nothing.
"""

from __future__ import annotations

import contextlib
import queue
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import cast

from prometheus_client import CollectorRegistry, Counter

from gitopsq import logs
from gitopsq.forge.notify import DriftRepeats, Event, Kind, Notifier
from gitopsq.forge.port import Forge, State
from gitopsq.source.port import Source
from gitopsq.sync.values import SyncResult, Validated, Validator

DEFAULT_CONTEXT = "gitopsq/sync"
_REMEMBERED = 256  # revisions whose last posted state is kept (bounded memory)


_log = logs.get("controller")


class ForgeReporter:
    """Turns sync outcomes into commit statuses (through ``forge``) and notifications (through ``notifier``).

    ``validator`` wraps the sync's Validator so a revision gets ``pending`` as its validation starts;
    ``observe`` takes each pass's SyncResult (the SyncLoop's ``on_result``)."""

    def __init__(self, forge: Forge | None, notifier: Notifier | None, *, repository: str,
                 context: str = DEFAULT_CONTEXT, target_url: str | None = None,
                 drift: DriftRepeats | None = None, registry: CollectorRegistry | None = None,
                 clock: Callable[[], float] = time.time, queue_size: int = 100, cluster: str = "") -> None:
        self.forge, self.notifier = forge, notifier
        self.cluster = cluster  # a per-cluster controller's name: in status descriptions and notifications
        self.repository, self.context, self.target_url = repository, context, target_url
        self.drift = drift or DriftRepeats()
        self.clock = clock
        self.outcomes = Counter("gitopsq_forge_status_total", "Commit statuses by outcome (sent, failed, dropped)",
                                ["outcome"], registry=registry or CollectorRegistry())
        self._posted: OrderedDict[str, State] = OrderedDict()
        self._rejected_told: set[str] = set()
        self._queue: queue.Queue[tuple[str, State, str] | None] = queue.Queue(maxsize=queue_size)
        self._thread: threading.Thread | None = None
        if forge is not None:
            self._thread = threading.Thread(target=self._run, name="gitopsq-forge-status", daemon=True)
            self._thread.start()

    # -- inputs --------------------------------------------------------------------------------------------

    def validator(self, inner: Validator) -> Validator:
        """``inner`` with a ``pending`` status posted before each revision it validates."""

        def validate(source: Source, commit: str, previous: str | None) -> Validated:
            self.status(commit, "pending", "validating this revision")
            return inner(source, commit, previous)

        return validate

    def observe(self, result: SyncResult | str) -> None:
        """One sync pass's result (a SyncResult, or the outcome word when the pass raised)."""
        sha = getattr(result, "revision", None)
        outcome = getattr(result, "outcome", result)
        if sha is None:
            if outcome == "failed":
                self._notify("sync_failed", str(getattr(result, "error", None) or "the sync failed"), None)
            return
        if outcome in ("applied", "unchanged"):
            self.status(sha, "success", f"applied to cluster {self.cluster}" if self.cluster else
                        "applied to the cluster")
            self._drift(result, sha)
        elif outcome == "rejected":
            rejected = cast(SyncResult, result)  # a bare outcome word has no revision: it returned above
            why = _first_error(rejected.validated) or str(rejected.error or "rejected")
            self.status(sha, "failure", f"rejected: {why}")
            if sha not in self._rejected_told:
                self._rejected_told.add(sha)
                self._notify("rejected", why, sha)
        else:  # failed, stalled, and any outcome that did not apply the revision as it is
            error = str(getattr(result, "error", None) or _failed_objects(result) or outcome)
            self.status(sha, "error" if outcome == "stalled" else "failure", f"sync {outcome}: {error}")
            self._notify("sync_failed", error, sha)

    def status(self, sha: str, state: State, description: str) -> None:
        """Queue ``state`` for ``sha`` unless it is what was posted last for it; never blocks."""
        if self.forge is None or self._posted.get(sha) == state:
            return
        self._posted[sha] = state
        self._posted.move_to_end(sha)
        while len(self._posted) > _REMEMBERED:
            self._posted.popitem(last=False)
        try:
            self._queue.put_nowait((sha, state, description))
        except queue.Full:
            self.outcomes.labels("dropped").inc()
            _log.warning("commit status dropped: queue full", revision=sha, state=state)

    def close(self, timeout: float = 5.0) -> None:
        if self._thread is not None:
            with contextlib.suppress(queue.Full):
                self._queue.put(None, timeout=timeout)
            self._thread.join(timeout)
        if self.notifier is not None:
            self.notifier.close(timeout)

    # -- outputs -------------------------------------------------------------------------------------------

    def _run(self) -> None:
        assert self.forge is not None
        while True:
            item = self._queue.get()
            if item is None:
                return
            sha, state, description = item
            try:
                self.forge.set_status(sha, state, context=self.context, description=description,
                                      target_url=self.target_url)
            except Exception as err:  # a forge outage never reaches the sync; the reason is logged, not the token
                self.outcomes.labels("failed").inc()
                _log.warning("commit status not set", revision=sha, state=state, forge=self.forge.name,
                               error=str(getattr(err, "reason", err)))
            else:
                self.outcomes.labels("sent").inc()
                _log.info("commit status set", revision=sha, state=state, forge=self.forge.name)

    def _drift(self, result: SyncResult | str, sha: str) -> None:
        plan = getattr(result, "plan", None)
        drifted = tuple(getattr(plan, "drifted", ()) or ()) if plan is not None else ()
        now = self.clock()
        for key in drifted:
            if self.drift.observe(str(key), now):
                self._notify("drift_repeated", f"{key} was changed in the cluster and put back "
                             f"{self.drift.threshold} times within {int(self.drift.window)} s", sha,
                             {"object": str(key)})

    def _notify(self, kind: Kind, summary: str, sha: str | None, details: Mapping[str, str] | None = None) -> None:
        if self.notifier is None:
            return
        at = datetime.fromtimestamp(self.clock(), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        extra = {**(details or {}), "cluster": self.cluster} if self.cluster else (details or {})
        self.notifier.notify(Event(kind, summary, self.repository, sha, at, extra))


def _first_error(validated: Validated | None) -> str:
    for finding in validated.findings if validated is not None else ():
        if finding.get("severity") == "error":
            where = finding.get("path") or ""
            line = finding.get("line")
            place = f"{where}:{line}: " if where and line else (f"{where}: " if where else "")
            return f"{place}{finding.get('message', '')}"
    return ""


def _failed_objects(result: SyncResult | str) -> str:
    execution = getattr(result, "execution", None)
    failed = getattr(execution, "failed", ()) if execution is not None else ()
    return "; ".join(f"{f.key}: {f.reason}" for f in failed)
