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
from differential.compare import differences, simulate
from differential.conftest import base_seed, case_count
from differential.divergence import divergence_scenario, kueue_expectations, write
from differential.generator import generate

pytestmark = [pytest.mark.differential, pytest.mark.envtest]

SCENARIOS = Path(__file__).resolve().parents[1] / "scenarios"


def _reproducible(path: Path) -> bool:
    try:
        kueue_objects.plan(yaml.safe_load(path.read_text(encoding="utf-8")))
    except kueue_objects.UnsupportedScenarioError:
        return False
    return True


HANDWRITTEN = [p for p in sorted(SCENARIOS.glob("*.yaml")) if _reproducible(p)]
SEEDS = [base_seed() + i for i in range(case_count())]


@pytest.mark.parametrize("seed", SEEDS, ids=[f"seed-{s}" for s in SEEDS])
def test_random_scenario_settles_as_on_kueue(seed: int, kueue_oracle: Any, tmp_path: Path) -> None:
    """A generated scenario settles in gitopsq exactly as upstream Kueue settles it (state, queue, flavors,
    pending reason and message, preemptions)."""
    scenario = generate(seed)
    kueue, ours = kueue_oracle.run(scenario), simulate(scenario)
    diffs = differences(kueue, ours, scenario=scenario)
    if diffs:
        # Confirm on a second Kueue run: an outcome Kueue itself does not repeat is a tie the generator let
        # through, not a divergence (gitopsq matching either legitimate outcome passes).
        again = kueue_oracle.run(scenario)
        if not differences(again, ours, scenario=scenario):
            return
        if differences(again, kueue):
            pytest.fail(f"Kueue settled seed {seed} two ways (an ambiguous tie): "
                        + "; ".join(map(str, differences(again, kueue))))
        saved = write(tmp_path / f"random-{seed}.yaml", divergence_scenario(scenario, kueue, diffs))
        pytest.fail(f"{len(diffs)} difference(s), scenario with Kueue's outcome in {saved}:\n  "
                    + "\n  ".join(map(str, diffs)))


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
                else:
                    ok = have == value
                if not ok:
                    problems.append(f"{kind} {workload} {name}: expected {value!r}, Kueue {have!r}")
    return problems


@pytest.mark.parametrize("path", HANDWRITTEN, ids=[p.stem for p in HANDWRITTEN])
def test_handwritten_expectations_hold_on_kueue(path: Path, kueue_oracle: Any) -> None:
    """Every `expect` of a hand-written scenario is also upstream Kueue's outcome for that scenario."""
    scenario = yaml.safe_load(path.read_text(encoding="utf-8"))
    problems = _unmet(scenario.get("expect") or {}, kueue_oracle.run(scenario), scenario)
    assert not problems, "\n".join(problems)
