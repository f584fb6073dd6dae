"""Renderers for evidence: JSON lines, CSV and a static HTML report (pure text out).

The HTML report is one self-contained page: inline CSS, plain tables, no scripts, every value escaped, so an
auditor can open it from a zip file with any browser and nothing else.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Sequence
from html import escape
from typing import Any

from gitopsq.audit.canonical import canonical_json
from gitopsq.audit.evidence import Evidence, WaitFigures

RECORD_COLUMNS = ("seq", "time", "type", "id", "subject", "outcome", "clusterQueue", "author", "approvedBy",
                  "details", "hash")


def to_jsonl(evidence: Evidence) -> str:
    return "".join(canonical_json(entry) + "\n" for entry in evidence.records)


def _subject(entry: dict[str, Any]) -> str:
    if "workload" in entry:
        workload = entry["workload"] or {}
        return f"{workload.get('namespace')}/{workload.get('name')}"
    return str(entry.get("revision", ""))


def _record_row(entry: dict[str, Any]) -> list[str]:
    commit = entry.get("commit") or {}
    author = (commit.get("author") or {}).get("email", "")
    approvers = "; ".join(str(a.get("email")) for a in entry.get("approvals") or [])
    details = entry.get("message") or ""
    if entry.get("changes"):
        details = "; ".join(f"{c.get('action')} {c.get('kind')} {c.get('name')}" for c in entry["changes"])
    return [str(entry.get("seq")), str(entry.get("time")), str(entry.get("type")), str(entry.get("id")),
            _subject(entry), str(entry.get("result") or entry.get("reason") or ""),
            str(entry.get("clusterQueue") or ""), str(author), approvers, str(details), str(entry.get("hash"))]


def _csv(header: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(header)
    for row in rows:
        # A leading = + - @ would run as a formula in a spreadsheet; an apostrophe keeps it text.
        writer.writerow(["'" + str(v) if str(v)[:1] in ("=", "+", "-", "@") else v for v in row])
    return out.getvalue()


def records_csv(evidence: Evidence) -> str:
    return _csv(RECORD_COLUMNS, (_record_row(e) for e in evidence.records))


def changes_csv(evidence: Evidence) -> str:
    unapproved = {u.seq: u.reason for u in evidence.unapproved}
    header = ("seq", "appliedAt", "revision", "previousRevision", "result", "author", "committer", "mergedAt",
              "signature", "approvedBy", "approvalRequired", "approvalProblem", "objects", "policyVerdicts")
    return _csv(header, ([c.seq, c.applied_at, c.revision, c.previous_revision or "", c.result, c.author,
                          c.committer, c.merged_at, c.signature, "; ".join(c.approvers), c.approval_required,
                          unapproved.get(c.seq, ""), "; ".join(c.objects), "; ".join(c.verdicts)]
                         for c in evidence.changes))


def queues_csv(evidence: Evidence) -> str:
    header = ("clusterQueue", "admitted", "admittedWithinNominalQuota", "waitWithinNominalMeanSeconds",
              "waitWithinNominalP95Seconds", "waitWithinNominalMaxSeconds", "preemptions", "preemptionReasons",
              "evictions", "finished")
    return _csv(header, ([q.cluster_queue, q.admitted, q.admitted_within_nominal,
                          f"{q.wait_within_nominal.mean_seconds:.1f}", f"{q.wait_within_nominal.p95_seconds:.1f}",
                          f"{q.wait_within_nominal.max_seconds:.1f}", len(q.preemptions),
                          "; ".join(f"{r}={n}" for r, n in q.preemption_reasons),
                          "; ".join(f"{r}={n}" for r, n in q.evictions), q.finished] for q in evidence.queues))


_STYLE = """body{font-family:sans-serif;margin:2em;max-width:75em;color:#222}
table{border-collapse:collapse;margin:0.5em 0 1.5em}th,td{border:1px solid #999;padding:0.3em 0.5em;
text-align:left;vertical-align:top;font-size:0.9em}th{background:#eee}.bad{color:#a00;font-weight:bold}
.ok{color:#060;font-weight:bold}code{font-size:0.85em}"""


def _table(header: Sequence[str], rows: Iterable[Sequence[Any]], empty: str) -> str:
    body = "".join("<tr>" + "".join(f"<td>{_cell(v)}</td>" for v in row) + "</tr>\n" for row in rows)
    if not body:
        return f"<p>{escape(empty)}</p>\n"
    head = "".join(f"<th>{escape(h)}</th>" for h in header)
    return f"<table><thead><tr>{head}</tr></thead><tbody>\n{body}</tbody></table>\n"


def _cell(value: Any) -> str:
    if isinstance(value, list | tuple):
        return "<br>".join(escape(str(v)) for v in value) or "—"
    return escape(str(value)) if value not in (None, "") else "—"


def _wait(figures: WaitFigures) -> str:
    if not figures.count:
        return "no admissions"
    return (f"{figures.count} workloads: mean {figures.mean_seconds:.0f} s, median {figures.p50_seconds:.0f} s, "
            f"95th percentile {figures.p95_seconds:.0f} s, longest {figures.max_seconds:.0f} s")


def to_html(evidence: Evidence, verification: dict[str, Any], *, title: str = "gitopsq audit report") -> str:
    ok = bool(verification.get("ok"))
    head = verification.get("head") or {}
    period = f"{evidence.since or 'the beginning'} to {evidence.until or 'now'}"
    parts = [f"<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{escape(title)}</title>",
             f"<style>{_STYLE}</style></head><body>\n<h1>{escape(title)}</h1>\n",
             f"<p>Period: {escape(period)}. Audit branch <code>{escape(str(verification.get('branch')))}</code>, "
             f"commit <code>{escape(str(verification.get('tip')))}</code>.</p>\n<h2>Integrity</h2>\n"]
    if ok:
        parts.append(f"<p class=\"ok\">The audit trail is intact: {verification.get('records')} records, "
                     f"hash chain head {escape(str(head.get('seq')))} "
                     f"<code>sha256:{escape(str(head.get('hash')))}</code>.</p>\n")
    else:
        problems = verification.get("problems") or []
        parts.append("<p class=\"bad\">The audit trail FAILED verification; treat this report with caution.</p>")
        parts.append(_table(("problem", "file", "line", "seq", "commit", "explanation"),
                            ([p.get("kind"), p.get("file"), p.get("line"), p.get("seq"), p.get("commit"),
                              p.get("message")] for p in problems), ""))
    counts = ", ".join(f"{n} {t}" for t, n in evidence.counts.items()) or "none"
    parts.append(f"<p>Records in the period: {escape(counts)}.</p>\n")
    parts.append("<h2>Changes applied without a required approval</h2>\n<p>Changes whose owners (the teams "
                 "gitopsq.yaml names for the files and global objects they change) had to approve them, applied "
                 "without an approval by such an owner other than their author recorded in the Git history.</p>\n")
    parts.append(_table(("record", "applied at", "revision", "author", "problem"),
                        ([u.seq, u.applied_at, u.revision, u.author, u.reason] for u in evidence.unapproved),
                        "None: every change that required an approval had one before it was applied."))
    parts.append("<h2>Change log</h2>\n<p>Every revision applied to the cluster: what changed, who wrote it, "
                 "who approved it, when it was merged and applied, and what the policies decided.</p>\n")
    parts.append(_table(("record", "applied at", "revision", "result", "author", "merged at", "approved by",
                         "signature", "objects changed", "policy verdicts"),
                        ([c.seq, c.applied_at, c.revision, c.result, c.author, c.merged_at, c.approvers,
                          c.signature, c.objects, c.verdicts] for c in evidence.changes),
                        "No change was applied in this period."))
    parts.append("<h2>Rejected revisions</h2>\n<p>Revisions that validation or policy refused; the cluster kept "
                 "the previous revision.</p>\n")
    parts.append(_table(("record", "time", "revision", "reason", "message"),
                        ([e.get("seq"), e.get("time"), e.get("revision"), e.get("reason") or e.get("result"),
                          e.get("message")] for e in evidence.rejected), "No revision was rejected."))
    parts.append("<h2>Drift corrections</h2>\n<p>Objects changed in the cluster outside Git and put back to the "
                 "approved revision: evidence of unauthorised changes being detected.</p>\n")
    parts.append(_table(("record", "time", "revision", "objects put back"),
                        ([e.get("seq"), e.get("time"), e.get("revision"),
                          [f"{c.get('kind')} {c.get('name')}" for c in e.get("changes") or []]]
                         for e in evidence.drift), "No drift was corrected."))
    parts.append("<h2>Admission evidence per ClusterQueue</h2>\n<p>How long workloads waited for admission when "
                 "their queue stayed within its nominal (guaranteed) quota, and every preemption with its "
                 "reason.</p>\n")
    parts.append(_table(("ClusterQueue", "admitted", "within nominal quota", "wait within nominal quota",
                         "preemptions by reason", "evictions by reason", "finished"),
                        ([q.cluster_queue, q.admitted, q.admitted_within_nominal, _wait(q.wait_within_nominal),
                          [f"{r or 'unspecified'}: {n}" for r, n in q.preemption_reasons],
                          [f"{r or 'unspecified'}: {n}" for r, n in q.evictions], q.finished]
                         for q in evidence.queues), "No admission activity in this period."))
    preemptions = [p for q in evidence.queues for p in q.preemptions]
    if preemptions:
        parts.append("<h3>Preemptions</h3>\n")
        parts.append(_table(("record", "time", "workload preempted", "reason", "preempted for", "message"),
                            ([p.seq, p.time, p.workload, p.reason, p.preempted_by, p.message]
                             for p in sorted(preemptions, key=lambda p: p.seq)), ""))
    parts.append("<h2>How to check this report</h2>\n<p>Each record carries a sequence number and a SHA-256 hash "
                 "that covers its content and the hash of the record before it, so changing, removing or "
                 "reordering any record breaks the chain. Run <code>gitopsq audit verify REPO</code> against "
                 "the audit branch, or compare the checksums in the bundle's <code>SHA256SUMS</code> file.</p>\n"
                 "</body></html>\n")
    return "".join(parts)
