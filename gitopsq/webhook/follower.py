"""The repository policies the Job webhook judges by, followed on every replica (docs/controller.md)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import cast

from gitopsq import logs
from gitopsq.api.git_source import GitSource
from gitopsq.cluster.apply import KubeRest
from gitopsq.errors import GitopsqError
from gitopsq.intake.jobs import JobWebhook
from gitopsq.policy.language import Policy
from gitopsq.source.port import Source

_log = logs.get("webhook")


class PolicyFollower:
    """Keeps `JobWebhook` judging Jobs by the policies of the revision the GitSource says is applied: every
    ``interval`` it reads the GitSource status (``path``), and when ``lastAppliedRevision`` moved it fetches the
    branch (so the commit is in the mirror) and loads that commit's policies. Runs on every replica, so
    followers follow the leader's sync."""

    def __init__(self, rest: KubeRest, path: str, source: Source, branch: str, hook: JobWebhook, *,
                 load: Callable[[str], Iterable[Policy]]) -> None:
        self.rest, self.path, self.source, self.branch, self.hook, self.load = rest, path, source, branch, hook, load
        self.loaded: str | None = None

    def refresh(self) -> None:
        try:
            found = cast(GitSource, self.rest.request("GET", self.path, retry=False))
            applied = (found.get("status") or {}).get("lastAppliedRevision")
            if applied and applied != self.loaded:
                self.source.resolve(self.branch)
                policies = tuple(self.load(applied))
                self.hook.options = replace(self.hook.options, policies=policies)
                self.loaded = applied
                _log.info("job webhook policies", revision=applied, policies=[p.name for p in policies])
        except GitopsqError as err:
            _log.debug("job webhook policies not refreshed", error=str(err))

    def start(self, stop: threading.Event, interval: float) -> threading.Thread:
        def loop() -> None:
            self.refresh()
            while not stop.wait(interval):
                self.refresh()

        thread = threading.Thread(target=loop, name="gitopsq-job-policies", daemon=True)
        thread.start()
        return thread
