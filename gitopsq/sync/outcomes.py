"""How a sync pass ends, as values: the GitSource status each outcome writes, the Events that follow it and the
audit records (applied, rejected, refused by the dry run, suspended, stalled, rewound, source unavailable,
interrupted, rolled back). Nothing here writes: `gitopsq.sync.syncer.Syncer` writes the one `Ending` of a pass in its
finaliser, whatever way the pass ended."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime

from gitopsq.api.git_source import GitSourceStatus, Rejection
from gitopsq.api.raw_objects import JsonValue
from gitopsq.audit.records import Record, sync_rewind_refused
from gitopsq.cluster.status import SourceState, build_status, suspended_status
from gitopsq.errors import SourceError
from gitopsq.reconcile.inventory import Inventory, InventoryFormatError
from gitopsq.reconcile.pairing import Plan, inventory_after
from gitopsq.sync.forward_only import HISTORY_REWOUND
from gitopsq.sync.health import status_field, summary
from gitopsq.sync.pass_records import audit_records, drift_message
from gitopsq.sync.values import SyncOptions, SyncResult, Validated
from gitopsq.sync.whole import Attempt

INVENTORY_UNREADABLE = "InventoryUnreadable"  # the Ready/Stalled reason of a GitSource whose inventory is broken
HEALTH_PENDING = "HealthCheckPending"  # the Ready reason while the applied queues' health is awaited


@dataclass(frozen=True, slots=True)
class Notice:
    """An Event recorded after the status write; ``if_written``: only when that write changed the status."""

    reason: str
    message: str
    warning: bool = False
    if_written: bool = True


@dataclass(frozen=True, slots=True)
class Ending:
    """The GitSource status a pass ends with, written once, then its Events and audit records.

    ``records_if_written``: the records go out only when the write changed the status. ``best_effort``: the pass
    was interrupted, and the API that failed it may refuse this write too (the pass's error is the news).
    """

    state: SourceState
    status: GitSourceStatus
    notices: tuple[Notice, ...] = ()
    records: tuple[Record, ...] = ()
    records_if_written: bool = False
    best_effort: bool = False
    forget_verified: bool = field(default=False)  # the next pass must read and compare every object again


def source_failed(err: SourceError, options: SyncOptions, state: SourceState | None,
                  now: datetime) -> tuple[SyncResult, Ending | None]:
    result = SyncResult("failed", None, options.dry_run, error=f"source unavailable: {err}")
    if options.dry_run or state is None or not state.exists:
        return result, None
    status = build_status(state.status, outcome="source-unavailable", now=now, generation=state.generation,
                          message=str(err))
    return result, Ending(state, status, (Notice("SourceUnavailable", str(err), warning=True),))


def rejected(sha: str, state: SourceState, validated: Validated, options: SyncOptions, *, now: datetime,
             url: str) -> tuple[SyncResult, Ending | None]:
    result = SyncResult("rejected", sha, options.dry_run, validated=validated, error=validated.reason)
    if options.dry_run:
        return result, None
    first_time = state.last_rejected != sha
    rejection: Rejection = {"revision": sha, "time": _stamp(now) if first_time else
                            ((state.status or {}).get("lastRejection") or {}).get("time"),
                            "findings": [{k: v for k, v in f.items() if v is not None}
                                         for f in validated.findings[:50]]}
    message = f"Revision {sha} rejected: {validated.reason}; revision {state.last_applied or 'none'} stays applied"
    status = build_status(state.status, outcome="rejected", now=now, generation=state.generation,
                          attempted=sha, rejection=rejection, message=message, reason=validated.reason_code)
    if not first_time:
        return result, Ending(state, status)
    records = audit_records(result, now=now, source_url=url, previous_revision=state.last_applied)
    return result, Ending(state, status, (Notice("Rejected", message, warning=True, if_written=False),),
                          tuple(records))


def stalled(sha: str, state: SourceState, validated: Validated, err: InventoryFormatError, options: SyncOptions,
            *, now: datetime, ref: object) -> tuple[SyncResult, Ending | None]:
    """The inventory in the status does not parse: nothing is pruned or applied from a guess, and the
    GitSource says Stalled (final until someone repairs or clears ``status.inventory``)."""
    message = f"GitSource {ref} has an unreadable inventory: {err}"
    result = SyncResult("stalled", sha, options.dry_run, validated=validated, error=message)
    if options.dry_run:
        return result, None
    status = build_status(state.status, outcome="rejected", now=now, generation=state.generation,
                          attempted=sha, message=message, reason=INVENTORY_UNREADABLE)
    return result, Ending(state, status, (Notice("SyncFailed", message, warning=True),))


def rewound(sha: str, state: SourceState, why: str, options: SyncOptions, *, now: datetime,
            url: str) -> tuple[SyncResult, Ending | None]:
    """The head does not descend from the revision applied last (gitopsq.sync.forward_only): nothing applied,
    Stalled with reason HistoryRewound; the Event and the audit record, naming both revisions, once per head."""
    applied = state.last_applied or ""
    message = f"Revision {sha} refused: {why}; revision {applied} stays applied"
    result = SyncResult("rewound", sha, options.dry_run, error=message)
    if options.dry_run:
        return result, None
    first_time = state.last_rejected != sha
    rejection: Rejection = {"revision": sha, "time": _stamp(now) if first_time else
                            ((state.status or {}).get("lastRejection") or {}).get("time"),
                            "findings": [{"severity": "error", "code": "history-not-forward",
                                          "reason": HISTORY_REWOUND, "message": why}]}
    status = build_status(state.status, outcome="rejected", now=now, generation=state.generation, attempted=sha,
                          rejection=rejection, message=message, reason=HISTORY_REWOUND)
    if not first_time:
        return result, Ending(state, status)
    record = sync_rewind_refused(time=now, source_url=url, revision=sha, applied_revision=applied, message=why)
    return result, Ending(state, status, (Notice(HISTORY_REWOUND, message, warning=True, if_written=False),),
                          (record,))


def interrupted(state: SourceState, sha: str, error: str, now: datetime) -> Ending:
    """A pass that raised after reading the GitSource: Ready=False with the error, never "Applying" left behind."""
    status = build_status(state.status, outcome="failed", now=now, generation=state.generation,
                          attempted=sha, message=f"Revision {sha} not applied: {error}")
    return Ending(state, status, best_effort=True)


def applied(state: SourceState, result: SyncResult, inventory: Inventory, *, now: datetime, url: str) -> Ending:
    """Status, Events and audit of a complete apply (healthy, unchecked or unhealthy)."""
    plan, execution, health = result.plan, result.execution, result.health
    assert plan is not None and execution is not None
    sha = result.revision
    conflicts = [f"{c.key}: {c.manager}" for c in plan.conflicts]
    parts = [f"Applied revision {sha}: {len(execution.applied)} applied, {len(execution.pruned)} pruned, "
             f"{len(plan.unchanged)} unchanged"]
    if conflicts:
        parts.append(f"{len(conflicts)} left to another manager ({'; '.join(conflicts)})")
    if plan.pending_prune:
        parts.append(f"{len(plan.pending_prune)} no longer in Git but not pruned")
    healthy = result.outcome not in ("unhealthy", "health-pending")
    if health:
        parts.insert(len(parts) if healthy else 0, summary(health))
    if result.outcome == "health-pending":
        parts.insert(0, "waiting for the queues to be healthy")
    status = build_status(state.status, outcome="unhealthy" if result.outcome == "unhealthy" else
                          "progressing" if result.outcome == "health-pending" else "applied",
                          now=now, generation=state.generation, attempted=sha, applied=sha,
                          inventory=inventory.to_status(), message="; ".join(parts),
                          reason=HEALTH_PENDING if result.outcome == "health-pending" else None)
    status["conflicts"] = conflicts
    if health is not None:
        status["health"] = status_field(health)
    else:
        status.pop("health", None)
    old_conflicts = (state.status or {}).get("conflicts") or []
    drifted = plan.drifted
    changed = [k for k in execution.applied if k not in set(drifted)] + list(execution.pruned)
    notices: list[Notice] = []
    if changed:
        notices.append(Notice("Synced", status["conditions"][0]["message"], if_written=False))
    if result.outcome == "unhealthy":
        notices.append(Notice("HealthCheckFailed", status["conditions"][0]["message"], warning=True))
    if drifted:
        undone = [a for a in plan.applies if a.reason == "drift"]  # what and who, as the audit record says
        notices.append(Notice("DriftCorrected", f"Corrected drift (revision {sha}): {drift_message(undone)}",
                              if_written=False))
    if conflicts and conflicts != old_conflicts:
        notices.append(Notice("ConflictDetected", "; ".join(conflicts), warning=True, if_written=False))
    records = audit_records(result, now=now, source_url=url, previous_revision=state.last_applied) \
        if changed or drifted else []
    return Ending(state, status, tuple(notices), tuple(records))


def refused(sha: str, state: SourceState, validated: Validated, plan: Plan, *, tried: Attempt,
            timings: dict[str, float], now: datetime, url: str) -> tuple[SyncResult, Ending]:
    """The dry run refused objects: nothing written (but Namespaces the rest needed, which are recorded in
    the inventory); Ready=False DryRunFailed with every refusal, one Event and audit record per revision."""
    where = validated.locations
    staged = tried.execution.applied
    found: list[dict[str, JsonValue]] = [
        {"severity": "error", "code": "sync/dry-run-refused", "reason": "DryRunFailed", "message": f.reason,
         "object": str(f.key), **({"path": where[f.key][0], "line": where[f.key][1]} if f.key in where else {})}
        for f in tried.refusals]
    refusals = "; ".join(f"{f['object']}" + (f" ({f['path']}:{f['line']})" if "path" in f else "")
                         + f": {f['message']}" for f in found)
    kept = f" except the new Namespaces {', '.join(k.name for k in staged)}" if staged else ""
    message = (f"Revision {sha} refused by the API server's dry run ({len(found)} object(s)); nothing written"
               f"{kept}; revision {state.last_applied or 'none'} stays applied: {refusals}")
    result = SyncResult("refused", sha, False, plan, tried.execution, validated, error=message,
                        timings=timings, refusals=tried.refusals, attempts=1)
    first_time = state.last_rejected != sha
    rejection: Rejection = {"revision": sha, "time": _stamp(now) if first_time else
                            ((state.status or {}).get("lastRejection") or {}).get("time"), "findings": found[:50]}
    inventory = inventory_after(plan, set(staged), set()).to_status() if staged else None
    status = build_status(state.status, outcome="refused", now=now, generation=state.generation,
                          attempted=sha, rejection=rejection, message=message, inventory=inventory)
    if not first_time:
        return result, Ending(state, status)
    records = audit_records(result, now=now, source_url=url, previous_revision=state.last_applied)
    return result, Ending(state, status, (Notice("DryRunFailed", message, warning=True),), tuple(records),
                          records_if_written=True)


def suspended(sha: str, state: SourceState, now: datetime) -> tuple[SyncResult, Ending]:
    """``spec.suspend``: nothing applied or corrected; the status says so (a Suspended condition)."""
    message = (f"Reconciliation suspended (spec.suspend): revision {state.last_applied or 'none'} stays "
               f"applied and drift is not corrected; Git is at {sha}")
    was = any(c.get("type") == "Suspended" for c in (state.status or {}).get("conditions") or [])
    notices = () if was else (Notice("Suspended", message),)
    status = suspended_status(state.status, now=now, message=message)
    return SyncResult("suspended", sha, False, error=message), Ending(state, status, notices, forget_verified=True)


def rolled_back(state: SourceState, result: SyncResult, inventory: Inventory, *, now: datetime,
                url: str) -> Ending:
    """Every attempt failed a write and the last good revision was put back (or not: ``result.error`` says)."""
    message = result.error or ""
    status = build_status(state.status, outcome="rolled-back", now=now, generation=state.generation,
                          attempted=result.revision, inventory=inventory.to_status(), message=message)
    records = audit_records(result, now=now, source_url=url, previous_revision=result.rolled_back_to)
    return Ending(state, status, (Notice("RolledBack", message, warning=True, if_written=False),), tuple(records),
                  forget_verified=True)


def _stamp(now: datetime) -> str:
    return now.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
