"""`gitopsq plan --output json`: the stable, versioned plan object (docs/plan.md "JSON output").

Quantities are Kubernetes strings in canonical form (``"64"``, ``"500m"``, ``"2Ti"`` for memory-like
resources); an unlimited borrowing or lending limit is ``null``; a side where a queue does not offer a
flavor-resource is ``null`` as a whole. Field names follow Kueue's (``nominalQuota``, ``borrowingLimit``,
``lendingLimit``, ``clusterQueue``). New fields may be added in version 1; none is removed or renamed.
"""

from __future__ import annotations

import json
from typing import Any

from gitopsq.admission.quota import Limits
from gitopsq.api.quantity import QuantityFormat, format_milli
from gitopsq.manifests.check_report import finding_json
from gitopsq.plan.impact import HeadroomChange, SnapshotImpact, TraceImpact, WorkloadImpact
from gitopsq.plan.pr_plan import ObjectChange, PrPlan, RevisionSummary
from gitopsq.plan.quota_table import CohortCapacity, QueueQuota
from gitopsq.policy import Verdict

_BINARY_HINTS = ("memory", "storage")


def amount(resource: str, milli: int) -> str:
    """``milli`` units of ``resource`` as Kubernetes would print them (binary suffixes for memory-like ones)."""
    binary = any(h in resource for h in _BINARY_HINTS)
    return format_milli(milli, QuantityFormat.BINARY_SI if binary else QuantityFormat.DECIMAL_SI)


def signed(resource: str, milli: int) -> str:
    return ("+" if milli > 0 else "") + amount(resource, milli)


def limit(resource: str, value: int | None) -> str | None:
    return None if value is None else amount(resource, value)


def verdict_label(plan: PrPlan) -> str:
    return "rejected" if plan.rejected else "accepted"


def _limits(resource: str, cell: Limits | None) -> dict[str, Any] | None:
    if cell is None:
        return None
    return {"nominalQuota": amount(resource, cell.nominal), "borrowingLimit": limit(resource, cell.borrowing),
            "lendingLimit": limit(resource, cell.lending)}


def _revision(r: RevisionSummary) -> dict[str, Any]:
    return {"ref": r.ref, "sha": r.sha, "ok": r.ok, "errors": r.errors, "warnings": r.warnings, "objects": r.objects}


def _object(c: ObjectChange) -> dict[str, Any]:
    return {"kind": c.key.kind, "group": c.key.group, "namespace": c.key.namespace or None, "name": c.key.name,
            "status": c.status, "path": c.path, "line": c.line, "oldPath": c.old_path, "oldLine": c.old_line,
            "fields": [_field(c, i) for i in range(len(c.fields))]}


def _field(c: ObjectChange, index: int) -> dict[str, Any]:
    out = c.fields[index].to_json()
    found = c.source(index)
    if found is not None:  # a kustomize-rendered field: the base or patch line it was written at
        out["source"] = {"path": found.path, "line": found.line}
    return out


def _queue(q: QueueQuota) -> dict[str, Any]:
    return {"kind": q.kind, "name": q.name, "status": q.status, "cohortBefore": q.cohort_before,
            "cohortAfter": q.cohort_after,
            "rows": [{"flavor": r.flavor, "resource": r.resource, "changed": r.changed,
                      "before": _limits(r.resource, r.before), "after": _limits(r.resource, r.after),
                      "nominalQuotaDelta": signed(r.resource, r.nominal_delta)} for r in q.rows]}


def _cohort(c: CohortCapacity) -> dict[str, Any]:
    return {"name": c.name, "membersBefore": list(c.members_before), "membersAfter": list(c.members_after),
            "capacity": [{"flavor": x.flavor, "resource": x.resource, "before": amount(x.resource, x.before),
                          "after": amount(x.resource, x.after), "delta": signed(x.resource, x.delta)}
                         for x in c.cells]}


def _verdict(v: Verdict) -> dict[str, Any]:
    return {"policy": v.policy, "severity": v.severity.value, "allowed": v.allowed, "object": v.obj, "path": v.path,
            "line": v.line, "message": v.message, "reason": v.reason}


def _workload(w: WorkloadImpact) -> dict[str, Any]:
    return {"workload": w.key, "clusterQueueBefore": w.cluster_queue_before or None,
            "clusterQueueAfter": w.cluster_queue_after or None, "reason": w.reason or None,
            "message": w.message or None, "stateAfter": w.state_after or None,
            "flavorsAfter": w.flavors_after or None}


def _headroom(h: HeadroomChange) -> dict[str, Any]:
    delta = (h.after or 0) - (h.before or 0)
    return {"clusterQueue": h.cluster_queue, "flavor": h.flavor, "resource": h.resource,
            "before": limit(h.resource, h.before), "after": limit(h.resource, h.after),
            "delta": signed(h.resource, delta)}


def impact_json(impact: SnapshotImpact) -> dict[str, Any]:
    return {"workloads": impact.workloads, "admittedBefore": impact.admitted_before,
            "admittedAfter": impact.admitted_after,
            "preempted": [_workload(w) for w in impact.of_kind("preempted")],
            "losesQuota": [_workload(w) for w in impact.of_kind("loses-quota")],
            "admissible": [_workload(w) for w in impact.of_kind("admissible")],
            "pendingChanged": [_workload(w) for w in impact.of_kind("pending-changed")],
            "checksChanged": [_workload(w) for w in impact.of_kind("checks-changed")],
            "borrowingHeadroom": [_headroom(h) for h in impact.headroom]}


def trace_json(trace: TraceImpact) -> dict[str, Any]:
    return {"scenario": trace.scenario, "workloads": trace.workloads,
            "preemptedBefore": trace.preempted_before, "preemptedAfter": trace.preempted_after,
            "pendingBefore": trace.pending_before, "pendingAfter": trace.pending_after,
            "waits": [{"clusterQueue": w.cluster_queue, "admissionsBefore": w.admissions_before,
                       "admissionsAfter": w.admissions_after, "meanWaitSecondsBefore": round(w.mean_before, 3),
                       "meanWaitSecondsAfter": round(w.mean_after, 3), "p95WaitSecondsBefore": round(w.p95_before, 3),
                       "p95WaitSecondsAfter": round(w.p95_after, 3)} for w in trace.waits]}


def plan_json(plan: PrPlan) -> dict[str, Any]:
    """The plan as one JSON-ready dict (schema: docs/plan.md)."""
    counts = plan.counts
    pol = plan.policies
    return {
        "version": plan.version,
        "repository": plan.repository,
        "base": _revision(plan.base),
        "head": _revision(plan.head),
        "history": plan.history,
        "verdict": verdict_label(plan),
        "notes": list(plan.notes),
        "summary": {**counts, "errors": len(plan.errors), "warnings": len(plan.findings) - len(plan.errors),
                    "policyDenials": len(pol.denied), "policyWarnings": len(pol.warned),
                    "policyVerdicts": len(pol.verdicts)},
        "objects": [_object(c) for c in plan.objects],
        "quota": [_queue(q) for q in plan.quota],
        "cohorts": [_cohort(c) for c in plan.cohorts],
        "findings": [finding_json(f) for f in plan.findings],
        "baseErrors": [finding_json(f) for f in plan.base_errors],
        "policy": {"denied": [_verdict(v) for v in pol.denied], "warned": [_verdict(v) for v in pol.warned]},
        "approvals": [{"team": a.team, "platform": a.platform, "maintainers": list(a.maintainers),
                       "reasons": list(a.reasons)} for a in plan.approvals],
        "impact": impact_json(plan.impact) if plan.impact is not None else None,
        "trace": trace_json(plan.trace) if plan.trace is not None else None,
        "impactNotes": list(plan.impact_notes),
    }


def render_json(plan: PrPlan) -> str:
    return json.dumps(plan_json(plan), indent=2, ensure_ascii=False, default=str)
