"""Kueue outcomes decided by when the rig completed a preemption's eviction (differential.eviction_timing), pinned
on the four outcomes Kueue v0.19.2 gave for random 150013 in five runs (kueue_runs/random-150013.json).

Run 4 (both victims held until nothing moved, then cleared together) was an alternate timing while the engine
released a victim after one more cycle; since the engine holds victims until their cohort tree is quiet and then
releases them together, run 4 is the engine's own outcome and needs no tolerance. The other three stay pinned to
the timing that reproduces each: run 1 to the release in the preemption's own cycle, the batch run (and run 3) to
List order one cycle apart, run 2 to List order two cycles apart.
"""

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
OWN_OUTCOME = simulate(SCENARIO)  # the engine's own timing: victims held until their tree is quiet, then together
IN_THEIR_CYCLE, AFTER_ONE_MORE_CYCLE, LIST_ORDER_ONE_APART, LIST_ORDER_TWO_APART = (name for name, _ in TIMINGS)


def _kueue(run: str) -> dict[str, Any]:
    return copy.deepcopy(next(r for r in RUNS if r["run"].startswith(run)))


def test_kueues_run_with_both_victims_cleared_together_when_quiet_is_the_engines_own_outcome() -> None:
    """Run 4 (job-0 and running-0 on flavor-a, job-5 on flavor-b) is what the engine settles with its own timing."""
    assert differences(_kueue("run 4"), OWN_OUTCOME, scenario=SCENARIO) == []


@pytest.mark.parametrize(("run", "timing"), [
    pytest.param("run 1", IN_THEIR_CYCLE, id="running-2-released-before-the-next-cycle-job-1-takes-flavor-a"),
    pytest.param("batch", LIST_ORDER_ONE_APART, id="both-victims-held-running-0-released-first-job-5-takes-flavor-a"),
    pytest.param("run 2", LIST_ORDER_TWO_APART, id="running-0-released-two-cycles-before-running-2-which-comes-back"),
])
def test_each_other_kueue_outcome_is_gitopsq_with_the_rigs_release_timing(run: str, timing: str) -> None:
    """Each of Kueue's other outcomes differs from gitopsq's and is gitopsq's exactly, messages and amounts
    included, once the victims release their quota when the driver released them in that run."""
    kueue = _kueue(run)
    diffs = differences(kueue, OWN_OUTCOME, scenario=SCENARIO)
    assert diffs
    assert other_eviction_timing(kueue, SCENARIO, diffs) == timing


@pytest.mark.parametrize("timing", [
    pytest.param(IN_THEIR_CYCLE, id="in-the-preemptions-own-cycle"),
    pytest.param(AFTER_ONE_MORE_CYCLE, id="after-one-more-cycle-as-37a94d1"),
    pytest.param(LIST_ORDER_ONE_APART, id="list-order-one-cycle-apart"),
    pytest.param(LIST_ORDER_TWO_APART, id="list-order-two-cycles-apart"),
])
def test_each_timing_settles_150013_its_own_way(timing: str) -> None:
    """Every alternate timing changes gitopsq's outcome of 150013, so none of them is the engine's rule again."""
    make = dict(TIMINGS)[timing]
    with released_as(make()):
        assert simulate(SCENARIO) != OWN_OUTCOME


def test_no_preemption_in_the_tree_is_a_divergence() -> None:
    """Without a preemption Kueue made in the tree of every difference, no other timing is tried."""
    kueue = _kueue("run 1")
    kueue["events"] = [e for e in kueue["events"] if e["type"] != "Preempted"]
    diffs = differences(kueue, OWN_OUTCOME, scenario=SCENARIO)
    assert diffs and preemption_trees(kueue, SCENARIO) == set()
    assert other_eviction_timing(kueue, SCENARIO, diffs) is None


def test_an_outcome_no_timing_reaches_is_a_divergence() -> None:
    """A Kueue outcome that differs in something no release timing changes stays a divergence."""
    kueue = _kueue("batch")
    kueue["final"]["workloads"]["team-b/job-2"]["flavors"] = {"main": {"cpu": "flavor-a"}}
    diffs = differences(kueue, OWN_OUTCOME, scenario=SCENARIO)
    assert other_eviction_timing(kueue, SCENARIO, diffs) is None


def test_the_engine_gets_its_own_timing_back() -> None:
    """The engine's release rule is restored after each alternative, so later simulations are unaffected."""
    with released_as(dict(TIMINGS)[LIST_ORDER_ONE_APART]()):
        assert simulate(SCENARIO) != OWN_OUTCOME
    assert simulate(SCENARIO) == OWN_OUTCOME
