"""The controller's leader-scoped audit: the trail open only while this replica leads (`LeaderAudit`). The sink the
`Syncer` writes through, which completes ``sync.attempt`` records, is gitopsq.sync.audit_sink.SyncAuditRecords."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from gitopsq import logs
from gitopsq.controller.cluster_names import named_record
from gitopsq.errors import AuditError

_log = logs.get("controller")


class LeaderAudit:
    """The audit trail as the loops see it: open only while this replica leads (one writer per audit branch).

    ``opener`` opens the real `AuditTrail` (WAL replay, branch fetch); while no trail is open every call raises
    AuditError, which the loops log as "audit record not written" and go on. A per-cluster controller's records
    name its ``cluster`` (gitopsq.controller.cluster_names.named_record)."""

    def __init__(self, opener: Callable[[], Any], cluster: str = "") -> None:
        self._opener = opener
        self.cluster = cluster
        self.trail: Any = None
        self._lock = threading.Lock()

    def lead(self) -> None:
        trail = self._opener()
        with self._lock:
            self.trail = trail
        _log.info("audit trail open")

    def follow(self) -> None:
        with self._lock:
            trail, self.trail = self.trail, None
        if trail is not None:
            trail.close()
            _log.info("audit trail closed")

    def _current(self) -> Any:
        with self._lock:
            trail = self.trail
        if trail is None:
            raise AuditError("the audit trail is open only while this replica leads")
        return trail

    def submit(self, record: Any) -> int:
        return int(self._current().submit(named_record(record, self.cluster)))

    def wait_durable(self, ticket: int | None = None, timeout: float | None = None) -> None:
        self._current().wait_durable(ticket, timeout)

    def record(self, record: Any) -> None:
        self._current().record(named_record(record, self.cluster))

    def flush(self, timeout: float = 60.0) -> bool:
        return bool(self._current().flush(timeout))

    def status(self) -> Any:
        with self._lock:
            trail = self.trail
        return None if trail is None else trail.status()

    def close(self, timeout: float = 30.0) -> None:
        self.follow()
