"""The audit records of a sync pass (``sync.attempt``, ``sync.rejected``, ``sync.drift_corrected``), made from
what the pass hands over: the time, the source URL, the result and the revision applied before it. The JSON
summary of a pass is `gitopsq.sync.values.SyncResult.to_json`."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from gitopsq.audit import records
from gitopsq.reconcile.field_diff import Value
from gitopsq.reconcile.pairing import ApplyAction
from gitopsq.sync.values import SyncResult


def audit_records(result: SyncResult, *, now: datetime, source_url: str,
                  previous_revision: str | None) -> list[records.Record]:
    """sync.attempt / sync.rejected / sync.drift_corrected records for the audit trail."""
    sha = result.revision or ""
    if result.outcome == "rejected":
        return [records.sync_rejected(time=now, source_url=source_url, revision=sha,
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
    result_word = "failed" if result.outcome in ("refused", "rolled-back") else "applied" if execution.ok else \
        ("partial" if execution.applied or execution.pruned else "failed")
    out = [records.sync_attempt(time=now, source_url=source_url, revision=sha,
                                previous_revision=previous_revision, result=result_word, changes=changes,
                                actor="gitopsq", message=result.error or "")]
    drifted = set(plan.drifted) & set(execution.applied)
    if drifted:
        undone = [a for a in plan.applies if a.reason == "drift" and a.key in drifted]
        out.append(records.sync_drift_corrected(time=now, source_url=source_url, revision=sha, changes=[
            c for c in changes if (c.kind, c.namespace or "", c.name) in {(k.kind, k.namespace, k.name)
                                                                             for k in drifted}],
            actor=", ".join(sorted({m for a in undone for m in a.managers})) or None,
            message=drift_message(undone), drift=[
                {"object": str(a.key), "fields": [c.to_json() for c in a.changes], "managers": list(a.managers)}
                for a in undone]))
    return out


def drift_message(undone: Sequence[ApplyAction], limit: int = 5) -> str:
    """``ClusterQueue/team-a: spec…nominalQuota was 32, put back to 16 (changed by kubectl-edit)``, per object."""
    parts = []
    for action in undone:
        fields = [f"{c.where} was {_shown(c.old)}, put back to {_shown(c.new)}" for c in action.changes[:limit]]
        more = f" and {len(action.changes) - limit} more" if len(action.changes) > limit else ""
        who = f" (changed by {', '.join(action.managers)})" if action.managers else ""
        parts.append(f"{action.key}: {'; '.join(fields)}{more}{who}")
    return "; ".join(parts)


def _shown(value: Value) -> str:
    return "(absent)" if value is None else str(value)
