"""Divergences found by differential runs, fixed as scenarios with upstream Kueue's outcome as `expect`.

tests/scenarios/divergences/*.yaml: `gitopsq simulate` must meet each `expect` (quick run — these fail until
the engine is fixed); and, under the ``differential`` marker, upstream Kueue must still settle each scenario
that way, so an expectation never drifts from what Kueue does.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from differential.compare import simulate
from differential.divergence import kueue_expectations

KUEUE_RUNS = 3  # as for random cases (test_against_kueue.py)
DIVERGENCES = sorted((Path(__file__).resolve().parents[1] / "scenarios" / "divergences").glob("*.yaml"))
IDS = [p.stem for p in DIVERGENCES]


def _raw(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load(path.read_text(encoding="utf-8"))
    return data


def _load(path: Path) -> dict[str, Any]:
    """The scenario itself (``knownDivergence`` is this suite's bookkeeping, not part of the scenario format)."""
    return {k: v for k, v in _raw(path).items() if k != "knownDivergence"}


def _unmet(expect: dict[str, Any], result: dict[str, Any], scenario: dict[str, Any]) -> list[str]:
    """Each `expect` entry that ``result`` (oracle or simulator JSON) contradicts."""
    got = kueue_expectations(result, scenario)
    problems = []
    for kind, entries in (expect or {}).items():
        for workload, fields in (entries or {}).items():
            actual = got.get(kind, {}).get(workload)
            if actual is None:
                where = {k: v[workload] for k, v in got.items() if workload in v}
                problems.append(f"{kind} {workload}: got {where}")
                continue
            for name, value in (fields or {}).items():
                have = actual.get(name)
                ok = (all((have or {}).get(ps, {}).get(r) == f for ps, per in value.items() for r, f in per.items())
                      if name == "flavors" else have == value)
                if not ok:
                    problems.append(f"{kind} {workload} {name}: expected {value!r}, got {have!r}")
    return problems


def _engine_cases() -> list[Any]:
    """One case per divergence file. A file that still carries ``knownDivergence: <why>`` is a strict xfail
    (issue 11; docs/differential.md "Status"): it must still fail, so the marker goes as soon as the engine
    matches Kueue."""
    cases = []
    for path in DIVERGENCES:
        known = _raw(path).get("knownDivergence")
        marks = [pytest.mark.xfail(strict=True, reason=f"issue 11, docs/differential.md: {known}")] if known else []
        cases.append(pytest.param(path, id=path.stem, marks=marks))
    return cases


@pytest.mark.parametrize("path", _engine_cases())
def test_gitopsq_settles_divergence_as_kueue(path: Path) -> None:
    """gitopsq settles a scenario on which it once diverged exactly as upstream Kueue v0.19.2 does."""
    scenario = _load(path)
    problems = _unmet(scenario["expect"], simulate(scenario), scenario)
    assert not problems, "\n".join(problems)


@pytest.mark.differential
@pytest.mark.envtest
@pytest.mark.parametrize("path", DIVERGENCES, ids=IDS)
def test_kueue_still_settles_divergence_as_expected(path: Path, kueue_oracle: Any) -> None:
    """Upstream Kueue still settles each fixed divergence as its `expect` says (the expectation is Kueue's), in one
    of up to `KUEUE_RUNS` runs: a few of these scenarios sit on a Kueue race (when the job controller clears a
    victim's reservation), which a loaded machine tips the other way now and then."""
    scenario = _load(path)
    runs = []
    for _ in range(KUEUE_RUNS):
        problems = _unmet(scenario["expect"], kueue_oracle.run(scenario), scenario)
        if not problems:
            return
        runs.append(problems)
    pytest.fail("\n".join(f"Kueue run {i}: " + "; ".join(p) for i, p in enumerate(runs, start=1)))
