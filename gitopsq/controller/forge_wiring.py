"""The controller's forge and notification parts from its flags (docs/controller.md "Forge and notifications"):
checked and with their secrets read at start, so a typo fails the start, not the first status."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry

from gitopsq.controller.cluster_names import status_context
from gitopsq.controller.forge_status import ForgeReporter
from gitopsq.errors import UsageError
from gitopsq.forge import open_forge
from gitopsq.forge.http import Backoff, Secret, load_token
from gitopsq.forge.notify import DriftRepeats, Notifier, Target

TOKEN_ENV = "GITOPSQ_FORGE_TOKEN"
FORGE_TIMEOUT = 10.0  # seconds per call; the worker thread retries with backoff, the sync never waits


def forge_reporter(flags: dict[str, Any], repository: str, registry: CollectorRegistry) -> ForgeReporter:
    """The ForgeReporter the flags ask for (one without a forge and notifier when none is configured)."""
    forge = None
    kind, slug = flags.get("forge"), flags.get("forge_repo")
    if kind:
        if not slug:
            raise UsageError("--forge needs --forge-repo OWNER/NAME")
        token = load_token(flags.get("forge_token_file"), TOKEN_ENV)
        forge = open_forge(kind, flags.get("forge_url"), slug, token, timeout=FORGE_TIMEOUT,
                           backoff=Backoff(attempts=3, base=1.0, cap=10.0))
    elif slug or flags.get("forge_url") or flags.get("forge_token_file"):
        raise UsageError("--forge-url, --forge-repo and --forge-token-file need --forge")
    targets: list[Target] = []
    secret = _secret(flags.get("notify_webhook_secret_file"), "--notify-webhook-secret-file")
    targets += [Target(url, "json", secret) for url in flags.get("notify_webhook") or ()]
    slack = _secret(flags.get("notify_slack_url_file"), "--notify-slack-url-file")
    if slack is not None:
        targets.append(Target(slack.reveal(), "slack"))
    notifier = Notifier(targets, registry=registry) if targets else None
    after = int(flags.get("drift_notify_after") or 3)
    if after < 1:
        raise UsageError("--drift-notify-after must be at least 1")
    cluster = str(flags.get("cluster") or "")
    return ForgeReporter(forge, notifier, repository=repository,
                         context=status_context(flags.get("status_context"), cluster),
                         target_url=flags.get("status_url"), drift=DriftRepeats(after), registry=registry,
                         cluster=cluster)


def _secret(path: str | None, flag: str) -> Secret | None:
    if not path:
        return None
    try:
        text = Path(path).read_text(encoding="utf-8").strip()
    except OSError as err:
        raise UsageError(f"{flag}: cannot read {path}: {err.strerror}") from err
    if not text:
        raise UsageError(f"{flag}: {path} is empty")
    return Secret(text)
