"""How a sync pass ends, written down: the GitSource status, its Events and the audit records of each outcome
(applied, rejected, refused by the dry run, suspended, stalled, source unavailable, interrupted). A mixin of
`gitopsq.sync.syncer.Syncer`, kept apart so the pipeline reads on its own."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from gitopsq import logs
from gitopsq.api.model import ObjectKey
from gitopsq.cluster.status import SourceState, StatusStore, build_status, suspended_status
from gitopsq.errors import GitopsqError, SourceError
from gitopsq.reconcile.inventory import Inventory, InventoryFormatError
from gitopsq.reconcile.pairing import Plan, inventory_after
from gitopsq.sync.health import status_field, summary
from gitopsq.sync.report import audit_records, drift_message
from gitopsq.sync.values import SyncOptions, SyncResult, Validated
from gitopsq.sync.whole import Attempt

INVENTORY_UNREADABLE = "InventoryUnreadable"  # the Ready/Stalled reason of a GitSource whose inventory is broken
HEALTH_PENDING = "HealthCheckPending"  # the Ready reason while the applied queues' health is awaited


_log = logs.get("sync")


class OutcomeReports:
    """Status, Events and audit records of each way a pass ends."""

    store: StatusStore
    clock: Callable[[], datetime]
    url: str
    audit: Any
    _verified: tuple[str, dict[ObjectKey, str]] | None

    def _source_failed(self, err: SourceError, options: SyncOptions) -> SyncResult:
        result = SyncResult("failed", None, options.dry_run, error=f"source unavailable: {err}")
        if options.dry_run:
            return result
        state = self.store.read()
        if state.exists:
            status = build_status(state.status, outcome="source-unavailable", now=self.clock(),
                                  generation=state.generation, message=str(err))
            if self.store.write(state, status):
                self.store.event(state, "SourceUnavailable", str(err), warning=True)
        return result

    def _rejected(self, sha: str, state: SourceState, validated: Validated, options: SyncOptions) -> SyncResult:
        result = SyncResult("rejected", sha, options.dry_run, validated=validated, error=validated.reason)
        if options.dry_run:
            return result
        first_time = state.last_rejected != sha
        rejection = {"revision": sha, "time": _stamp(self.clock()) if first_time else
                     ((state.status or {}).get("lastRejection") or {}).get("time"),
                     "findings": [{k: v for k, v in f.items() if v is not None} for f in validated.findings[:50]]}
        message = f"Revision {sha} rejected: {validated.reason}; revision {state.last_applied or 'none'} stays applied"
        status = build_status(state.status, outcome="rejected", now=self.clock(), generation=state.generation,
                              attempted=sha, rejection=rejection, message=message, reason=validated.reason_code)
        self.store.write(state, status)
        if first_time:
            self.store.event(state, "Rejected", message, warning=True)
            self._audit(audit_records(result, now=self.clock(), source_url=self.url,
                                      previous_revision=state.last_applied))
        return result

    def _stalled(self, sha: str, state: SourceState, validated: Validated, err: InventoryFormatError,
                 options: SyncOptions) -> SyncResult:
        """The inventory in the status does not parse: nothing is pruned or applied from a guess, and the
        GitSource says Stalled (final until someone repairs or clears ``status.inventory``)."""
        message = f"GitSource {self.store.ref} has an unreadable inventory: {err}"
        result = SyncResult("stalled", sha, options.dry_run, validated=validated, error=message)
        if options.dry_run:
            return result
        status = build_status(state.status, outcome="rejected", now=self.clock(), generation=state.generation,
                              attempted=sha, message=message, reason=INVENTORY_UNREADABLE)
        if self.store.write(state, status):
            self.store.event(state, "SyncFailed", message, warning=True)
        return result

    def _interrupted(self, state: SourceState, sha: str, error: str) -> None:
        """Best effort: the API that failed the pass may refuse this write too; the pass's error is the news."""
        status = build_status(state.status, outcome="failed", now=self.clock(), generation=state.generation,
                              attempted=sha, message=f"Revision {sha} not applied: {error}")
        try:
            self.store.write(state, status)
        except GitopsqError as err:
            _log.warning("status of an interrupted sync not written", error=str(err))

    def _report(self, state: SourceState, result: SyncResult, inventory: Inventory) -> None:
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
                              now=self.clock(), generation=state.generation, attempted=sha, applied=sha,
                              inventory=inventory.to_status(), message="; ".join(parts),
                              reason=HEALTH_PENDING if result.outcome == "health-pending" else None)
        status["conflicts"] = conflicts
        if health is not None:
            status["health"] = status_field(health)
        else:
            status.pop("health", None)
        old_conflicts = (state.status or {}).get("conflicts") or []
        written = self.store.write(state, status)
        drifted = plan.drifted
        changed = [k for k in execution.applied if k not in set(drifted)] + list(execution.pruned)
        if changed:
            self.store.event(state, "Synced", status["conditions"][0]["message"])
        if result.outcome == "unhealthy" and written:
            self.store.event(state, "HealthCheckFailed", status["conditions"][0]["message"], warning=True)
        if drifted:
            undone = [a for a in plan.applies if a.reason == "drift"]  # what and who, as the audit record says
            self.store.event(state, "DriftCorrected", f"Corrected drift (revision {sha}): {drift_message(undone)}")
        if conflicts and conflicts != old_conflicts:
            self.store.event(state, "ConflictDetected", "; ".join(conflicts), warning=True)
        if changed or drifted:
            self._audit(audit_records(result, now=self.clock(), source_url=self.url,
                                      previous_revision=state.last_applied))

    def _refused(self, sha: str, state: SourceState, validated: Validated, plan: Plan, *, tried: Attempt,
                 timings: dict[str, float]) -> SyncResult:
        """The dry run refused objects: nothing written (but Namespaces the rest needed, which are recorded in
        the inventory); Ready=False DryRunFailed with every refusal, one Event and audit record per revision."""
        where = validated.locations
        staged = tried.execution.applied
        found = [{"severity": "error", "code": "sync/dry-run-refused", "reason": "DryRunFailed",
                  "message": f.reason, "object": str(f.key),
                  **({"path": where[f.key][0], "line": where[f.key][1]} if f.key in where else {})}
                 for f in tried.refusals]
        refusals = "; ".join(f"{f['object']}" + (f" ({f['path']}:{f['line']})" if "path" in f else "")
                             + f": {f['message']}" for f in found)
        kept = f" except the new Namespaces {', '.join(k.name for k in staged)}" if staged else ""
        message = (f"Revision {sha} refused by the API server's dry run ({len(found)} object(s)); nothing written"
                   f"{kept}; revision {state.last_applied or 'none'} stays applied: {refusals}")
        result = SyncResult("refused", sha, False, plan, tried.execution, validated, error=message,
                            timings=timings, refusals=tried.refusals, attempts=1)
        first_time = state.last_rejected != sha
        rejection = {"revision": sha, "time": _stamp(self.clock()) if first_time else
                     ((state.status or {}).get("lastRejection") or {}).get("time"), "findings": found[:50]}
        inventory = inventory_after(plan, set(staged), set()).to_status() if staged else None
        status = build_status(state.status, outcome="refused", now=self.clock(), generation=state.generation,
                              attempted=sha, rejection=rejection, message=message, inventory=inventory)
        if self.store.write(state, status) and first_time:
            self.store.event(state, "DryRunFailed", message, warning=True)
            self._audit(audit_records(result, now=self.clock(), source_url=self.url,
                                      previous_revision=state.last_applied))
        return result

    def _suspended(self, sha: str, state: SourceState) -> SyncResult:
        """``spec.suspend``: nothing applied or corrected; the status says so (a Suspended condition)."""
        message = (f"Reconciliation suspended (spec.suspend): revision {state.last_applied or 'none'} stays "
                   f"applied and drift is not corrected; Git is at {sha}")
        was = any(c.get("type") == "Suspended" for c in (state.status or {}).get("conditions") or [])
        if self.store.write(state, suspended_status(state.status, now=self.clock(), message=message)) and not was:
            self.store.event(state, "Suspended", message)
        self._verified = None
        return SyncResult("suspended", sha, False, error=message)

    def _audit(self, records: list[Any]) -> None:
        if self.audit is None:
            return
        for record in records:
            try:
                self.audit.record(record)
            except Exception as err:  # the audit trail has its own WAL and retries; a sync never fails on it
                _log.warning("audit record not written", error=str(err))


def _stamp(now: datetime) -> str:
    return now.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
