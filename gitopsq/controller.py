"""The long-running controller: leader election, a list of runnables that work only while leading, HTTP
endpoints (``/healthz``, ``/readyz``, Git webhooks), metrics, graceful shutdown.

Structure (docs/controller.md):
- `Controller` owns an optional `LeaderElector` and a list of `Runnable`s. When it becomes leader it starts every
  runnable in its own thread with a stop event scoped to that leadership; when leadership is lost or the process
  is asked to stop (SIGTERM/SIGINT) it sets that event, joins the threads, and releases the Lease.
- `SyncLoop` is the sync runnable: poll on an interval, or at once when triggered (webhook), back off
  exponentially while the remote or the API is unreachable (the last applied state stays untouched).
- The admission loop (gitopsq.cluster.admission_loop.AdmissionLoop) is another Runnable in the same list.
- Leadership hooks (`LeaderAudit`, the metrics' replica role) run before the runnables start and after they stop,
  so the audit trail has exactly one writer: the leader.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Protocol

from gitopsq import logs
from gitopsq.cluster.leader import LeaderElector
from gitopsq.errors import GitopsqError
from gitopsq.sync import Syncer, SyncOptions
from gitopsq.webhook_git import PATH as WEBHOOK_PATH
from gitopsq.webhook_git import GitWebhook


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
            self.stopping.wait()
            self._stop_runnables()
            return
        self.elector.run(self.stopping, self._on_leadership)
        self._stop_runnables()

    def stop(self) -> None:
        self.stopping.set()


class HttpEndpoints:
    """``/healthz`` (alive), ``/readyz`` (API reachable recently), and the Git webhook, on one address."""

    def __init__(self, address: str, *, ready: Callable[[], bool], webhook: GitWebhook | None) -> None:
        host, _, port = address.rpartition(":")
        endpoints = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:  # keep stdout for structured logs
                return

            def _answer(self, status: int, text: str) -> None:
                data = (text + "\n").encode()
                self.send_response(status)
                self.send_header("Content-Type", "text/plain; charset=utf-8")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                if self.path == "/healthz":
                    self._answer(200, "ok")
                elif self.path == "/readyz":
                    ok = endpoints.ready()
                    self._answer(200 if ok else 503, "ok" if ok else "not ready")
                else:
                    self._answer(404, "not found")

            def do_POST(self) -> None:
                if self.path != WEBHOOK_PATH or endpoints.webhook is None:
                    self._answer(404, "not found")
                    return
                length = int(self.headers.get("Content-Length") or 0)
                if length > (1 << 20):
                    self._answer(413, "body too large")
                    return
                body = self.rfile.read(length)
                answer = endpoints.webhook.handle({k.lower(): v for k, v in self.headers.items()}, body)
                self._answer(answer.status, answer.message)

        self.ready = ready
        self.webhook = webhook
        self.server = ThreadingHTTPServer((host or "0.0.0.0", int(port)), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self._thread = threading.Thread(target=self.server.serve_forever, name="gitopsq-http", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class LeaderAudit:
    """The audit trail as the loops see it: open only while this replica leads (one writer per audit branch).

    ``opener`` opens the real `AuditTrail` (WAL replay, branch fetch); while no trail is open every call raises
    AuditError, which the loops log as "audit record not written" and go on."""

    def __init__(self, opener: Callable[[], Any]) -> None:
        self._opener = opener
        self.trail: Any = None
        self._lock = threading.Lock()

    def lead(self) -> None:
        trail = self._opener()
        with self._lock:
            self.trail = trail
        _log().info("audit trail open")

    def follow(self) -> None:
        with self._lock:
            trail, self.trail = self.trail, None
        if trail is not None:
            trail.close()
            _log().info("audit trail closed")

    def _current(self) -> Any:
        with self._lock:
            trail = self.trail
        if trail is None:
            from gitopsq.errors import AuditError

            raise AuditError("the audit trail is open only while this replica leads")
        return trail

    def submit(self, record: Any) -> int:
        return int(self._current().submit(record))

    def wait_durable(self, ticket: int | None = None, timeout: float | None = None) -> None:
        self._current().wait_durable(ticket, timeout)

    def record(self, record: Any) -> None:
        self._current().record(record)

    def flush(self, timeout: float = 60.0) -> bool:
        return bool(self._current().flush(timeout))

    def status(self) -> Any:
        with self._lock:
            trail = self.trail
        return None if trail is None else trail.status()

    def close(self, timeout: float = 30.0) -> None:
        self.follow()


class RoleHook:
    """Sets the ``replica_role`` label of the Kueue metrics to ``leader`` / ``follower``."""

    def __init__(self, metrics: Any) -> None:
        self.metrics = metrics

    def lead(self) -> None:
        self.metrics.set_role("leader")

    def follow(self) -> None:
        self.metrics.set_role("follower")


class SyncAuditRecords:
    """The audit sink the `Syncer` writes to: ``sync.attempt`` records gain the commit (author, committer,
    signature), the approvals the history since the previous revision carries (merge commits, ``Reviewed-by`` /
    ``Approved-by`` trailers), the policy verdicts of the validated revision, and ``approvalRequired`` (a policy
    verdict that asks for an approval). The record id stays: it does not depend on these fields."""

    def __init__(self, sink: Any, source: Any) -> None:
        self.sink = sink
        self.source = source
        self.syncer: Any = None  # set once the Syncer exists (its last validation holds the verdicts)

    def record(self, record: Any) -> None:
        self.sink.record(self.enrich(record))

    def submit(self, record: Any) -> int:
        return int(self.sink.submit(self.enrich(record)))

    def wait_durable(self, ticket: int | None = None, timeout: float | None = None) -> None:
        self.sink.wait_durable(ticket, timeout)

    def enrich(self, record: Any) -> Any:
        from gitopsq.audit.approvals import approvals_from_commits, commit_info
        from gitopsq.audit.records import PolicyVerdict, Record
        from gitopsq.audit.redact import redact

        data = getattr(record, "data", record)
        if data.get("type") != "sync.attempt" or data.get("commit"):
            return record
        revision, previous = str(data["revision"]), data.get("previousRevision")
        extra: dict[str, Any] = {}
        try:
            extra["commit"] = commit_info(self.source.commit_info(revision)).to_json()
            commits = self.source.commits_between(previous if previous != revision else None, revision)
            extra["approvals"] = [a.to_json() for a in approvals_from_commits(commits)]
        except (GitopsqError, ValueError, KeyError) as err:
            _log().warning("commit facts not added to the audit record", revision=revision, error=str(err))
        validated = getattr(self.syncer, "_validated", None)
        findings = validated[1].findings if validated is not None and validated[0] == revision else ()
        verdicts = [PolicyVerdict(str(f["policy"]), str(f.get("object") or ""), str(f.get("severity", "")),
                                  False, str(f.get("message", ""))) for f in findings if f.get("policy")]
        extra["verdicts"] = [v.to_json() for v in verdicts]
        extra["approvalRequired"] = any("approv" in f"{v.policy} {v.message}".lower() for v in verdicts)
        return Record({**data, **redact(extra)})


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
