"""`gitopsq plan` for a terminal: sections in the order a reviewer reads them.

1. the two revisions and any note about them; 2. objects added / changed / moved / removed with their field
changes; 3. the quota table and cohort capacity; 4. the head's findings and failing policy verdicts;
5. approvals; 6. impact; 7. one verdict line (✓ accepted / ✗ rejected).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from gitopsq.admission.quota import Limits
from gitopsq.plan.impact import SnapshotImpact, TraceImpact, WorkloadImpact
from gitopsq.plan.pr_plan import ObjectChange, PrPlan, RevisionSummary
from gitopsq.plan.quota_table import QuotaRow
from gitopsq.plan.render_json import amount, signed
from gitopsq.reconcile.field_diff import FieldChange
from gitopsq.simulate.text_report import format_duration

MARK = {"added": "+", "removed": "-", "changed": "~", "moved": ">", "invalid": "!"}
UNLIMITED = "∞"
ABSENT = "—"
IMPACT_TITLES = {"preempted": "would be preempted", "loses-quota": "would lose their quota",
                 "admissible": "would become admissible", "pending-changed": "pending for another reason",
                 "checks-changed": "admitted or waiting for admission checks, the other way round"}


def short(sha: str) -> str:
    return sha[:12] if len(sha) == 40 else sha


def revision(r: RevisionSummary) -> str:
    """``main (3f9c2e1d0a4b)``; a commit id given as the ref is shown once, shortened."""
    if r.ref == r.sha or short(r.sha) == r.ref:
        return short(r.sha)
    return f"{r.ref} ({short(r.sha)})"


def count_phrase(counts: dict[str, int]) -> str:
    """``1 changed, 2 added``; ``no object changes`` when nothing changed."""
    return ", ".join(f"{n} {s}" for s, n in counts.items() if n) or "no object changes"


def value(v: Any) -> str:
    if isinstance(v, str):
        return v
    return json.dumps(v, ensure_ascii=False, sort_keys=True, default=str)


def field_line(change: FieldChange) -> str:
    if change.op == "added":
        return f"{change.where}: + {value(change.new)}"
    if change.op == "removed":
        return f"{change.where}: - {value(change.old)}"
    if change.op == "reordered":
        return f"{change.where}: order {value(change.old)} → {value(change.new)}"
    return f"{change.where}: {value(change.old)} → {value(change.new)}"


def where(c: ObjectChange) -> str:
    if c.status == "moved":
        return f"{c.old_path}:{c.old_line} → {c.path}:{c.line}"
    if c.status == "removed":
        return f"was {c.old_path}:{c.old_line}"
    if c.status == "invalid":
        return f"was {c.old_path}:{c.old_line}; unreadable in head, see the findings"
    return f"{c.path}:{c.line}"


def object_fields(c: ObjectChange) -> list[str]:
    """An added object shows its spec once (not every field as added); others show each field change."""
    if c.status == "added":
        return [f"{f.where}: {value(f.new)}{_at(c, i)}" for i, f in enumerate(c.fields)
                if f.where not in ("apiVersion", "kind")]
    if c.status in ("removed", "invalid"):
        return []  # the whole object goes: its fields are in the JSON output and the Markdown diff
    return [field_line(f) + _at(c, i) for i, f in enumerate(c.fields)]


def _at(c: ObjectChange, index: int) -> str:
    """`` (overlays/prod/patch.yaml:7)``: where a kustomize-rendered field was written (docs/kustomize.md)."""
    found = c.source(index)
    return f"  ({found})" if found is not None else ""


def change_cell(resource: str, before: int | None, after: int | None, *, present: tuple[bool, bool]) -> str:
    def one(v: int | None, here: bool) -> str:
        if not here:
            return ABSENT
        return UNLIMITED if v is None else amount(resource, v)

    a, b = one(before, present[0]), one(after, present[1])
    return a if a == b else f"{a} → {b}"


def quota_cells(row: QuotaRow) -> tuple[str, str, str, str]:
    """(nominal, borrowingLimit, lendingLimit, Δ nominal) of one row, as ``before → after`` when changed."""
    present = (row.before is not None, row.after is not None)
    empty = Limits(0)
    before, after = row.before or empty, row.after or empty
    return (change_cell(row.resource, before.nominal, after.nominal, present=present),
            change_cell(row.resource, before.borrowing, after.borrowing, present=present),
            change_cell(row.resource, before.lending, after.lending, present=present),
            signed(row.resource, row.nominal_delta) if row.nominal_delta else "0")


def table(header: Sequence[str], rows: Sequence[Sequence[str]], indent: str = "    ") -> list[str]:
    widths = [max(len(str(x)) for x in col) for col in zip(header, *rows, strict=True)]
    out = []
    for row in (header, *rows):
        out.append(indent + "  ".join(str(x).ljust(w) for x, w in zip(row, widths, strict=True)).rstrip())
    return out


def cohort_change(before: str | None, after: str | None) -> str:
    if before == after:
        return f"cohort {before}" if before else "no cohort"
    return f"cohort {before or '(none)'} → {after or '(none)'}"


def readmission(w: WorkloadImpact) -> str:
    return f" (then admitted again in {w.cluster_queue_after}: {w.flavors_after})" if w.readmitted else ""


def impact_lines(impact: SnapshotImpact) -> list[str]:
    out = [f"  {impact.workloads} workloads; holding quota: {impact.admitted_before} under base, "
           f"{impact.admitted_after} under head"]
    for kind, title in IMPACT_TITLES.items():
        items = impact.of_kind(kind)  # type: ignore[arg-type]
        if items:
            out.append(f"  {len(items)} {title}:")
            for w in items:
                cq = w.cluster_queue_before if kind != "admissible" else w.cluster_queue_after
                why = f" — {w.reason}: {w.message}" if w.reason else ""
                out.append(f"    {w.key} ({cq or 'no ClusterQueue'}){why}{readmission(w)}")
    if impact.headroom:
        out.append("  borrowing headroom (beyond own unused nominal quota):")
        out.extend(table(("ClusterQueue", "flavor", "resource", "before", "after"),
                         [(h.cluster_queue, h.flavor, h.resource,
                           ABSENT if h.before is None else amount(h.resource, h.before),
                           ABSENT if h.after is None else amount(h.resource, h.after)) for h in impact.headroom]))
    return out


def trace_lines(trace: TraceImpact) -> list[str]:
    out = [f"  trace {trace.scenario}: {trace.workloads} workloads; preempted {trace.preempted_before} → "
           f"{trace.preempted_after}; still pending at the end {trace.pending_before} → {trace.pending_after}"]
    out.extend(table(("ClusterQueue", "admissions", "mean wait", "p95 wait"),
                     [(w.cluster_queue, f"{w.admissions_before} → {w.admissions_after}",
                       f"{format_duration(w.mean_before)} → {format_duration(w.mean_after)}",
                       f"{format_duration(w.p95_before)} → {format_duration(w.p95_after)}") for w in trace.waits]))
    return out


def render_text(plan: PrPlan) -> str:
    out = [f"gitopsq plan {plan.repository}: base {revision(plan.base)} → head {revision(plan.head)}"]
    out.extend(f"note: {n}" for n in plan.notes)
    counts = plan.counts
    out += ["", "Objects: " + count_phrase(counts)]
    for c in plan.objects:
        out.append(f"  {MARK[c.status]} {c.name}  ({where(c)})")
        out.extend(f"      {line}" for line in object_fields(c))
    if plan.quota:
        out += ["", "Quota (before → after):"]
        for q in plan.quota:
            out.append(f"  {q.kind} {q.name} [{q.status}] ({cohort_change(q.cohort_before, q.cohort_after)})")
            if q.rows:
                out.extend(table(("flavor", "resource", "nominalQuota", "borrowingLimit", "lendingLimit", "Δ nominal"),
                                 [(r.flavor, r.resource, *quota_cells(r)) for r in q.rows]))
    if plan.cohorts:
        out += ["", "Cohort capacity (before → after, changed cells):"]
        for co in plan.cohorts:
            members = ", ".join(co.members_after) or "(none)"
            if co.members_before != co.members_after:
                members = f"{', '.join(co.members_before) or '(none)'} → {members}"
            out.append(f"  {co.name}: members {members}")
            changed = [x for x in co.cells if x.delta]  # every cell is in the JSON output
            rows = [(x.flavor, x.resource, change_cell(x.resource, x.before, x.after, present=(True, True)),
                     signed(x.resource, x.delta)) for x in changed]
            out.extend(table(("flavor", "resource", "capacity", "Δ"), rows) if rows else ["    capacity unchanged"])
    if plan.base_errors:
        out += ["", f"Base revision errors ({len(plan.base_errors)}):"]
        out.extend(f"  {f}" for f in plan.base_errors)
    out += ["", f"Head findings: {len(plan.errors)} error(s), {len(plan.findings) - len(plan.errors)} warning(s)"]
    out.extend(f"  {f}" for f in plan.findings)
    pol = plan.policies
    out += ["", f"Policies: {len(pol.verdicts)} verdict(s), {len(pol.denied)} denied, {len(pol.warned)} warning(s)"]
    out.extend(f"  ✗ {v}" for v in pol.denied)
    out.extend(f"  ! {v}" for v in pol.warned)
    out += ["", "Approvals required:"]
    for a in plan.approvals:
        people = ", ".join(a.maintainers) or "no maintainers listed"
        out.append(f"  {a.team}: {people}")
        out.extend(f"    - {r}" for r in a.reasons)
    if not plan.approvals:
        out.append("  none (no file changed)")
    if plan.impact is not None or plan.trace is not None or plan.impact_notes:
        out += ["", "Impact:"]
        out.extend(f"  note: {n}" for n in plan.impact_notes)
        if plan.impact is not None:
            out.extend(impact_lines(plan.impact))
        if plan.trace is not None:
            out.extend(trace_lines(plan.trace))
    mark = "✗ rejected" if plan.rejected else "✓ accepted"
    out += ["", f"{mark}: head {revision(plan.head)} ({len(plan.errors)} error(s), {len(pol.denied)} policy "
                f"denial(s))"]
    return "\n".join(out) + "\n"
