"""Kueue outcomes decided by when the rig completed a preemption's eviction (differential.eviction_timing), pinned
on the four outcomes Kueue v0.19.2 gave for random 150013 in five runs (kueue_runs/random-150013.json)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from differential.compare import differences, simulate
from differential.eviction_timing import TIMINGS, other_eviction_timing, preemption_trees, released_as
from differential.generator import generate

RUNS = json.loads((Path(__file__).resolve().parent / "kueue_runs" / "random-150013.json").read_text("utf-8"))["runs"]
SCENARIO = generate(150013)
NEXT_CYCLE_OUTCOME = simulate(SCENARIO)  # gitopsq's own timing: a victim holds its quota for one more cycle


def _kueue(run: str) -> dict[str, Any]:
    return copy.deepcopy(next(r for r in RUNS if r["run"].startswith(run)))


@pytest.mark.parametrize(("run", "timing"), [
    pytest.param("run 1", TIMINGS[0][0], id="running-2-released-before-the-next-cycle-job-1-takes-flavor-a"),
    pytest.param("run 4", TIMINGS[1][0], id="both-victims-released-at-once-job-0-first-job-5-takes-flavor-b"),
    pytest.param("batch", TIMINGS[2][0], id="both-victims-held-running-0-released-first-job-5-takes-flavor-a"),
    pytest.param("run 2", TIMINGS[3][0], id="running-0-released-two-cycles-before-running-2-which-comes-back"),
])
def test_each_kueue_outcome_is_gitopsq_with_the_rigs_release_timing(run: str, timing: str) -> None:
    """Each of Kueue's outcomes differs from gitopsq's and is gitopsq's exactly, messages and amounts included,
    once the victims release their quota when the driver released them in that run."""
    kueue = _kueue(run)
    diffs = differences(kueue, NEXT_CYCLE_OUTCOME, scenario=SCENARIO)
    assert diffs
    assert other_eviction_timing(kueue, SCENARIO, diffs) == timing


def test_no_preemption_in_the_tree_is_a_divergence() -> None:
    """Without a preemption Kueue made in the tree of every difference, no other timing is tried."""
    kueue = _kueue("run 1")
    kueue["events"] = [e for e in kueue["events"] if e["type"] != "Preempted"]
    diffs = differences(kueue, NEXT_CYCLE_OUTCOME, scenario=SCENARIO)
    assert diffs and preemption_trees(kueue, SCENARIO) == set()
    assert other_eviction_timing(kueue, SCENARIO, diffs) is None


def test_an_outcome_no_timing_reaches_is_a_divergence() -> None:
    """A Kueue outcome that differs in something no release timing changes stays a divergence."""
    kueue = _kueue("batch")
    kueue["final"]["workloads"]["team-b/job-2"]["flavors"] = {"main": {"cpu": "flavor-a"}}
    diffs = differences(kueue, NEXT_CYCLE_OUTCOME, scenario=SCENARIO)
    assert other_eviction_timing(kueue, SCENARIO, diffs) is None


def test_the_engine_gets_its_own_timing_back() -> None:
    """The engine's release timing is restored after each alternative, so later simulations are unaffected."""
    _, make = TIMINGS[2]
    with released_as(make()):
        assert simulate(SCENARIO) != NEXT_CYCLE_OUTCOME
    assert simulate(SCENARIO) == NEXT_CYCLE_OUTCOME
