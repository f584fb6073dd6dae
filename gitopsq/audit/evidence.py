"""Evidence for auditors (pure): the change log, unapproved changes and per-ClusterQueue admission evidence.

Input is the list of verified records of a period; output is plain data the renderers turn into JSON lines,
CSV and HTML. Rules:
1. a change is a ``sync.attempt`` whose result is ``applied`` or ``partial``;
2. a change lacks a required approval when ``approvalRequired`` is true and one of its ``requiredApprovals``
   (the teams its ownership names, docs/audit.md "Required approvals") has no approval dated before the apply,
   or ``approvalError`` says the approvals could not be checked; an approval dated after the apply is noted as
   retroactive. Records without ``requiredApprovals`` (written before it existed) fall back to: nobody other
   than the commit's author approved it (segregation of duties);
3. a workload's wait is the time from ``times.created`` to its admission; the per-queue wait figures count
   only admissions that stayed within the ClusterQueue's nominal quota (``withinNominalQuota: true``), the
   promise a queue's owners were given;
4. orderings: records by ``seq``; queues by name.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from gitopsq.audit.git_approvals import independent_approvals
from gitopsq.audit.records import parse_time


@dataclass(frozen=True, slots=True)
class Change:
    seq: int
    applied_at: str
    revision: str
    previous_revision: str | None
    result: str
    author: str
    committer: str
    merged_at: str
    signature: str
    approvers: tuple[str, ...]
    approval_required: bool
    objects: tuple[str, ...]
    verdicts: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Unapproved:
    seq: int
    applied_at: str
    revision: str
    author: str
    reason: str


@dataclass(frozen=True, slots=True)
class WaitFigures:
    count: int = 0
    mean_seconds: float = 0.0
    p50_seconds: float = 0.0
    p95_seconds: float = 0.0
    max_seconds: float = 0.0


@dataclass(frozen=True, slots=True)
class Preemption:
    seq: int
    time: str
    workload: str
    reason: str
    message: str
    preempted_by: str


@dataclass(frozen=True, slots=True)
class QueueEvidence:
    cluster_queue: str
    admitted: int
    admitted_within_nominal: int
    wait_within_nominal: WaitFigures
    wait_all: WaitFigures
    preemptions: tuple[Preemption, ...]
    preemption_reasons: tuple[tuple[str, int], ...]
    evictions: tuple[tuple[str, int], ...]
    finished: int


@dataclass(frozen=True, slots=True)
class Evidence:
    since: str | None
    until: str | None
    records: tuple[dict[str, Any], ...]
    changes: tuple[Change, ...]
    unapproved: tuple[Unapproved, ...]
    rejected: tuple[dict[str, Any], ...]
    drift: tuple[dict[str, Any], ...]
    queues: tuple[QueueEvidence, ...]
    counts: dict[str, int] = field(default_factory=dict)


def in_period(entries: Sequence[dict[str, Any]], since: datetime | None,
              until: datetime | None) -> list[dict[str, Any]]:
    """Records whose ``time`` is in ``[since, until)``, by seq."""
    out = []
    for entry in entries:
        when = parse_time(str(entry["time"]))
        if (since is None or when >= since) and (until is None or when < until):
            out.append(entry)
    return sorted(out, key=lambda e: int(e["seq"]))


def _person(commit: dict[str, Any] | None, role: str) -> str:
    who = (commit or {}).get(role) or {}
    return f"{who.get('name', '')} <{who.get('email', '')}>" if who else ""


def _object(change: dict[str, Any]) -> str:
    where = f"{change.get('namespace')}/" if change.get("namespace") else ""
    return f"{change.get('action')} {change.get('kind')} {where}{change.get('name')}"


def _verdict(verdict: dict[str, Any]) -> str:
    outcome = "allowed" if verdict.get("allowed") else "denied"
    return f"{verdict.get('policy')} on {verdict.get('object')}: {outcome} ({verdict.get('severity')}) " \
           f"{verdict.get('message', '')}".rstrip()


def _change(entry: dict[str, Any]) -> Change:
    commit = entry.get("commit") or {}
    approvals = entry.get("approvals") or []
    return Change(
        seq=int(entry["seq"]), applied_at=str(entry["time"]), revision=str(entry.get("revision")),
        previous_revision=entry.get("previousRevision"), result=str(entry.get("result")),
        author=_person(commit, "author"), committer=_person(commit, "committer"),
        merged_at=str((commit.get("committer") or {}).get("time", "")),
        signature=_signature(commit.get("signature") or {}),
        approvers=tuple(f"{a.get('name')} <{a.get('email')}> ({a.get('source')})" for a in approvals),
        approval_required=bool(entry.get("approvalRequired")),
        objects=tuple(_object(c) for c in entry.get("changes") or [] if c.get("action") != "unchanged"),
        verdicts=tuple(_verdict(v) for v in entry.get("verdicts") or []),
    )


def _signature(sig: dict[str, Any]) -> str:
    state = str(sig.get("state") or "unsigned")
    return f"{state} by {sig['signer']}" if sig.get("signer") else state


def _missing_team(need: dict[str, Any], applied: datetime) -> str | None:
    """Why a required team's approval is missing at ``applied``, or None when it was there."""
    given = list(need.get("approvedBy") or [])
    if any("time" not in a or parse_time(str(a["time"])) <= applied for a in given):
        return None
    team = need.get("team")
    if given:
        return f"{team}: approved only after it was applied (retroactive approval)"
    maintainers = [str(m) for m in need.get("maintainers") or [] if "<" in str(m)]
    if not maintainers:
        return f"{team}: the team lists no maintainer with an email, so nobody could approve"
    return f"{team}: no approval by a maintainer other than the change's authors ({', '.join(maintainers)})"


def _unapproved(entry: dict[str, Any]) -> Unapproved | None:
    if not entry.get("approvalRequired"):
        return None
    commit = entry.get("commit") or {}
    if "requiredApprovals" in entry or "approvalError" in entry:
        applied_at = parse_time(str(entry["time"]))
        problems = [f"approvals could not be checked: {entry['approvalError']}"] if entry.get("approvalError") \
            else []
        problems += [p for p in (_missing_team(n, applied_at) for n in entry.get("requiredApprovals") or []) if p]
        if not problems:
            return None
        return Unapproved(int(entry["seq"]), str(entry["time"]), str(entry.get("revision")),
                          _person(commit, "author"), "; ".join(problems))
    author_email = ((commit.get("author") or {}).get("email"))
    independent = independent_approvals(list(entry.get("approvals") or []), author_email)
    applied = parse_time(str(entry["time"]))
    before = [a for a in independent if "time" not in a or parse_time(str(a["time"])) <= applied]
    if before:
        return None
    if independent:
        reason = "approved only after it was applied (retroactive approval)"
    elif entry.get("approvals"):
        reason = "approved only by its own author"
    else:
        reason = "no approval found in the Git history"
    return Unapproved(int(entry["seq"]), str(entry["time"]), str(entry.get("revision")),
                      _person(commit, "author"), reason)


def _figures(waits: list[float]) -> WaitFigures:
    if not waits:
        return WaitFigures()
    ordered = sorted(waits)

    def pct(p: float) -> float:
        return ordered[min(len(ordered) - 1, max(0, round(p * len(ordered) + 0.5) - 1))]

    return WaitFigures(len(ordered), sum(ordered) / len(ordered), pct(0.5), pct(0.95), ordered[-1])


def _wait(entry: dict[str, Any]) -> float | None:
    times = entry.get("times") or {}
    if "created" not in times:
        return None
    admitted = times.get("admitted") or entry["time"]
    return max(0.0, (parse_time(str(admitted)) - parse_time(str(times["created"]))).total_seconds())


def _workload(ref: dict[str, Any] | None) -> str:
    return f"{ref.get('namespace')}/{ref.get('name')}" if ref else ""


def _queues(entries: list[dict[str, Any]]) -> tuple[QueueEvidence, ...]:
    by_queue: dict[str, list[dict[str, Any]]] = {}
    for entry in entries:
        if str(entry["type"]).startswith("admission."):
            by_queue.setdefault(str(entry.get("clusterQueue")), []).append(entry)
    out = []
    for name in sorted(by_queue):
        items = by_queue[name]
        admitted = [e for e in items if e["type"] == "admission.admitted"]
        nominal = [e for e in admitted if e.get("withinNominalQuota") is True]
        preempted = [e for e in items if e["type"] == "admission.preempted"]
        out.append(QueueEvidence(
            cluster_queue=name, admitted=len(admitted), admitted_within_nominal=len(nominal),
            wait_within_nominal=_figures([w for w in map(_wait, nominal) if w is not None]),
            wait_all=_figures([w for w in map(_wait, admitted) if w is not None]),
            preemptions=tuple(Preemption(int(e["seq"]), str(e["time"]), _workload(e.get("workload")),
                                         str(e.get("reason", "")), str(e.get("message", "")),
                                         _workload(e.get("preemptedBy"))) for e in preempted),
            preemption_reasons=tuple(sorted(Counter(str(e.get("reason", "")) for e in preempted).items())),
            evictions=tuple(sorted(Counter(str(e.get("reason", "")) for e in items
                                           if e["type"] == "admission.evicted").items())),
            finished=sum(1 for e in items if e["type"] == "admission.finished"),
        ))
    return tuple(out)


def build_evidence(entries: Sequence[dict[str, Any]], *, since: datetime | None = None,
                   until: datetime | None = None) -> Evidence:
    chosen = in_period(entries, since, until)
    applied = [e for e in chosen if e["type"] == "sync.attempt" and e.get("result") in ("applied", "partial")]
    unapproved = [u for u in map(_unapproved, applied) if u is not None]
    return Evidence(
        since=since.isoformat() if since else None, until=until.isoformat() if until else None,
        records=tuple(chosen), changes=tuple(_change(e) for e in applied), unapproved=tuple(unapproved),
        rejected=tuple(e for e in chosen if e["type"] == "sync.rejected"
                       or (e["type"] == "sync.attempt" and e.get("result") == "rejected")),
        drift=tuple(e for e in chosen if e["type"] == "sync.drift_corrected"),
        queues=_queues(chosen),
        counts=dict(sorted(Counter(str(e["type"]) for e in chosen).items())),
    )
