"""Audit records (pure): schema version 1, one builder per record type, stable ids, redaction.

Every record is a flat JSON object with the envelope fields ``schemaVersion``, ``type``, ``id`` and ``time``
(RFC 3339, UTC) followed by the fields of its type (docs/audit.md lists them with an example each). The chain
adds ``seq``, ``prevHash`` and ``hash`` when the record is stored (gitopsq.audit.canonical).

The id is the SHA-256 (first 32 hex digits) of the canonical JSON of the type and the record's identifying
fields, so emitting the same event twice, or replaying a write-ahead log, yields the same id and the writer
drops the duplicate. Identifying fields per type:

1. ``sync.attempt``: source url, revision, previousRevision, time of the attempt;
2. ``sync.drift_corrected``: source url, revision, time;
3. ``sync.rejected``: source url, revision (a revision is rejected once, however often it is polled);
4. ``admission.*``: workload uid (or namespace/name when no uid), time of the transition.

Builders take times as arguments (no clock here) and run every value through redaction.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from gitopsq.audit.canonical import canonical_json, sha256_hex
from gitopsq.audit.redact import redact, redact_text

SCHEMA_VERSION = 1


class RecordType(StrEnum):
    SYNC_ATTEMPT = "sync.attempt"
    SYNC_DRIFT_CORRECTED = "sync.drift_corrected"
    SYNC_REJECTED = "sync.rejected"
    ADMISSION_ADMITTED = "admission.admitted"
    ADMISSION_PREEMPTED = "admission.preempted"
    ADMISSION_EVICTED = "admission.evicted"
    ADMISSION_FINISHED = "admission.finished"


SYNC_RESULTS = ("applied", "rejected", "failed", "partial")
CHANGE_ACTIONS = ("created", "updated", "pruned", "unchanged")
ENVELOPE = ("schemaVersion", "type", "id", "time")
CHAIN_FIELDS = ("seq", "prevHash", "hash")


def format_time(moment: datetime) -> str:
    """RFC 3339 in UTC with a ``Z``; naive datetimes are refused because an audit time must be unambiguous."""
    if moment.tzinfo is None:
        raise ValueError("audit times must be timezone-aware")
    text = moment.astimezone(UTC).isoformat()
    return text.replace("+00:00", "Z")


def parse_time(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


@dataclass(frozen=True, slots=True)
class Person:
    """A git identity with the time git recorded for it."""

    name: str
    email: str
    time: datetime | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "email": self.email}
        if self.time is not None:
            out["time"] = format_time(self.time)
        return out


@dataclass(frozen=True, slots=True)
class ObjectChange:
    kind: str
    name: str
    action: str
    namespace: str | None = None

    def to_json(self) -> dict[str, Any]:
        if self.action not in CHANGE_ACTIONS:
            raise ValueError(f"unknown change action {self.action!r}")
        return {"kind": self.kind, "namespace": self.namespace, "name": self.name, "action": self.action}


@dataclass(frozen=True, slots=True)
class PolicyVerdict:
    policy: str
    object: str
    severity: str
    allowed: bool
    message: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"policy": self.policy, "object": self.object, "severity": self.severity,
                "allowed": self.allowed, "message": self.message}


@dataclass(frozen=True, slots=True)
class Approval:
    """Someone who approved the change: ``source`` is ``merge``, ``Reviewed-by``, ``Approved-by``, ``review``
    (an approving review read from the forge) or ``note`` (the same read from a signed approvals note,
    gitopsq.forge.notes) — for both: ``forge`` names it, ``pullRequest`` the merged pull request,
    ``login`` the reviewer's forge account and ``approvedCommit`` the revision the review approved; ``commit`` is
    then the merge or squash commit that brought the pull request in)."""

    name: str
    email: str
    source: str
    commit: str
    time: datetime | None = None
    forge: str | None = None
    pull_request: int | None = None
    login: str | None = None
    approved_commit: str | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "email": self.email, "source": self.source, "commit": self.commit}
        if self.time is not None:
            out["time"] = format_time(self.time)
        if self.forge is not None:
            out.update({"forge": self.forge, "pullRequest": self.pull_request, "login": self.login,
                        "approvedCommit": self.approved_commit})
        return out


@dataclass(frozen=True, slots=True)
class SignatureState:
    """``state`` is ``verified``, ``unverified`` (signed by an unknown key), ``invalid`` or ``unsigned``."""

    state: str = "unsigned"
    signer: str | None = None
    fingerprint: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"state": self.state, "signer": self.signer, "fingerprint": self.fingerprint}


@dataclass(frozen=True, slots=True)
class CommitInfo:
    sha: str
    author: Person
    committer: Person
    subject: str = ""
    signature: SignatureState = field(default_factory=SignatureState)

    def to_json(self) -> dict[str, Any]:
        return {"sha": self.sha, "author": self.author.to_json(), "committer": self.committer.to_json(),
                "subject": self.subject, "signature": self.signature.to_json()}


@dataclass(frozen=True, slots=True)
class Record:
    """One audit record: the JSON object to store, with its stable id."""

    data: Mapping[str, Any]

    @property
    def id(self) -> str:
        return str(self.data["id"])

    @property
    def type(self) -> str:
        return str(self.data["type"])

    def to_json(self) -> dict[str, Any]:
        return dict(self.data)


def record_id(record_type: str, identity: Sequence[Any]) -> str:
    return sha256_hex(canonical_json([record_type, *identity]))[:32]


def _build(record_type: RecordType, time: datetime, identity: Sequence[Any], fields: dict[str, Any]) -> Record:
    body = redact(fields)
    when = format_time(time)
    data = {"schemaVersion": SCHEMA_VERSION, "type": str(record_type),
            "id": record_id(str(record_type), [*(redact_text(v) if isinstance(v, str) else v for v in identity),
                                                when]), "time": when, **body}
    return Record(data)


def _source(url: str) -> dict[str, Any]:
    return {"url": redact_text(url)}


def sync_attempt(*, time: datetime, source_url: str, revision: str, previous_revision: str | None,
                 result: str, changes: Sequence[ObjectChange] = (), verdicts: Sequence[PolicyVerdict] = (),
                 commit: CommitInfo | None = None, approvals: Sequence[Approval] = (),
                 approval_required: bool = False, actor: str | None = None, message: str = "") -> Record:
    """One sync of one revision: what changed, under which verdicts, authored and approved by whom."""
    if result not in SYNC_RESULTS:
        raise ValueError(f"unknown sync result {result!r}")
    return _build(RecordType.SYNC_ATTEMPT, time, [redact_text(source_url), revision, previous_revision], {
        "source": _source(source_url), "revision": revision, "previousRevision": previous_revision,
        "result": result, "changes": [c.to_json() for c in changes], "verdicts": [v.to_json() for v in verdicts],
        "commit": commit.to_json() if commit else None, "approvals": [a.to_json() for a in approvals],
        "approvalRequired": approval_required, "actor": actor, "message": message,
    })


def sync_drift_corrected(*, time: datetime, source_url: str, revision: str,
                         changes: Sequence[ObjectChange], actor: str | None = None, message: str = "",
                         drift: Sequence[Mapping[str, Any]] = ()) -> Record:
    """Live objects differed from the applied revision and were put back; ``drift`` says, per object, which
    fields (``{path, op, old, new}``: ``old`` the live value undone, ``new`` Git's) and which field managers."""
    data: dict[str, Any] = {"source": _source(source_url), "revision": revision,
                            "changes": [c.to_json() for c in changes], "actor": actor, "message": message}
    if drift:
        data["drift"] = [dict(d) for d in drift]
    return _build(RecordType.SYNC_DRIFT_CORRECTED, time, [redact_text(source_url), revision], data)


def sync_rejected(*, time: datetime, source_url: str, revision: str, reason: str,
                  verdicts: Sequence[PolicyVerdict] = (), commit: CommitInfo | None = None,
                  message: str = "") -> Record:
    """A revision refused by validation or policy; the last good revision stays in place."""
    # The id leaves out the time on purpose: the same revision polled again is the same rejection.
    record = _build(RecordType.SYNC_REJECTED, time, [redact_text(source_url), revision], {
        "source": _source(source_url), "revision": revision, "reason": reason,
        "verdicts": [v.to_json() for v in verdicts], "commit": commit.to_json() if commit else None,
        "message": message,
    })
    data = dict(record.data)
    data["id"] = record_id(str(RecordType.SYNC_REJECTED), [redact_text(source_url), revision])
    return Record(data)


@dataclass(frozen=True, slots=True)
class WorkloadRef:
    namespace: str
    name: str
    uid: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"namespace": self.namespace, "name": self.name, "uid": self.uid}


_ADMISSION_TYPES = {
    "admitted": RecordType.ADMISSION_ADMITTED, "preempted": RecordType.ADMISSION_PREEMPTED,
    "evicted": RecordType.ADMISSION_EVICTED, "finished": RecordType.ADMISSION_FINISHED,
}


def admission(transition: str, *, time: datetime, workload: WorkloadRef, cluster_queue: str,
              flavors: Mapping[str, Mapping[str, str]] | None = None, reason: str = "", message: str = "",
              times: Mapping[str, datetime] | None = None, within_nominal_quota: bool | None = None,
              preempted_by: WorkloadRef | None = None, local_queue: str | None = None,
              priority: int | None = None) -> Record:
    """A workload transition: ``admitted``, ``preempted``, ``evicted`` or ``finished``.

    ``times`` holds the workload's milestones (``created``, ``quotaReserved``, ``admitted``, ``evicted``,
    ``finished``); export computes waits from them. ``within_nominal_quota`` says, for an admission, whether the
    ClusterQueue stayed within its nominal quota (no borrowing): auditors look at those waits.
    """
    record_type = _ADMISSION_TYPES.get(transition)
    if record_type is None:
        raise ValueError(f"unknown admission transition {transition!r}")
    who = workload.uid or f"{workload.namespace}/{workload.name}"
    return _build(record_type, time, [who], {
        "workload": workload.to_json(), "clusterQueue": cluster_queue, "localQueue": local_queue,
        "priority": priority, "flavors": {k: dict(v) for k, v in (flavors or {}).items()},
        "reason": reason, "message": message,
        "times": {k: format_time(v) for k, v in sorted((times or {}).items())},
        "withinNominalQuota": within_nominal_quota,
        "preemptedBy": preempted_by.to_json() if preempted_by else None,
    })


def validate_record(data: Mapping[str, Any]) -> list[str]:
    """Problems with a stored record's envelope (empty when it is well-formed for schema version 1)."""
    problems = []
    if data.get("schemaVersion") != SCHEMA_VERSION:
        problems.append(f"schemaVersion is {data.get('schemaVersion')!r}, expected {SCHEMA_VERSION}")
    if data.get("type") not in {str(t) for t in RecordType}:
        problems.append(f"unknown record type {data.get('type')!r}")
    if not isinstance(data.get("id"), str) or not data.get("id"):
        problems.append("missing id")
    try:
        parse_time(str(data.get("time")))
    except ValueError:
        problems.append(f"time {data.get('time')!r} is not RFC 3339")
    return problems


def sync_rewind_refused(*, time: datetime, source_url: str, revision: str, applied_revision: str,
                        message: str) -> Record:
    """A head that does not descend from the revision applied last (a branch moved back, a force-push onto
    another history), refused before validation: a ``sync.rejected`` record with reason ``HistoryRewound``
    naming both commits. Its id leaves out the time, as a rejection's: the same refusal polled again is one."""
    record = _build(RecordType.SYNC_REJECTED, time, [redact_text(source_url), revision, applied_revision], {
        "source": _source(source_url), "revision": revision, "reason": "HistoryRewound",
        "appliedRevision": applied_revision, "verdicts": [], "commit": None, "message": message,
    })
    data = dict(record.data)
    data["id"] = record_id(str(RecordType.SYNC_REJECTED), [redact_text(source_url), revision, applied_revision])
    return Record(data)
