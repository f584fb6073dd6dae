"""The controller's audit wiring: the trail open only while this replica leads (`LeaderAudit`), and the sink the
`Syncer` writes to, which completes ``sync.attempt`` records with commit facts, verdicts and approvals
(`SyncAuditRecords`)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from gitopsq import logs
from gitopsq.errors import GitopsqError


def _log() -> Any:
    """The logger, looked up at use: a module-level bound logger would freeze the configuration of import time."""
    return logs.get("controller")


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


class SyncAuditRecords:
    """The audit sink the `Syncer` writes to: ``sync.attempt`` records gain the commit (author, committer,
    signature), the approvals the history of the change carries (merge commits, ``Reviewed-by`` /
    ``Approved-by`` trailers), the policy verdicts of the validated revision, and the approvals its ownership
    requires (``requiredApprovals``, ``approvalRequired``; gitopsq.sync_approvals). The record id stays: it does
    not depend on these fields."""

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
        from gitopsq.audit.approvals import commit_info
        from gitopsq.audit.records import PolicyVerdict, Record
        from gitopsq.audit.redact import redact
        from gitopsq.sync_approvals import change_approvals

        data = getattr(record, "data", record)
        if data.get("type") != "sync.attempt" or data.get("commit"):
            return record
        revision, previous = str(data["revision"]), data.get("previousRevision")
        extra: dict[str, Any] = {}
        try:
            extra["commit"] = commit_info(self.source.commit_info(revision)).to_json()
        except (GitopsqError, ValueError, KeyError) as err:
            _log().warning("commit facts not added to the audit record", revision=revision, error=str(err))
        try:
            facts = change_approvals(self.source, revision, previous)
            extra["approvals"] = [a.to_json() for a in facts.approvals]
            extra["requiredApprovals"] = facts.required_json()
            extra["approvalRequired"] = bool(facts.required)
        except Exception as err:  # the record must still be written, whatever the history reading hit
            # Unknown is not "not required": the export lists the change with this error as its reason.
            _log().warning("approvals not checked for the audit record", revision=revision, error=str(err))
            extra["approvalRequired"] = True
            extra["approvalError"] = str(err)
        validated = getattr(self.syncer, "_validated", None)
        findings = validated[1].findings if validated is not None and validated[0] == revision else ()
        verdicts = [PolicyVerdict(str(f["policy"]), str(f.get("object") or ""), str(f.get("severity", "")),
                                  False, str(f.get("message", ""))) for f in findings if f.get("policy")]
        extra["verdicts"] = [v.to_json() for v in verdicts]
        return Record({**data, **redact(extra)})
