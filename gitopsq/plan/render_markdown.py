"""`gitopsq plan --output markdown`: one pull-request comment, within GitHub's 65,536-character limit.

The comment starts with the marker ``<!-- gitopsq-plan -->`` so CI can find and update its own comment. The
summary, quota table, cohort capacity, failing verdicts, approvals and impact come first and always fit
(long lists are cut to `MAX_ROWS` with a count of what was left out); the field-level diff comes last, in
collapsed ``<details>`` blocks, object by object while the comment stays under `LIMIT`; what does not fit is
named in a closing note pointing at the JSON output.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from gitopsq.plan.impact import SnapshotImpact, TraceImpact, WorkloadImpact
from gitopsq.plan.pr_plan import ObjectChange, PrPlan
from gitopsq.plan.render_json import amount, signed
from gitopsq.plan.render_text import (
    ABSENT,
    IMPACT_TITLES,
    MARK,
    change_cell,
    cohort_change,
    count_phrase,
    object_fields,
    quota_cells,
    readmission,
    revision,
    value,
    where,
)
from gitopsq.simulate.text_report import format_duration

MARKER: Final = "<!-- gitopsq-plan -->"
LIMIT: Final = 65_536
RESERVE: Final = 1_000  # room for the closing truncation note
MAX_ROWS: Final = 50
OPEN_DETAILS_LINES: Final = 30  # a diff this short is shown open


def _esc(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out.extend("| " + " | ".join(_esc(str(c)) for c in row) + " |" for row in rows[:MAX_ROWS])
    if len(rows) > MAX_ROWS:
        out.append(f"\n… and {len(rows) - MAX_ROWS} more rows (see `--output json`)")
    return out


def _list(items: Sequence[str]) -> list[str]:
    out = [f"- {i}" for i in items[:MAX_ROWS]]
    if len(items) > MAX_ROWS:
        out.append(f"- … and {len(items) - MAX_ROWS} more (see `--output json`)")
    return out


def _queue_of(w: WorkloadImpact, kind: str) -> str:
    return w.cluster_queue_after if kind == "admissible" else w.cluster_queue_before


def _impact(impact: SnapshotImpact) -> list[str]:
    out = [f"{impact.workloads} workloads; holding quota: **{impact.admitted_before}** under base → "
           f"**{impact.admitted_after}** under head", ""]
    for kind, title in IMPACT_TITLES.items():
        items = impact.of_kind(kind)  # type: ignore[arg-type]
        if items:
            out.append(f"**{len(items)} {title}**")
            out.append("")
            out.extend(_list([f"`{w.key}` in `{_queue_of(w, kind) or '-'}`"
                              + (f" — {w.reason}: {w.message}" if w.reason else "") + readmission(w)
                              for w in items]))
            out.append("")
    if impact.headroom:
        out += ["Borrowing headroom (what each ClusterQueue could take beyond its own unused nominal quota):", ""]
        out.extend(_table(("ClusterQueue", "flavor", "resource", "before", "after"),
                          [(h.cluster_queue, h.flavor, h.resource,
                            ABSENT if h.before is None else amount(h.resource, h.before),
                            ABSENT if h.after is None else amount(h.resource, h.after)) for h in impact.headroom]))
        out.append("")
    return out


def _trace(trace: TraceImpact) -> list[str]:
    out = [f"Trace `{trace.scenario}` ({trace.workloads} workloads) replayed on both revisions: preempted "
           f"{trace.preempted_before} → {trace.preempted_after}, still pending at the end "
           f"{trace.pending_before} → {trace.pending_after}.", ""]
    out.extend(_table(("ClusterQueue", "admissions", "mean wait", "p95 wait"),
                      [(w.cluster_queue, f"{w.admissions_before} → {w.admissions_after}",
                        f"{format_duration(w.mean_before)} → {format_duration(w.mean_after)}",
                        f"{format_duration(w.p95_before)} → {format_duration(w.p95_after)}") for w in trace.waits]))
    return [*out, ""]


def _head(plan: PrPlan) -> list[str]:
    pol = plan.policies
    status = "❌ rejected" if plan.rejected else "✅ accepted"
    counts = plan.counts
    out = [MARKER, f"### gitopsq plan: {status}", "",
           f"base `{revision(plan.base)}` → head `{revision(plan.head)}`: {count_phrase(counts)}"
           + f"; {len(plan.errors)} error(s), {len(pol.denied)} policy denial(s), {len(pol.warned)} policy "
             f"warning(s)", ""]
    out.extend(f"> **Note:** {n}" for n in plan.notes)
    if plan.notes:
        out.append("")
    return out


def _quota(plan: PrPlan) -> list[str]:
    out: list[str] = []
    if plan.quota:
        out += ["#### Quota", ""]
        rows: list[tuple[str, ...]] = []
        for q in plan.quota:
            label = f"{q.kind} `{q.name}` ({q.status}; {cohort_change(q.cohort_before, q.cohort_after)})"
            if not q.rows:
                rows.append((label, ABSENT, ABSENT, ABSENT, ABSENT, ABSENT, ABSENT))
            for i, r in enumerate(q.rows):
                nominal, borrowing, lending, delta = quota_cells(r)
                rows.append((label if i == 0 else "", r.flavor, r.resource, f"**{nominal}**" if r.changed else nominal,
                             borrowing, lending, delta))
        out.extend(_table(("queue", "flavor", "resource", "nominalQuota", "borrowingLimit", "lendingLimit",
                           "Δ nominal"), rows))
        out.append("")
    if plan.cohorts:
        out += ["#### Cohort capacity (changed cells; the JSON output has all)", ""]
        rows = []  # reused: the cohort table has its own columns
        for co in plan.cohorts:
            members = ", ".join(co.members_after) or "(none)"
            if co.members_before != co.members_after:
                members = f"{', '.join(co.members_before) or '(none)'} → {members}"
            changed = [x for x in co.cells if x.delta]
            if not changed:
                rows.append((f"`{co.name}`", members, ABSENT, ABSENT, "unchanged", "0"))
            rows.extend((f"`{co.name}`" if i == 0 else "", members if i == 0 else "", x.flavor, x.resource,
                         change_cell(x.resource, x.before, x.after, present=(True, True)), signed(x.resource, x.delta))
                        for i, x in enumerate(changed))
        out.extend(_table(("cohort", "members", "flavor", "resource", "capacity", "Δ"), rows))
        out.append("")
    return out


def _checks(plan: PrPlan) -> list[str]:
    out: list[str] = []
    if plan.base_errors:
        out += [f"#### Base revision errors ({len(plan.base_errors)})", ""]
        out.extend(_list([f"`{f}`" for f in plan.base_errors]))
        out.append("")
    if plan.findings:
        out += [f"#### Findings in head ({len(plan.errors)} error(s))", ""]
        out.extend(_list([("❌ " if f.is_error else "⚠️ ") + f"`{f}`" for f in plan.findings]))
        out.append("")
    pol = plan.policies
    out += [f"#### Policies: {len(pol.verdicts)} verdict(s), {len(pol.denied)} denied, {len(pol.warned)} warning(s)",
            ""]
    out.extend(_list([f"❌ **{v.policy}** `{v.obj or '-'}` ({v.path or '-'}{f':{v.line}' if v.line else ''}): "
                      f"{v.message}" for v in pol.denied]
                     + [f"⚠️ **{v.policy}** `{v.obj or '-'}`: {v.message}" for v in pol.warned])
               or ["Every policy allows the change."])
    out += ["", "#### Approvals required", ""]
    out.extend(_list([f"**{a.team}** ({', '.join(a.maintainers) or 'no maintainers listed'}): "
                      + "; ".join(a.reasons) for a in plan.approvals] or ["none (no file changed)"]))
    out.append("")
    return out


def diff_lines(c: ObjectChange) -> list[str]:
    """Field changes as unified-diff lines (GitHub colours ``-`` and ``+``)."""
    if c.status == "added":
        return [f"+ {line}" for line in object_fields(c)]
    if c.status in ("removed", "invalid"):
        return [f"- {f.where}: {value(f.old)}" for f in c.fields if f.where not in ("apiVersion", "kind")]
    out = []
    for i, f in enumerate(c.fields):
        if f.op in ("removed", "changed", "reordered"):
            out.append(f"- {f.where}: {value(f.old)}")
        if f.op in ("added", "changed", "reordered"):
            found = c.source(i)  # a kustomize-rendered field: the base or patch line it was written at
            out.append(f"+ {f.where}: {value(f.new)}" + (f"  ({found})" if found is not None else ""))
    return out


def _details(c: ObjectChange) -> str:
    lines = diff_lines(c)
    body = "\n".join(lines) if lines else "(no field changes)"
    opened = " open" if len(lines) <= OPEN_DETAILS_LINES else ""
    fence = "````" if "```" in body else "```"
    return (f"<details{opened}><summary><code>{MARK[c.status]} {c.name}</code> — {where(c)}</summary>\n\n"
            f"{fence}diff\n{body}\n{fence}\n\n</details>")


def render_markdown(plan: PrPlan, *, limit: int = LIMIT) -> str:
    """The PR comment; never longer than ``limit`` characters."""
    parts = _head(plan) + _quota(plan) + _checks(plan)
    if plan.impact is not None or plan.trace is not None or plan.impact_notes:
        parts += ["#### Impact", ""]
        parts.extend(f"> **Note:** {n}" for n in plan.impact_notes)
        if plan.impact_notes:
            parts.append("")
        if plan.impact is not None:
            parts.extend(_impact(plan.impact))
        if plan.trace is not None:
            parts.extend(_trace(plan.trace))
    text = "\n".join(parts)
    budget = limit - RESERVE
    if len(text) > budget:  # only with thousands of findings or verdicts: cut at a line
        text = text[:budget].rsplit("\n", 1)[0] + "\n"
    shown = 0
    if plan.objects and len(text) < budget:
        text += "\n#### Changes\n\n"
        for c in plan.objects:
            block = _details(c) + "\n"
            if len(text) + len(block) > budget:
                break
            text += block
            shown += 1
    if shown < len(plan.objects) or len(text) >= budget:
        text += (f"\n> **Truncated** to fit a pull-request comment: {len(plan.objects) - shown} of "
                 f"{len(plan.objects)} object diffs not shown. Run `gitopsq plan` with `--output text` or "
                 f"`--output json` for all of it.\n")
    return text[:limit]
