"""How `gitopsq status` shows the fleet (pure): a table with a row per synced source per cluster, the drifted
objects and pending queues under it, or the JSON document; and the exit code (docs/fleet.md "Fleet status").

Exit codes: 0 every cluster was reached and every source is Ready with no drift; 1 some source is not Ready,
has drift, or its drift could not be read; 3 some cluster could not be reached or read (the others are still shown).
"""

from __future__ import annotations

from collections.abc import Sequence

from gitopsq.controller.fleet import ClusterView, SourceView
from gitopsq.errors import EXIT_OK, EXIT_REJECTED, EXIT_RUNTIME


def exit_code(views: Sequence[ClusterView]) -> int:
    if any(not v.reachable for v in views):
        return EXIT_RUNTIME
    if any(_troubled(s) for v in views for s in v.sources):
        return EXIT_REJECTED
    return EXIT_OK


def _troubled(source: SourceView) -> bool:
    return source.ready != "True" or bool(source.drift) or bool(source.drift_error)


def _drift_cell(source: SourceView) -> str:
    if source.drift_error:
        return "unknown"
    return "-" if source.drift is None else str(len(source.drift))


def to_json(views: Sequence[ClusterView]) -> dict[str, object]:
    return {"clusters": [{
        "cluster": v.name, "kubeconfig": v.target.kubeconfig, "context": v.target.context,
        "reachable": v.reachable, "error": v.error or None,
        "sources": [{
            "namespace": s.namespace, "name": s.name, "cluster": s.cluster, "url": s.url,
            "appliedRevision": s.applied, "attemptedRevision": s.attempted, "ready": s.ready, "reason": s.reason,
            "message": s.message,
            "drift": None if s.drift is None else [{"object": o, "state": w} for o, w in s.drift],
            "driftError": s.drift_error or None,
        } for s in v.sources],
        "queues": [{"namespace": q.namespace, "name": q.name, "clusterQueue": q.cluster_queue, "pending": q.pending}
                   for q in v.queues],
    } for v in views], "exitCode": exit_code(views)}


def to_text(views: Sequence[ClusterView]) -> str:
    rows = [("CLUSTER", "SOURCE", "REVISION", "READY", "DRIFT", "PENDING")]
    notes: list[str] = []
    for v in views:
        if not v.reachable:
            rows.append((v.name, "-", "-", "unreachable", "-", "-"))
            notes.append(f"{v.name}: unreachable: {v.error}")
            continue
        pending = str(sum(q.pending for q in v.queues))
        if not v.sources:
            rows.append((v.name, "(no GitSource)", "-", "-", "-", pending))
        for s in v.sources:
            rows.append((v.name, f"{s.namespace}/{s.name}", (s.applied or "none")[:12], s.ready or "-",
                         _drift_cell(s), pending))
            if s.ready != "True" and s.message:
                notes.append(f"{v.name}: {s.namespace}/{s.name} {s.reason}: {s.message}")
            if s.drift_error:
                notes.append(f"{v.name}: drift of {s.namespace}/{s.name} not known: {s.drift_error}")
            notes += [f"{v.name}: {obj} {state}" for obj, state in s.drift or ()]
        notes += [f"{v.name}: queue {q.namespace}/{q.name} -> {q.cluster_queue or '?'}: {q.pending} pending"
                  for q in v.queues if q.pending]
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in rows]
    return "\n".join(lines + (["", *notes] if notes else []))
