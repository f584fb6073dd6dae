"""`gitopsq plan` output for a repository with clusters (docs/fleet.md): a section per cluster the pull request
changes, the clusters it leaves alone named once. One implicit cluster renders exactly as a single plan."""

from __future__ import annotations

import json
from typing import Any

from gitopsq.plan.fleet_plan import FleetPlan
from gitopsq.plan.render_json import plan_json
from gitopsq.plan.render_markdown import LIMIT, MARKER, render_markdown
from gitopsq.plan.render_text import count_phrase, render_text, revision


def _summary(fleet: FleetPlan) -> list[str]:
    out = []
    for p in fleet.plans:
        state = "rejected" if p.plan.rejected else ("changed" if p.changed else "left alone")
        out.append(f"{p.cluster}: {state} ({count_phrase(p.plan.counts)})")
    out.extend(f"{name}: removed from gitopsq.yaml (its controller no longer has a revision to sync)"
               for name in fleet.removed)
    return out


def fleet_text(fleet: FleetPlan) -> str:
    if fleet.implicit:
        return render_text(fleet.first)
    first = fleet.first
    out = [f"gitopsq plan {first.repository}: base {revision(first.base)} → head {revision(first.head)}, "
           f"{len(fleet.plans)} cluster(s)"]
    out.extend(f"  {line}" for line in _summary(fleet))
    for p in fleet.changed:
        out += ["", f"══ cluster {p.cluster} ══", render_text(p.plan).rstrip("\n")]
    if fleet.unchanged:
        out += ["", f"Clusters left alone (no object changes, accepted): {', '.join(fleet.unchanged)}"]
    mark = "✗ rejected" if fleet.rejected else "✓ accepted"
    bad = [p.cluster for p in fleet.plans if p.plan.rejected]
    out += ["", f"{mark}: head {revision(first.head)} on {len(fleet.plans)} cluster(s)"
            + (f"; rejected on {', '.join(bad)}" if bad else "")]
    return "\n".join(out) + "\n"


def fleet_markdown(fleet: FleetPlan, *, limit: int = LIMIT) -> str:
    """The PR comment: the fleet summary, then each changed cluster's plan within an equal share of ``limit``."""
    if fleet.implicit:
        return render_markdown(fleet.first, limit=limit)
    first = fleet.first
    status = "❌ rejected" if fleet.rejected else "✅ accepted"
    head = [MARKER, f"### gitopsq plan: {status} ({len(fleet.plans)} clusters)", "",
            f"base `{revision(first.base)}` → head `{revision(first.head)}`", ""]
    head.extend(f"- `{line.split(':', 1)[0]}`:{line.split(':', 1)[1]}" for line in _summary(fleet))
    if fleet.unchanged:
        head += ["", f"Left alone: {', '.join(f'`{n}`' for n in fleet.unchanged)}"]
    text = "\n".join(head) + "\n"
    changed = fleet.changed
    share = (limit - len(text) - 200) // max(len(changed), 1)
    for p in changed:
        body = render_markdown(p.plan, limit=max(share, 2_000)).split("\n")
        body = [line for line in body if line != MARKER]
        if body and body[0].startswith("### gitopsq plan:"):
            body[0] = f"### Cluster `{p.cluster}`:" + body[0].removeprefix("### gitopsq plan:")
        text += "\n" + "\n".join(body)
    return text[:limit]


def fleet_json_doc(fleet: FleetPlan) -> dict[str, Any]:
    """One implicit cluster: the single plan's object as before; else the fleet object of
    docs/fleet.md: revisions, verdict, ``clusters`` (each a plan object with ``cluster`` and ``changed``),
    ``unchangedClusters`` and ``removedClusters``."""
    if fleet.implicit:
        return plan_json(fleet.first)
    first = plan_json(fleet.first)
    return {"version": first["version"], "repository": first["repository"], "base": first["base"],
            "head": first["head"], "history": first["history"],
            "verdict": "rejected" if fleet.rejected else "accepted",
            "clusters": [{"cluster": p.cluster, "changed": p.changed, **plan_json(p.plan)} for p in fleet.plans],
            "unchangedClusters": list(fleet.unchanged), "removedClusters": list(fleet.removed)}


def fleet_json(fleet: FleetPlan) -> str:
    return json.dumps(fleet_json_doc(fleet), indent=2, ensure_ascii=False, default=str)
