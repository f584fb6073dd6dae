"""Pins what the fixed divergence flavor-rank-follows-preference-230042 cannot say in `expect` (which has no way to
state "never preempted"): under PreemptionOverBorrowing a flavor ranks by its most-borrowing resource, so job-1
takes flavor-b instead of preempting running-1 on flavor-a (Kueue v0.19.2 flavorassigner, isPreferred)."""
from __future__ import annotations

from pathlib import Path

import yaml

from differential.compare import simulate

SCENARIO = (Path(__file__).resolve().parents[1] / "scenarios" / "divergences"
            / "flavor-rank-follows-preference-230042.yaml")


def test_preemption_over_borrowing_ranks_flavor_by_its_borrowing() -> None:
    """job-1 preempts only running-3 (flavor-b), never running-1, whose flavor-a would still borrow cpu."""
    result = simulate(yaml.safe_load(SCENARIO.read_text()))
    preempted = sorted({e["workload"] for e in result["events"] if e["type"] == "Preempted"})
    assert preempted == ["team-b/running-3"]
