"""Git push webhooks: an HTTP endpoint that makes the controller sync now instead of at its next poll.

``POST /hooks/git`` accepts GitHub-style deliveries signed with ``X-Hub-Signature-256: sha256=<hex HMAC-SHA256 of
the body under the shared secret>`` and GitLab-style deliveries carrying the secret in ``X-Gitlab-Token``. The
comparison is constant-time. Without a configured secret every delivery is refused: the endpoint is never
open. A delivery only triggers a sync (a fetch of the tracked branch); its body is never trusted for content.
An authenticated delivery whose id (``X-GitHub-Delivery``, ``X-Gitea-Delivery``, ``X-Gitlab-Event-UUID``) was
already acted on within the last hour is answered 200 and triggers nothing (gitopsq.webhook.deliveries).

Answers: 202 accepted (sync triggered), 200 ignored (a push to another branch, a ping, a repeated delivery), 401
bad or missing signature, 403 no secret configured, 413 body over 1 MiB, 400 unreadable body.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from gitopsq.errors import UsageError
from gitopsq.webhook.deliveries import RecentDeliveries, delivery_id

MAX_BODY: Final = 1 << 20
PATH: Final = "/hooks/git"


def read_secret(path: str) -> bytes:
    """The webhook secret from a file (trailing newline stripped); UsageError when missing or empty."""
    try:
        secret = Path(path).read_bytes().strip()
    except OSError as err:
        raise UsageError(f"cannot read webhook secret file {path}: {err.strerror}") from err
    if not secret:
        raise UsageError(f"webhook secret file {path} is empty")
    return secret


def sign(secret: bytes, body: bytes) -> str:
    """The ``X-Hub-Signature-256`` value for ``body`` (what GitHub sends; also handy in tests and scripts)."""
    return "sha256=" + hmac.new(secret, body, hashlib.sha256).hexdigest()


@dataclass(frozen=True, slots=True)
class WebhookAnswer:
    status: int
    message: str


class GitWebhook:
    """Authenticates deliveries and calls ``trigger`` for pushes to ``branch`` (or to any branch if None)."""

    def __init__(self, secret: bytes | None, trigger: Callable[[str], None], *, branch: str | None = None,
                 deliveries: RecentDeliveries | None = None, clock: Callable[[], float] = time.monotonic) -> None:
        self._secret = secret
        self._trigger = trigger
        self._branch = branch
        self._deliveries = deliveries or RecentDeliveries()
        self._clock = clock
        self._lock = threading.Lock()
        self.accepted = 0
        self.refused = 0
        self.repeated = 0

    def authenticate(self, headers: Mapping[str, str], body: bytes) -> bool:
        if self._secret is None:
            return False
        signature = headers.get("x-hub-signature-256")
        if signature is not None:
            return hmac.compare_digest(signature.strip().encode(), sign(self._secret, body).encode())
        token = headers.get("x-gitlab-token")
        if token is not None:
            return hmac.compare_digest(token.strip().encode(), self._secret)
        return False

    def handle(self, headers: Mapping[str, str], body: bytes) -> WebhookAnswer:
        """Decide one delivery. ``headers`` keys must be lower-case."""
        if self._secret is None:
            self.refused += 1
            return WebhookAnswer(403, "webhooks are disabled: no secret configured (--webhook-secret-file)")
        if len(body) > MAX_BODY:
            self.refused += 1
            return WebhookAnswer(413, "body too large")
        if not self.authenticate(headers, body):
            self.refused += 1
            return WebhookAnswer(401, "signature does not match")
        # Only after authentication: an unauthenticated sender must not be able to spend ids in advance.
        delivery = delivery_id(headers)
        with self._lock:  # several server threads decide deliveries: two copies of one must not both act
            now = self._clock()
            if delivery and self._deliveries.seen(delivery, now):
                self.repeated += 1
                return WebhookAnswer(200, "ignored: delivery already received")
            answer = self._act(headers, body)
            if delivery and answer.status < 300:
                self._deliveries.record(delivery, now)
            return answer

    def _act(self, headers: Mapping[str, str], body: bytes) -> WebhookAnswer:
        event = headers.get("x-github-event") or headers.get("x-gitlab-event") or "push"
        if event.lower() == "ping":
            return WebhookAnswer(200, "pong")
        try:
            payload = json.loads(body) if body.strip() else {}
        except ValueError:
            return WebhookAnswer(400, "body is not JSON")
        ref = payload.get("ref") if isinstance(payload, dict) else None
        if self._branch and isinstance(ref, str) and ref.startswith("refs/heads/") \
                and ref.removeprefix("refs/heads/") != self._branch:
            return WebhookAnswer(200, f"ignored: push to {ref}, tracking {self._branch}")
        self.accepted += 1
        self._trigger(f"webhook {event} {ref or ''}".strip())
        return WebhookAnswer(202, "sync triggered")
