"""gitopsq's admission engine against upstream Kueue v0.19.2 on the same inputs (marker ``differential``).

Random scenarios: `case_count()` seeds from `base_seed()` (conftest.py). A failure prints every differing
field and writes the scenario, with Kueue's outcome as `expect`, under pytest's temporary directory — the
candidate for tests/scenarios/divergences/ once checked (docs/differential.md).
Hand-written scenarios: each tests/scenarios/*.yaml the oracle can reproduce must hold on Kueue as well, so
the suite's expectations are Kueue's and not only our reading of it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from differential import kueue_objects
from differential.compare import differences, mask_counts, other_scan_phase, preemption_cycle_trees, simulate
from differential.conftest import base_seed, case_count, handwritten_sample
from differential.divergence import divergence_scenario, kueue_expectations, write
from differential.eviction_timing import other_eviction_timing
from differential.generator import generate

pytestmark = [pytest.mark.differential, pytest.mark.envtest]

SCENARIOS = Path(__file__).resolve().parents[1] / "scenarios"


def _reproducible(path: Path) -> bool:
    try:
        kueue_objects.plan(yaml.safe_load(path.read_text(encoding="utf-8")))
    except kueue_objects.UnsupportedScenarioError:
        return False
    return True


HANDWRITTEN = handwritten_sample([p for p in sorted(SCENARIOS.glob("*.yaml")) if _reproducible(p)])
SEEDS = [base_seed() + i for i in range(case_count())]


KUEUE_RUNS = 3  # a divergent case is replayed on Kueue up to this many times in all (see below)


@pytest.mark.parametrize("seed", SEEDS, ids=[f"seed-{s}" for s in SEEDS])
def test_random_scenario_settles_as_on_kueue(seed: int, kueue_oracle: Any, tmp_path: Path) -> None:
    """A generated scenario settles in gitopsq as upstream Kueue settles it (state, queue, flavors, pending reason,
    message modulo its "N more needed" amounts, preemptions)."""
    scenario = generate(seed)
    ours = simulate(scenario)
    runs: list[dict[str, Any]] = []
    for _ in range(KUEUE_RUNS):
        # Kueue decides some cases by timing (which of two cycles saw a release first, which phase of an
        # alternating flavor scan a head was in when capacity came: compare.other_scan_phase; how many cycles a
        # victim held its quota: eviction_timing): a case gitopsq settles as one of Kueue's runs does is settled
        # as Kueue can; an outcome no run shows diverges.
        runs.append(kueue_oracle.run(scenario))
        diffs = differences(runs[-1], ours, scenario=scenario, counts=False)
        if (not diffs or other_scan_phase(runs[-1], scenario, diffs, counts=False)
                or other_eviction_timing(runs[-1], scenario, diffs, counts=False)):
            return
    diffs = differences(runs[0], ours, scenario=scenario, counts=False)
    saved = write(tmp_path / f"random-{seed}.yaml", divergence_scenario(scenario, runs[0], diffs))
    others = [f"run {i + 1}: " + "; ".join(map(str, differences(r, ours, scenario=scenario, counts=False)))
              for i, r in enumerate(runs[1:], start=1)]
    pytest.fail(f"{len(diffs)} difference(s) in each of {len(runs)} Kueue runs; scenario with Kueue's first outcome in "
                f"{saved}:\n  " + "\n  ".join(map(str, diffs)) + "\n" + "\n".join(others))


def test_preemption_cycle_does_not_stall_the_replay(kueue_oracle: Any) -> None:
    """Random 120109: Kueue preempts team-a/running-2 by reclamation, re-admits it in the freed room and preempts
    it again, hundreds of times (once for over 60 s); the driver stops waiting for that cohort tree once a workload
    is preempted twice at one instant, and the comparison skips it (compare.preemption_cycle_trees)."""
    scenario = generate(120109)
    kueue = kueue_oracle.run(scenario)
    preempted = [e for e in kueue["events"] if e["type"] == "Preempted" and e["workload"] == "team-a/running-2"]
    if len(preempted) > 1:  # the cycle ran (a race can end it at once, then the tree is compared as usual)
        assert preemption_cycle_trees(kueue, scenario) == {"cohort/pool"}
    assert not differences(kueue, simulate(scenario), scenario=scenario, counts=False)


def _unmet(expect: dict[str, Any], kueue: dict[str, Any], scenario: dict[str, Any]) -> list[str]:
    got = kueue_expectations(kueue, scenario)
    problems = []
    for kind, entries in (expect or {}).items():
        for workload, fields in (entries or {}).items():
            actual = got.get(kind, {}).get(workload)
            if actual is None:
                where = [k for k, v in got.items() if workload in v]
                problems.append(f"{kind} {workload}: Kueue has it as {where} {[got[k][workload] for k in where]}")
                continue
            for name, value in (fields or {}).items():
                have = actual.get(name)
                if name == "flavors":
                    ok = all(have.get(ps, {}).get(r) == f for ps, per in value.items() for r, f in per.items())
                elif name == "message":  # amounts are timing-dependent on Kueue (compare.py, ``counts``)
                    ok = mask_counts(str(have)) == mask_counts(str(value))
                else:
                    ok = have == value
                if not ok:
                    problems.append(f"{kind} {workload} {name}: expected {value!r}, Kueue {have!r}")
    return problems


@pytest.mark.parametrize("path", HANDWRITTEN, ids=[p.stem for p in HANDWRITTEN])
def test_handwritten_expectations_hold_on_kueue(path: Path, kueue_oracle: Any) -> None:
    """Every `expect` of a hand-written scenario is also upstream Kueue's outcome for that scenario (in one of up
    to `KUEUE_RUNS` runs, as for random cases: Kueue decides a few things by timing)."""
    scenario = yaml.safe_load(path.read_text(encoding="utf-8"))
    runs = []
    for _ in range(KUEUE_RUNS):
        problems = _unmet(scenario.get("expect") or {}, kueue_oracle.run(scenario), scenario)
        if not problems:
            return
        runs.append(problems)
    pytest.fail("\n".join(f"Kueue run {i}: " + "; ".join(p) for i, p in enumerate(runs, start=1)))
