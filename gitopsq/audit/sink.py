"""The audit port: what callers see (``AuditSink``), the writer's settings and status, and the null sink.

Every component that produces audit records takes an ``AuditSink``: ``AuditTrail`` in the controller and
``apply``, ``NullAuditTrail`` where no audit target is configured. Two ways to hand over a record:
1. ``record(r)``: returns once ``r`` is fsync'd in the WAL: use it for a sync, before reporting it done;
2. ``submit(r)`` then one ``wait_durable(ticket)`` for a group: the admission path queues every decision of a
   scheduling cycle (about a microsecond each) and waits once before writing Workload status.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from gitopsq.audit.canonical import ChainHead
from gitopsq.audit.gitstore import DEFAULT_BRANCH
from gitopsq.audit.known_tip import KnownTip, RewindIncident
from gitopsq.audit.records import Record
from gitopsq.audit.wal import TornLine


class AuditSink(Protocol):
    def submit(self, record: Record | Mapping[str, Any]) -> int: ...

    def wait_durable(self, ticket: int | None = None, timeout: float | None = None) -> None: ...

    def record(self, record: Record | Mapping[str, Any]) -> None: ...

    def flush(self, timeout: float = 60.0) -> bool: ...

    def close(self, timeout: float = 30.0) -> None: ...


@dataclass(frozen=True, slots=True)
class TrailSettings:
    branch: str = DEFAULT_BRANCH
    batch_seconds: float = 5.0         # commit at least this often while records wait
    batch_records: int = 500           # …or as soon as this many wait
    max_batch: int = 50_000            # never more records than this in one commit
    push_retries: int = 20             # rejected pushes (lost races) before the batch waits for the next round
    backoff_initial: float = 1.0       # first wait after the remote was unreachable
    backoff_max: float = 60.0
    dedup_window: int = 100_000        # a re-emitted id is dropped if among this many recent records
    memory_records: int = 50_000       # waiting records held in memory; beyond, they are read back from the WAL
    identity: tuple[str, str] = ("gitopsq", "gitopsq@localhost")
    signing_key: str | None = None


@dataclass(frozen=True, slots=True)
class TrailStatus:
    submitted: int          # WAL seq of the last accepted record
    durable: int            # WAL seq up to which records are fsync'd
    pushed: int             # WAL seq up to which records are on the audit branch
    head: ChainHead         # chain head of the branch as last seen
    last_error: str | None
    torn: TornLine | None   # the torn WAL line dropped when the trail opened, if any
    in_memory: int = 0      # waiting records held in memory (the rest of the backlog is only in the WAL)
    incident: RewindIncident | None = None  # the branch was rewound: records go to incident.recovery_ref
    last_pushed: KnownTip | None = None     # the commit this writer last pushed (the anchor it publishes)



def settings_from_config(audit: Mapping[str, Any], **overrides: Any) -> TrailSettings:
    """TrailSettings from the ``audit:`` block of gitopsq.yaml (branch, batchSeconds, batchRecords)."""
    values: dict[str, Any] = {}
    if audit.get("branch"):
        values["branch"] = str(audit["branch"])
    if audit.get("batchSeconds") is not None:
        values["batch_seconds"] = float(audit["batchSeconds"])
    if audit.get("batchRecords") is not None:
        values["batch_records"] = int(audit["batchRecords"])
    values.update(overrides)
    return TrailSettings(**values)


def audit_target(audit: Mapping[str, Any], source: str) -> str:
    """Where the audit branch lives: ``audit.repository`` from gitopsq.yaml, or the source repository itself."""
    return str(audit.get("repository") or source)


class NullAuditTrail:
    """An audit trail that keeps nothing: for commands run without an audit target."""

    def submit(self, record: Record | Mapping[str, Any]) -> int:
        return 0

    def wait_durable(self, ticket: int | None = None, timeout: float | None = None) -> None:
        return None

    def record(self, record: Record | Mapping[str, Any]) -> None:
        return None

    def flush(self, timeout: float = 60.0) -> bool:
        return True

    def close(self, timeout: float = 30.0) -> None:
        return None

    def __enter__(self) -> NullAuditTrail:
        return self

    def __exit__(self, *exc: object) -> None:
        return None
