"""Git webhook authentication and the controller's duration flags (no cluster needed)."""

from __future__ import annotations

import json

import pytest

from gitopsq.controller.manager import parse_duration
from gitopsq.webhook.push import GitWebhook, sign

SECRET = b"s3cret"
PUSH_MAIN = json.dumps({"ref": "refs/heads/main"}).encode()


def hook(secret: bytes | None = SECRET, branch: str | None = "main") -> tuple[GitWebhook, list[str]]:
    calls: list[str] = []
    return GitWebhook(secret, calls.append, branch=branch), calls


@pytest.mark.parametrize(("headers", "body", "status", "triggered"), [
    pytest.param({"x-hub-signature-256": sign(SECRET, PUSH_MAIN), "x-github-event": "push"}, PUSH_MAIN, 202, True,
                 id="github-good-signature"),
    pytest.param({"x-hub-signature-256": sign(b"wrong", PUSH_MAIN)}, PUSH_MAIN, 401, False, id="github-bad-signature"),
    pytest.param({"x-hub-signature-256": sign(SECRET, PUSH_MAIN)}, PUSH_MAIN + b" ", 401, False,
                 id="body-changed-after-signing"),
    pytest.param({}, PUSH_MAIN, 401, False, id="unsigned"),
    pytest.param({"x-gitlab-token": "s3cret", "x-gitlab-event": "Push Hook"}, PUSH_MAIN, 202, True, id="gitlab-token"),
    pytest.param({"x-gitlab-token": "nope"}, PUSH_MAIN, 401, False, id="gitlab-wrong-token"),
    pytest.param({"x-hub-signature-256": sign(SECRET, b'{"ref": "refs/heads/dev"}')}, b'{"ref": "refs/heads/dev"}',
                 200, False, id="push-to-another-branch-ignored"),
    pytest.param({"x-hub-signature-256": sign(SECRET, b"{}"), "x-github-event": "ping"}, b"{}", 200, False,
                 id="ping"),
    pytest.param({"x-hub-signature-256": sign(SECRET, b"not json")}, b"not json", 400, False, id="not-json"),
])
def test_webhook_deliveries(headers: dict[str, str], body: bytes, status: int, triggered: bool) -> None:
    """Only correctly signed pushes to the tracked branch trigger a sync; everything else is answered and ignored."""
    webhook, calls = hook()
    answer = webhook.handle(headers, body)
    assert answer.status == status
    assert bool(calls) is triggered


def test_webhook_without_secret_refuses_everything() -> None:
    """With no secret configured even a 'valid' delivery is refused: the endpoint is never open."""
    webhook, calls = hook(secret=None)
    assert webhook.handle({"x-hub-signature-256": sign(b"", PUSH_MAIN)}, PUSH_MAIN).status == 403
    assert calls == []


def test_oversized_body_is_refused() -> None:
    """Bodies over 1 MiB are refused before any HMAC work."""
    webhook, calls = hook()
    big = b"x" * ((1 << 20) + 1)
    assert webhook.handle({"x-hub-signature-256": sign(SECRET, big)}, big).status == 413 and calls == []


@pytest.mark.parametrize(("text", "seconds"), [("30s", 30.0), ("1m30s", 90.0), ("500ms", 0.5), ("2h", 7200.0),
                                               ("1.5s", 1.5)], ids=str)
def test_parse_duration(text: str, seconds: float) -> None:
    """Go-style durations used by --interval and the lease flags."""
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "30", "s", "1d", "30s junk", "-1s"], ids=repr)
def test_parse_duration_rejects(text: str) -> None:
    """Anything that is not a Go duration is a ValueError (the CLI turns it into a usage error)."""
    with pytest.raises(ValueError, match="duration"):
        parse_duration(text)
