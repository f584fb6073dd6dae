"""The StrictFIFO-follower exemption of compare.py widened to BestEffortFIFO followers behind a head Kueue pops again
every cycle, pinned on four Kueue v0.19.2 runs of random 190069 (kueue_runs/random-190069.json).

There cq-a's StrictFIFO head job-3 reserves capacity it cannot reclaim in every cycle, so cq-b's BestEffortFIFO head
job-0 is skipped after its nomination ("no longer fits"), requeued at once and popped again (549 logged cycles),
and job-2 behind it is never evaluated: Kueue leaves it without a condition, gitopsq explains it.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from differential.compare import differences, simulate
from differential.generator import generate

RUNS = json.loads((Path(__file__).resolve().parent / "kueue_runs" / "random-190069.json").read_text("utf-8"))["runs"]
SCENARIO = generate(190069)
OURS = simulate(SCENARIO)


def test_gitopsq_retries_the_best_effort_head_and_explains_the_follower() -> None:
    """gitopsq settles job-0 as Kueue's retried head and gives job-2, which no cycle evaluated, its own wording."""
    workloads = OURS["final"]["workloads"]
    assert workloads["team-b/job-0"]["message"] == "Workload no longer fits after processing another workload"
    assert workloads["team-b/job-2"]["message"] == "Waiting behind the head of BestEffortFIFO ClusterQueue cq-b"


@pytest.mark.parametrize("run", RUNS, ids=[r["run"] for r in RUNS])
def test_followers_without_a_condition_are_the_only_difference(run: dict[str, Any]) -> None:
    """In every Kueue run the only differences are the reasons of the two never-evaluated followers (job-1 behind a
    StrictFIFO head, job-2 behind a retried BestEffortFIFO head), and the exemption leaves exactly those out."""
    raw = {(d.workload, d.field) for d in differences(run, OURS)}
    assert raw == {(k, f) for k in ("team-a/job-1", "team-b/job-2") for f in ("reason", "message")}
    assert differences(run, OURS, scenario=SCENARIO) == []


def test_follower_behind_a_parked_best_effort_head_is_compared() -> None:
    """Had Kueue parked job-0 (a NoFit reason: requeued only with the batch), job-2 would have been popped next, so
    its missing condition is a real difference and is reported."""
    run = copy.deepcopy(RUNS[0])
    run["final"]["workloads"]["team-b/job-0"]["message"] = "couldn't assign flavors to pod set main: x"
    ours = copy.deepcopy(OURS)
    ours["final"]["workloads"]["team-b/job-0"]["message"] = "couldn't assign flavors to pod set main: x"
    assert {(d.workload, d.field) for d in differences(run, ours, scenario=SCENARIO)} == {
        ("team-b/job-2", "reason"), ("team-b/job-2", "message")}
