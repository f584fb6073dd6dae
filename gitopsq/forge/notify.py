"""Notifications to people: sync failures, rejected revisions and repeated drift, posted to generic JSON webhooks
and Slack-compatible endpoints (docs/notifications.md).

The caller never waits and never sees an exception: `Notifier.notify` only puts the event on a bounded queue; one
background thread posts it to every target with retries and backoff. A full queue drops the event (counted in
``gitopsq_notifications_total{outcome="dropped"}`` and logged); a target that stays down is logged and counted
as ``failed``.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import queue
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from prometheus_client import CollectorRegistry, Counter

from gitopsq import logs
from gitopsq.forge.http import Backoff, ForgeError, Http, Secret

Kind = Literal["sync_failed", "rejected", "drift_repeated"]
KINDS: Final[tuple[Kind, ...]] = ("sync_failed", "rejected", "drift_repeated")
Format = Literal["json", "slack"]
_TITLES: Final[dict[str, str]] = {"sync_failed": "sync failed", "rejected": "revision rejected",
                                  "drift_repeated": "drift keeps coming back"}

log = logs.get("notify")


@dataclass(frozen=True, slots=True)
class Event:
    """Something people should hear about; ``at`` is an ISO-8601 UTC time the caller passes in."""

    kind: Kind
    summary: str
    repository: str
    revision: str | None
    at: str
    details: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Target:
    """Where to post: a URL, its payload format, and an optional HMAC secret (JSON webhooks only) that signs the
    body in ``X-Gitopsq-Signature: sha256=<hex>``."""

    url: str
    format: Format = "json"
    secret: Secret | None = None


def payload(fmt: Format, event: Event) -> dict[str, Any]:
    """The body posted for ``event``: gitopsq's JSON document, or Slack's ``{"text": ...}``."""
    if fmt == "slack":
        rev = f" at {event.revision[:12]}" if event.revision else ""
        return {"text": f"gitopsq: {_TITLES[event.kind]} in {event.repository}{rev}: {event.summary}"}
    return {"kind": event.kind, "summary": event.summary, "repository": event.repository,
            "revision": event.revision, "at": event.at, "details": dict(event.details)}


class Notifier:
    """A bounded queue and one daemon thread that posts each event to every target.

    ``close`` stops the thread after the queue drains (or ``timeout`` passes); events left are dropped.
    """

    def __init__(self, targets: Sequence[Target], *, queue_size: int = 100, timeout: float = 5.0,
                 backoff: Backoff | None = None, registry: CollectorRegistry | None = None,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self.targets = tuple(targets)
        self._queue: queue.Queue[Event | None] = queue.Queue(maxsize=queue_size)
        self._timeout = timeout
        self._backoff = backoff or Backoff(attempts=4, base=1.0, cap=30.0)
        self._sleep = sleep
        self.registry = registry or CollectorRegistry()
        self.outcomes = Counter("gitopsq_notifications_total", "Notifications by target format and outcome",
                                ["format", "outcome"], registry=self.registry)
        self._thread = threading.Thread(target=self._run, name="gitopsq-notify", daemon=True)
        self._thread.start()

    def notify(self, event: Event) -> bool:
        """Queue ``event`` for every target; False (and a ``dropped`` count) when the queue is full. Never blocks."""
        if not self.targets:
            return True
        try:
            self._queue.put_nowait(event)
        except queue.Full:
            for t in self.targets:
                self.outcomes.labels(t.format, "dropped").inc()
            log.warning("notification dropped: queue full", kind=event.kind, repository=event.repository)
            return False
        return True

    def close(self, timeout: float = 5.0) -> None:
        """Let the worker finish what is queued, up to ``timeout`` seconds, then stop it."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                self._queue.put(None, timeout=max(0.01, deadline - time.monotonic()))
                break
            except queue.Full:
                continue
        self._thread.join(max(0.0, deadline - time.monotonic()))

    def _run(self) -> None:
        while True:
            event = self._queue.get()
            if event is None:
                return
            for target in self.targets:
                self._post(target, event)

    def _post(self, target: Target, event: Event) -> None:
        body = json.dumps(payload(target.format, event)).encode()
        extra = {}
        if target.secret is not None and target.format == "json":
            mac = hmac.new(target.secret.reveal().encode(), body, hashlib.sha256).hexdigest()
            extra["X-Gitopsq-Signature"] = f"sha256={mac}"
        http = Http("notify", target.url, timeout=self._timeout, backoff=self._backoff, sleep=self._sleep)
        try:
            http.request("POST", "", body, decode=False, extra=extra)
        except ForgeError as err:
            self.outcomes.labels(target.format, "failed").inc()
            log.warning("notification failed", kind=event.kind, target=_display(target.url), reason=err.reason)
        except Exception as err:  # a notification must never take the worker (or the caller) down
            self.outcomes.labels(target.format, "failed").inc()
            log.warning("notification failed", kind=event.kind, target=_display(target.url), reason=repr(err))
        else:
            self.outcomes.labels(target.format, "sent").inc()


def _display(url: str) -> str:
    """The URL without its path and query: Slack's incoming-webhook URLs carry their secret in the path."""
    scheme, _, rest = url.partition("://")
    return f"{scheme}://{rest.split('/', 1)[0]}/…"


class DriftRepeats:
    """Says when drift on one object is "repeated": ``threshold`` corrections within ``window`` seconds.

    Pure apart from its memory; the caller passes the time. True once per crossing, then counting starts again.
    """

    def __init__(self, threshold: int = 3, window: float = 3600.0) -> None:
        self.threshold = threshold
        self.window = window
        self._seen: dict[str, deque[float]] = {}

    def observe(self, key: str, now: float) -> bool:
        times = self._seen.setdefault(key, deque())
        times.append(now)
        while times and times[0] <= now - self.window:
            times.popleft()
        if len(times) >= self.threshold:
            times.clear()
            return True
        return False
