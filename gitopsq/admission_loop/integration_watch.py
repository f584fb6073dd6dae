"""Which of the enabled integrations the API server serves, re-checked while the loop runs.

A built-in kind (batch/v1 Job) is watched from the start. A kind from a CustomResourceDefinition (JobSet, ...)
is watched only once API discovery (``GET /apis/<group>/<version>``) lists its resource: until then it is
reported — one warning per state change, the gauge ``gitopsq_integration_active{framework}`` at 0 — and
skipped, and the loop runs the other kinds meanwhile; an informer for a kind that is not served would retry
for ever and the cache would never sync. `refresh` runs at every pass and looks again every ``every``
seconds; when the CRD appears the kind's informer is added to the running cache and its jobs are reconciled
from the first pass after its LIST lands.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Protocol

from gitopsq import logs
from gitopsq.admission_loop.integrations import Integration
from gitopsq.admission_loop.integrations.base import related_kinds
from gitopsq.api.raw_objects import JsonObject, children
from gitopsq.cluster.kinds import Kind
from gitopsq.errors import ClusterError

_log = logs.get("integrations")


class Requests(Protocol):
    def request(self, method: str, path: str, *, query: Sequence[tuple[str, str]] = (), body: object = None,
                content_type: str = "application/json", obj: str | None = None) -> JsonObject: ...


class Watching(Protocol):
    def add(self, kind: Kind) -> bool: ...

    def synced(self, name: str) -> bool: ...


class IntegrationWatch:
    """Adds each enabled integration's informer once its kind is served; `ready` are those whose cache synced."""

    def __init__(self, client: Requests, cache: Watching, integrations: Sequence[Integration], *,
                 every: float = 10.0, clock: Callable[[], float] = time.monotonic,
                 report: Callable[[str, bool], None] | None = None) -> None:
        self.client, self.cache, self.integrations = client, cache, tuple(integrations)
        self.every, self.clock, self.report = every, clock, report
        self.active: set[str] = set()
        self.absent: dict[str, str] = {}  # framework -> why it is skipped
        self._checked = float("-inf")

    def refresh(self, *, force: bool = False) -> None:
        """Look for the kinds not yet watched (every ``every`` seconds, or now when ``force``)."""
        now = self.clock()
        if len(self.active) == len(self.integrations) or (not force and now - self._checked < self.every):
            return
        self._checked = now
        for integration in self.integrations:
            if integration.framework in self.active:
                continue
            why = self._why_not_served(integration)
            if why is None:
                for related in related_kinds(integration):  # before the kind: its jobs are read with them
                    self.cache.add(related)
                self.cache.add(integration.kind_info)
                self.active.add(integration.framework)
                if self.absent.pop(integration.framework, None) is not None:
                    _log.info("integration picked up", framework=integration.framework)
                self._report(integration.framework, True)
            elif self.absent.get(integration.framework) != why:
                self.absent[integration.framework] = why
                _log.warning("integration skipped", framework=integration.framework, reason=why)
                self._report(integration.framework, False)

    def _report(self, framework: str, active: bool) -> None:
        if self.report is not None:
            self.report(framework, active)

    def _why_not_served(self, integration: Integration) -> str | None:
        if integration.crd is None:
            return None
        wanted = [(integration.group, integration.version, integration.resource)]
        wanted += [(k.group, k.version, k.plural) for k in related_kinds(integration)]  # its runtimes, JobSets
        answers: dict[str, set[str] | str] = {}
        for group, version, resource in wanted:
            path = f"/apis/{group}/{version}"
            if path not in answers:
                answers[path] = self._served(path, f"{group}/{version}")
            served = answers[path]
            if isinstance(served, str):
                return served or f"CustomResourceDefinition {resource}.{group} is not installed"
            if resource not in served:
                return f"CustomResourceDefinition {resource}.{group} is not installed"
        return None

    def _served(self, path: str, group_version: str) -> set[str] | str:
        """The resources discovery lists at ``path``, or why it could not say ("" when nothing serves it)."""
        try:
            answer = self.client.request("GET", path, obj=f"discovery {group_version}")
        except ClusterError as err:
            if err.status == 404:
                return ""
            return f"discovery of {path} failed: {err}"
        return {str(r.get("name")) for r in children(answer, "resources")}

    def ready(self) -> tuple[Integration, ...]:
        """The active integrations whose objects are in the cache (their informer's first LIST landed)."""
        return tuple(i for i in self.integrations if i.framework in self.active and self.cache.synced(i.resource)
                     and all(self.cache.synced(k.plural) for k in related_kinds(i)))
