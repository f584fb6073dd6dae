"""What the sync asks of its collaborators that are not its own: where its audit records go.

`AuditRecorder` is the one call the `Syncer` makes on its audit target (a `SyncAuditRecords`, or any
gitopsq.audit.AuditSink); `RecordSink` is what `SyncAuditRecords` needs of the sink it enriches records for (the
controller's `LeaderAudit`, an `AuditTrail`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from gitopsq.audit.records import Record


class AuditRecorder(Protocol):
    def record(self, record: Record | Mapping[str, object]) -> None:
        """Hand ``record`` over; returns once it is durable (the audit trail's WAL)."""
        ...


class RecordSink(AuditRecorder, Protocol):
    def submit(self, record: Record | Mapping[str, object]) -> int:
        """Queue ``record``; a ticket for `wait_durable`."""
        ...

    def wait_durable(self, ticket: int | None = None, timeout: float | None = None) -> None:
        """Return once every record up to ``ticket`` (all, when None) is durable."""
        ...
