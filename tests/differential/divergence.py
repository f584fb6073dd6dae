"""A divergence as a fixed scenario: the scenario that showed it, with Kueue's settled outcome as `expect`.

The files go to tests/scenarios/divergences/ once a person has checked that Kueue's outcome is not itself a
Kueue bug (docs/differential.md); the on-demand runner writes candidates to a scratch directory first.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from differential.compare import Difference, outcomes


def _in_spec_order(message: str, pod_sets: list[str]) -> str:
    """Kueue lists failing pod sets in map order; a fixed scenario states them in the workload's order."""
    def rank(part: str) -> int:
        for i, name in enumerate(pod_sets):
            if part.startswith(f"couldn't assign flavors to pod set {name}:"):
                return i
        return len(pod_sets)

    return "; ".join(sorted(message.split("; "), key=rank))


def kueue_expectations(kueue: dict[str, Any], scenario: dict[str, Any] | None = None) -> dict[str, Any]:
    """`expect` entries for every workload, from the oracle's JSON."""
    expect: dict[str, dict[str, Any]] = {}
    order = {f"{w.get('namespace', 'default')}/{w['name']}": [ps.get("name", "main") for ps in w["podSets"]]
             for w in (scenario or {}).get("workloads") or []}
    raw = kueue["final"]["workloads"]
    for k, o in sorted(outcomes(kueue).items()):
        if o.state in ("Admitted", "QuotaReserved"):
            kind = "admitted" if o.state == "Admitted" else "quotaReserved"
            expect.setdefault(kind, {})[k] = {"clusterQueue": o.cluster_queue,
                                              "flavors": {ps: dict(per) for ps, per in o.flavors}}
        elif o.state == "Pending":
            entry = {}
            if not o.message_unsettled:
                entry = {"reason": o.reason, "message": _in_spec_order(raw[k].get("message", ""), order.get(k, []))}
            expect.setdefault("pending", {})[k] = entry
        else:
            expect.setdefault("finished", {})[k] = {}
        for reason in sorted(o.preempted):
            expect.setdefault("preempted", {})[k] = {"reason": reason}
    return expect


def stable_expectations(first: dict[str, Any], second: dict[str, Any]) -> dict[str, Any]:
    """The `expect` entries and fields on which two Kueue runs of one scenario agree (what Kueue decides, not
    what a race decided)."""
    out: dict[str, Any] = {}
    for kind, entries in first.items():
        for workload, fields in entries.items():
            other = second.get(kind, {}).get(workload)
            if other is None:
                continue
            out.setdefault(kind, {})[workload] = {k: v for k, v in fields.items() if other.get(k) == v}
    return out


def divergence_scenario(scenario: dict[str, Any], kueue: dict[str, Any], diffs: list[Difference],
                        name: str | None = None) -> dict[str, Any]:
    out = {k: v for k, v in scenario.items() if k != "expect"}
    out["name"] = name or scenario["name"]
    found = "; ".join(str(d) for d in diffs)
    out["description"] = (f"Found by tests/differential ({scenario['name']}). Upstream Kueue v0.19.2 settles this "
                          f"scenario as `expect` says; gitopsq differed: {found}")
    out["expect"] = kueue_expectations(kueue, scenario)
    return out


def write(path: Path, scenario: dict[str, Any]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(scenario, sort_keys=False, width=120), encoding="utf-8")
    return path
