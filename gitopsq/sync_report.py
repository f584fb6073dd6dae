"""How a sync is reported outside the cluster: the stable JSON summary (``gitopsq apply --output json``) and the
audit records of a pass (``sync.attempt``, ``sync.rejected``, ``sync.drift_corrected``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gitopsq.cluster.status import SourceState
    from gitopsq.sync import Syncer, SyncResult


def summary(result: SyncResult) -> dict[str, Any]:
    """The stable JSON form of a sync (``gitopsq apply --output json``; docs/sync.md)."""
    plan, execution = result.plan, result.execution
    out: dict[str, Any] = {"outcome": result.outcome, "revision": result.revision, "dryRun": result.dry_run,
                           "error": result.error}
    if result.validated is not None:
        out["findings"] = [dict(f) for f in result.validated.findings]
    if plan is not None:
        applied = set(execution.applied) if execution else set()
        out["applied"] = [{"object": str(a.key), "reason": a.reason, "done": a.key in applied,
                           "changes": [c.to_json() for c in a.changes] if a.reason != "create" else [],
                           **({"droppedMarkers": list(a.dropped_markers)} if a.dropped_markers else {})}
                          for a in plan.applies]
        pruned = set(execution.pruned) if execution else set()
        out["pruned"] = [{"object": str(p.key), "done": p.key in pruned} for p in plan.prunes]
        out["unchanged"] = len(plan.unchanged)
        out["conflicts"] = [{"object": str(c.key), "manager": c.manager, "wanted": c.wanted} for c in plan.conflicts]
        out["pendingPrune"] = [str(k) for k in plan.pending_prune]
        out["orphaned"] = [str(k) for k in plan.orphaned]
        out["emptyGuard"] = plan.empty_guard
    if execution is not None:
        out["failed"] = [f.to_json() for f in execution.failed]
        out["notAttempted"] = [str(k) for k in execution.not_attempted]
        out["retries"] = execution.retries
        if execution.unverified:
            out["unverified"] = [str(k) for k in execution.unverified]
    out["timings"] = {k: round(v, 4) for k, v in result.timings.items()}
    return out


def audit_records(syncer: Syncer, result: SyncResult, state: SourceState) -> list[Any]:
    """sync.attempt / sync.rejected / sync.drift_corrected records for the audit trail."""
    from gitopsq.audit import records

    now = syncer.clock()
    sha = result.revision or ""
    if result.outcome == "rejected":
        return [records.sync_rejected(time=now, source_url=syncer.url, revision=sha,
                                      reason=result.error or "rejected",
                                      message="; ".join(str(f.get("message", "")) for f in
                                                        (result.validated.findings if result.validated else ())))]
    plan, execution = result.plan, result.execution
    assert plan is not None and execution is not None
    pruned = set(execution.pruned)
    changes = [records.ObjectChange(kind=k.kind, name=k.name, namespace=k.namespace or None,
                                    action="pruned" if k in pruned else
                                    ("created" if any(a.key == k and a.reason == "create" for a in plan.applies)
                                     else "updated"))
               for k in (*execution.applied, *execution.pruned)]
    result_word = "applied" if execution.ok else ("partial" if execution.applied or execution.pruned else "failed")
    out = [records.sync_attempt(time=now, source_url=syncer.url, revision=sha,
                                previous_revision=state.last_applied, result=result_word, changes=changes,
                                actor="gitopsq", message=result.error or "")]
    drifted = set(plan.drifted) & set(execution.applied)
    if drifted:
        out.append(records.sync_drift_corrected(time=now, source_url=syncer.url, revision=sha, changes=[
            c for c in changes if (c.kind, c.namespace or "", c.name) in {(k.kind, k.namespace, k.name)
                                                                             for k in drifted}]))
    return out


