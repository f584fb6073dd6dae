"""Sync status: the GitSource object (``gitsources.gitopsq.dev``) of a synced source, and its Events.

One GitSource per synced source holds Flux/kstatus-style status:
- conditions ``Ready``, ``Reconciling``, ``Stalled`` (kstatus: ``Reconciling`` and ``Stalled`` are present only
  while true; ``observedGeneration`` advances only when the result is final, Ready or Stalled);
- ``lastAttemptedRevision``, ``lastAppliedRevision``, ``lastRejection`` (revision, time, findings);
- ``inventory`` (gitopsq.reconcile.inventory), from which the next sync prunes;
- ``health``: how many of the applied queues were checked and found healthy, and the ones that were not;
- while ``spec.suspend`` is true, a ``Suspended`` condition (the others keep their last value);
- ``audit``: the chain head the audit writer last pushed (``write_audit``, from the controller's audit sampler).
The status is written with a JSON merge patch of the fields that changed on the status subresource, and only
when something changed, so a no-change reconcile writes nothing.
Events (core/v1) name the GitSource: ``Synced``, ``DriftCorrected``, ``Rejected``, ``DryRunFailed``,
``SyncFailed``, ``RolledBack``, ``HealthCheckFailed``, ``Suspended``, ``ConflictDetected``, ``SourceUnavailable``,
``AuditBranchRewound``.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Final, Literal, cast

from gitopsq.api.git_source import GitSource, GitSourceSpec, GitSourceStatus, InventoryField, Rejection
from gitopsq.api.raw_objects import Condition, JsonValue, KubeObject
from gitopsq.cluster.apply import APPLY_CONTENT_TYPE, KubeRest
from gitopsq.cluster.edge_objects import Event, EventList
from gitopsq.cluster.kinds import GIT_SOURCE
from gitopsq.cluster.kube import ClusterNotFound
from gitopsq.errors import ClusterError
from gitopsq.reconcile.normalize import FIELD_MANAGER

CLUSTER_LABEL: Final = "gitopsq.dev/cluster"  # on the GitSource and Events of a per-cluster controller
GROUP: Final = "gitopsq.dev"
VERSION: Final = "v1alpha1"
API_VERSION: Final = f"{GROUP}/{VERSION}"
DEFAULT_NAMESPACE: Final = "gitopsq-system"
Outcome = Literal["applied", "unchanged", "rejected", "refused", "failed", "rolled-back", "unhealthy",
                  "progressing", "source-unavailable"]
# outcome -> (Ready status, reason, Reconciling?, Stalled?)
_CONDITIONS: Final[Mapping[str, tuple[str, str, bool, bool]]] = {
    "applied": ("True", "ReconciliationSucceeded", False, False),
    "unchanged": ("True", "ReconciliationSucceeded", False, False),
    "rejected": ("False", "ValidationFailed", False, True),
    "refused": ("False", "DryRunFailed", False, True),
    "rolled-back": ("False", "RolledBack", True, False),
    "unhealthy": ("False", "HealthCheckFailed", False, True),
    "failed": ("False", "ReconciliationFailed", True, False),
    "progressing": ("Unknown", "Progressing", True, False),
    "source-unavailable": ("False", "SourceUnavailable", True, False),
}


@dataclass(frozen=True, slots=True)
class SourceRef:
    namespace: str
    name: str

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True, slots=True)
class SourceState:
    """The GitSource as read: ``exists`` False when there is none yet (a first sync)."""

    exists: bool
    generation: int = 0
    uid: str = ""
    status: GitSourceStatus | None = None
    spec: GitSourceSpec | None = None
    labels: Mapping[str, str] | None = None

    @property
    def suspended(self) -> bool:
        return bool((self.spec or {}).get("suspend"))

    @property
    def interval(self) -> float | None:
        """``spec.interval`` in seconds, None when unset (the controller's ``--poll-interval`` applies)."""
        text = (self.spec or {}).get("interval")
        return parse_interval(str(text)) if text else None

    @property
    def paths(self) -> tuple[str, ...]:
        return tuple(str(p) for p in (self.spec or {}).get("paths") or ())

    @property
    def last_applied(self) -> str | None:
        return (self.status or {}).get("lastAppliedRevision")

    @property
    def last_rejected(self) -> str | None:
        return ((self.status or {}).get("lastRejection") or {}).get("revision")


_INTERVAL_PART: Final = re.compile(r"([0-9]+(?:\.[0-9]+)?)(ms|s|m|h)")
_UNIT: Final = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_interval(text: str) -> float | None:
    """``1m30s`` -> 90.0, as the CRD's pattern allows; None for text it would refuse or for zero."""
    parts = _INTERVAL_PART.findall(text)
    if not parts or "".join(n + u for n, u in parts) != text:
        return None
    seconds = sum(float(n) * _UNIT[u] for n, u in parts)
    return seconds or None


def suspended_status(previous: GitSourceStatus | None, *, now: datetime, message: str) -> GitSourceStatus:
    """The status while ``spec.suspend`` is true: the other conditions as they were, plus ``Suspended=True``."""
    prev = cast(GitSourceStatus, dict(previous or {}))
    kept = [c for c in prev.get("conditions") or [] if c.get("type") != "Suspended"]
    before: Condition = next((c for c in prev.get("conditions") or [] if c.get("type") == "Suspended"),
                            Condition())
    cond: Condition = {"type": "Suspended", "status": "True", "reason": "Suspended", "message": message[:32000],
                       "lastTransitionTime": before.get("lastTransitionTime") or _time(now)}
    out: GitSourceStatus = {**prev, "conditions": [*kept, cond]}
    return out


def _time(now: datetime) -> str:
    return now.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def build_status(previous: GitSourceStatus | None, *, outcome: Outcome, now: datetime, generation: int,
                 message: str, reason: str | None = None, attempted: str | None = None,
                 applied: str | None = None, rejection: Rejection | None = None,
                 inventory: InventoryField | None = None) -> GitSourceStatus:
    """The next status from the previous one and an outcome. Fields not given keep their previous value;
    a condition keeps its lastTransitionTime while its status does not change."""
    prev = cast(GitSourceStatus, dict(previous or {}))
    ready, default_reason, reconciling, stalled = _CONDITIONS[outcome]
    old = {c.get("type"): c for c in prev.get("conditions") or []}
    final = outcome in ("applied", "unchanged", "rejected", "refused", "unhealthy")

    def condition(kind: str, status: str, why: str) -> Condition:
        before: Condition = old.get(kind) or {}
        since = before.get("lastTransitionTime") if before.get("status") == status else None
        cond: Condition = {"type": kind, "status": status, "reason": why, "message": message[:32000],
                           "lastTransitionTime": since or _time(now)}
        if final:
            cond["observedGeneration"] = generation
        elif "observedGeneration" in before:
            cond["observedGeneration"] = before["observedGeneration"]
        return cond

    why = reason or default_reason
    conditions = [condition("Ready", ready, why)]
    if reconciling:
        conditions.append(condition("Reconciling", "True", "ProgressingWithRetry" if outcome != "progressing"
                                    else "Progressing"))
    if stalled:
        conditions.append(condition("Stalled", "True", why))
    out = prev  # a copy of the previous status
    out.pop("conditions", None)
    out["conditions"] = conditions
    if final:
        out["observedGeneration"] = generation
    if attempted is not None:
        out["lastAttemptedRevision"] = attempted
    if applied is not None:
        out["lastAppliedRevision"] = applied
    if rejection is not None:
        out["lastRejection"] = rejection
    if inventory is not None:
        out["inventory"] = inventory
    return out


def _comparable(status: GitSourceStatus | None) -> dict[str, object] | None:
    """A status without transition times, to decide whether a write is needed."""
    if not status:
        return None
    conds = [{k: v for k, v in c.items() if k != "lastTransitionTime"} for c in status.get("conditions") or []]
    return {**status, "conditions": conds}


class StatusStore:
    """Reads and writes one GitSource and records Events about it."""

    def __init__(self, rest: KubeRest, ref: SourceRef, *, clock: Callable[[], datetime] | None = None,
                 cluster: str = "") -> None:
        self.rest = rest
        self.ref = ref
        self.cluster = cluster  # a per-cluster controller's name (docs/fleet.md): labels the GitSource and Events
        self._labels = {CLUSTER_LABEL: cluster} if cluster else {}
        self.clock = clock or (lambda: datetime.now(UTC))
        self._path = GIT_SOURCE.object_path(ref.name, ref.namespace, version=VERSION)
        self.writes = 0

    def read(self) -> SourceState:
        try:
            obj = cast(GitSource, self.rest.request("GET", self._path, obj=f"GitSource/{self.ref}"))
        except ClusterNotFound:
            return SourceState(exists=False)
        meta = obj.get("metadata") or {}
        return SourceState(True, int(meta.get("generation") or 0), str(meta.get("uid") or ""), obj.get("status"),
                           obj.get("spec"), meta.get("labels") or {})

    def labelled(self, state: SourceState) -> bool:
        """Whether the GitSource carries this controller's cluster label (always true for no cluster)."""
        return all((state.labels or {}).get(k) == v for k, v in self._labels.items())

    def ensure(self, *, url: str, ref: str, prune: bool) -> SourceState:
        """Create (or re-apply) the GitSource spec, creating its namespace when missing."""
        ns_body: KubeObject = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": self.ref.namespace}}
        self.rest.request("PATCH", f"/api/v1/namespaces/{self.ref.namespace}", body=ns_body,
                          query=[("fieldManager", FIELD_MANAGER)], content_type=APPLY_CONTENT_TYPE,
                          obj=f"Namespace/{self.ref.namespace}")
        body: GitSource = {"apiVersion": API_VERSION, "kind": "GitSource",
                "metadata": {"name": self.ref.name, "namespace": self.ref.namespace,
                             "labels": {"app.kubernetes.io/managed-by": "gitopsq", **self._labels}},
                "spec": {"url": url, "ref": ref, "prune": prune}}
        self.rest.request("PATCH", self._path, body=body, content_type=APPLY_CONTENT_TYPE,
                          query=[("fieldManager", FIELD_MANAGER), ("force", "true")], obj=f"GitSource/{self.ref}")
        return self.read()

    def write(self, state: SourceState, status: GitSourceStatus) -> bool:
        """Write ``status`` unless it equals the current one (times aside); True when written.

        A JSON merge patch of the top-level fields that changed: the inventory (thousands of entries) is sent
        only when it changed, so a one-object sync stays small.
        """
        if _comparable(state.status) == _comparable(status):
            return False
        before = state.status or {}
        patch = {k: v for k, v in status.items() if before.get(k) != v}
        patch.update({k: None for k in before if k not in status})
        self.rest.request("PATCH", f"{self._path}/status", body={"status": patch},
                          content_type="application/merge-patch+json", obj=f"GitSource/{self.ref}/status")
        self.writes += 1
        return True

    def event(self, state: SourceState, reason: str, message: str, *, warning: bool = False) -> None:
        """A core/v1 Event on the GitSource; failing to record one never fails a sync."""
        now = self.clock()
        stamp = f"{now.timestamp():.6f}".replace(".", "")
        body: Event = {
            "apiVersion": "v1", "kind": "Event",
            "metadata": {"name": f"{self.ref.name}.{int(stamp):x}", "namespace": self.ref.namespace,
                         "labels": dict(self._labels)},
            "involvedObject": {"apiVersion": API_VERSION, "kind": "GitSource", "name": self.ref.name,
                               "namespace": self.ref.namespace, "uid": state.uid},
            "reason": reason, "message": message[:1024], "type": "Warning" if warning else "Normal",
            "source": {"component": "gitopsq"}, "reportingComponent": "gitopsq",
            "reportingInstance": f"gitopsq/{self.cluster}" if self.cluster else "gitopsq",
            "firstTimestamp": _time(now), "lastTimestamp": _time(now), "count": 1,
        }
        with contextlib.suppress(ClusterError):
            self.rest.request("POST", f"/api/v1/namespaces/{self.ref.namespace}/events", body=body,
                              obj=f"Event/{reason}", retry=False)

    def write_audit(self, anchor: Mapping[str, JsonValue]) -> None:
        """``status.audit``: the chain head the audit writer last pushed (an anchor `gitopsq audit verify
        --anchor-from-cluster` checks the branch against). Its own merge patch: the sync's writes keep it."""
        self.rest.request("PATCH", f"{self._path}/status", body={"status": {"audit": dict(anchor)}},
                          content_type="application/merge-patch+json", obj=f"GitSource/{self.ref}/status")

    def events(self) -> Sequence[Event]:
        """The Events recorded about this GitSource, oldest first (for tests and `gitopsq apply` output)."""
        answer = cast(EventList, self.rest.request("GET", f"/api/v1/namespaces/{self.ref.namespace}/events",
                                   query=[("fieldSelector", f"involvedObject.name={self.ref.name}")]))
        return sorted(answer.get("items") or [], key=lambda e: (e.get("lastTimestamp") or "", e["metadata"]["name"]))
