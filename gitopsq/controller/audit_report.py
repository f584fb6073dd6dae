"""What the controller tells the cluster about its audit trail, from each sample of the trail's status:

1. ``status.audit`` of the GitSource: the chain head the writer last pushed (the anchor that
   ``gitopsq audit verify --anchor-from-cluster`` checks the branch against), written when it changes, at most
   every ``PUBLISH_EVERY`` seconds (a batch is pushed every few seconds; the API server need not see each);
2. a Warning Event ``AuditBranchRewound`` on the GitSource, once per incident (the writer found the audit branch
   rewound or rewritten: docs/audit.md); the metric ``gitopsq_audit_branch_rewound`` is set by SyncMetrics.

A controller without a sync (``--admission-only``) has no GitSource: it only logs and counts.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from gitopsq import logs
from gitopsq.audit.known_tip import KnownTip
from gitopsq.audit.sink import TrailStatus
from gitopsq.cluster.kube import ClusterNotFound
from gitopsq.cluster.status import StatusStore
from gitopsq.errors import ClusterError

_log = logs.get("controller")
PUBLISH_EVERY = 30.0


def audit_status(pushed: KnownTip, now: datetime) -> dict[str, Any]:
    """``status.audit`` for the commit the writer last pushed (pure)."""
    return {"branch": pushed.branch, "commit": pushed.commit, "head": {"seq": pushed.seq, "hash": pushed.hash},
            "ref": pushed.ref, "time": now.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")}


class AuditReport:
    """Publishes the anchor and raises the rewind Event; a failed write is retried on the next sample."""

    def __init__(self, store: StatusStore | None) -> None:
        self._store = store
        self._published: str | None = None   # the commit status.audit names
        self._published_at: datetime | None = None
        self._reported: str | None = None    # the recovery ref of the incident an Event was recorded for

    def observe(self, status: TrailStatus, now: datetime) -> None:
        incident = status.incident
        if incident is None:
            self._reported = None
        if self._store is None:
            return
        try:
            pushed = status.last_pushed
            due = self._published_at is None or (now - self._published_at).total_seconds() >= PUBLISH_EVERY \
                or (pushed is not None and pushed.ref != f"refs/heads/{pushed.branch}")  # recovering: at once
            if pushed is not None and pushed.commit != self._published and due:
                self._store.write_audit(audit_status(pushed, now))
                self._published, self._published_at = pushed.commit, now
            if incident is not None and incident.recovery_ref != self._reported:
                self._store.event(self._store.read(), "AuditBranchRewound", incident.message(), warning=True)
                self._reported = incident.recovery_ref
        except ClusterNotFound:  # no GitSource before the first sync creates it: the next sample retries
            return
        except ClusterError as err:
            _log.warning("audit status not written to the GitSource", error=str(err))
