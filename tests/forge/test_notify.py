"""Notifications: delivered to JSON and Slack-compatible receivers on loopback, retried, and never blocking or
raising into the caller (slow receiver, 500 then 200, nobody listening, full queue)."""

from __future__ import annotations

import hashlib
import hmac
import socket
import time

from gitopsq.forge.http import Backoff, Secret
from gitopsq.forge.notify import DriftRepeats, Event, Notifier, Target, payload

from .recorder import Recorder

EVENT = Event(kind="rejected", summary="team-a: nominalQuota 64 exceeds the cohort's 48", repository="acme/quotas",
              revision="0123456789abcdef0123", at="2026-11-26T05:00:00Z", details={"finding": "quota.cohort"})


def _notifier(*targets: Target, queue_size: int = 100, timeout: float = 2.0) -> Notifier:
    return Notifier(targets, queue_size=queue_size, timeout=timeout, backoff=Backoff(attempts=3, base=0.05, cap=0.2))


def _count(n: Notifier, fmt: str, outcome: str) -> float:
    return n.registry.get_sample_value("gitopsq_notifications_total", {"format": fmt, "outcome": outcome}) or 0.0


def test_json_and_slack_bodies_reach_their_receivers(recorder: Recorder) -> None:
    """One event goes to both targets: gitopsq's JSON document to one, Slack's {"text"} to the other."""
    recorder.route("POST", "/hook", (200, {}))
    recorder.route("POST", "/slack", (200, b"ok"))
    n = _notifier(Target(f"{recorder.url}/hook"), Target(f"{recorder.url}/slack", "slack"))
    assert n.notify(EVENT)
    n.close(5)
    bodies = {r.path: r.json() for r in recorder.requests}
    assert bodies["/hook"] == payload("json", EVENT)
    assert bodies["/hook"]["kind"] == "rejected" and bodies["/hook"]["details"] == {"finding": "quota.cohort"}
    assert bodies["/slack"] == {"text": "gitopsq: revision rejected in acme/quotas at 0123456789ab: "
                                        "team-a: nominalQuota 64 exceeds the cohort's 48"}
    assert _count(n, "json", "sent") == 1 and _count(n, "slack", "sent") == 1


def test_500_then_200_is_delivered_once_retried(recorder: Recorder) -> None:
    """A receiver that fails once gets the same body again and the notification counts as sent."""
    recorder.script("POST", "/hook", (500, {}), (200, {}))
    n = _notifier(Target(f"{recorder.url}/hook"))
    n.notify(EVENT)
    n.close(5)
    assert len(recorder.requests) == 2 and recorder.requests[0].body == recorder.requests[1].body
    assert _count(n, "json", "sent") == 1 and _count(n, "json", "failed") == 0


def test_slow_receiver_never_blocks_the_caller(recorder: Recorder) -> None:
    """notify returns at once while the receiver takes a second per request; the events still arrive."""
    recorder.route("POST", "/hook", (200, {}))
    recorder.delay = 1.0
    n = _notifier(Target(f"{recorder.url}/hook"), timeout=5.0)
    began = time.monotonic()
    assert all(n.notify(EVENT) for _ in range(3))
    assert time.monotonic() - began < 0.2
    n.close(10)
    assert len(recorder.requests) == 3 and _count(n, "json", "sent") == 3


def test_unreachable_receiver_is_counted_not_raised() -> None:
    """Nobody listens on the port: the caller sees nothing, the worker counts a failure after its retries."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    n = _notifier(Target(f"http://127.0.0.1:{port}/hook", secret=Secret("s")))
    assert n.notify(EVENT)
    n.close(5)
    assert _count(n, "json", "failed") == 1 and _count(n, "json", "sent") == 0


def test_full_queue_drops_and_counts(recorder: Recorder) -> None:
    """With a queue of one and a slow receiver, extra events are dropped (False, counted) without waiting."""
    recorder.route("POST", "/hook", (200, {}))
    recorder.delay = 0.5
    n = _notifier(Target(f"{recorder.url}/hook"), queue_size=1)
    began = time.monotonic()
    accepted = [n.notify(EVENT) for _ in range(6)]
    assert time.monotonic() - began < 0.2
    assert accepted.count(False) >= 4
    assert _count(n, "json", "dropped") == accepted.count(False)
    n.close(5)


def test_json_body_is_signed_with_the_target_secret(recorder: Recorder) -> None:
    """A JSON target with a secret gets X-Gitopsq-Signature: sha256=HMAC(secret, raw body)."""
    recorder.route("POST", "/hook", (204, b""))
    n = _notifier(Target(f"{recorder.url}/hook", secret=Secret("hook-secret")))
    n.notify(EVENT)
    n.close(5)
    req = recorder.requests[0]
    expected = hmac.new(b"hook-secret", req.body, hashlib.sha256).hexdigest()
    assert req.headers["x-gitopsq-signature"] == f"sha256={expected}"


def test_drift_is_repeated_at_the_threshold_within_the_window() -> None:
    """Three corrections of one object within the hour are "repeated" once; old ones age out of the window."""
    d = DriftRepeats(threshold=3, window=3600)
    assert [d.observe("cq/a", t) for t in (0, 10, 20)] == [False, False, True]
    assert [d.observe("cq/a", t) for t in (30, 40)] == [False, False]
    assert [d.observe("cq/b", t) for t in (0, 4000, 8000)] == [False, False, False]
