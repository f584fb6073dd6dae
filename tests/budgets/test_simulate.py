"""Budgets in simulation scenarios: compiled exactly as `render` compiles them, their preferred-flavor
semantics visible in the outcome, and a bad Budget reported at its line in the scenario file."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from gitopsq.api import model as m
from gitopsq.errors import ScenarioError
from gitopsq.simulate.replay import failed_expectations, simulate
from gitopsq.simulate.scenario import parse_scenario

SCENARIO = Path(__file__).with_name("budget-committed-before-burst.yaml")


def test_scenario_meets_its_expectations_through_the_cli() -> None:
    """`gitopsq simulate` runs the Budget scenario and every expectation holds (exit 0)."""
    result = subprocess.run([sys.executable, "-m", "gitopsq", "simulate", str(SCENARIO)], capture_output=True,
                            text=True, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "team-a/second  Admitted  team-a-gpu    h100" in result.stdout


def test_budget_stands_for_its_compiled_queues() -> None:
    """A scenario's Budget becomes one ClusterQueue and one LocalQueue per served namespace."""
    scenario = parse_scenario(SCENARIO.read_text(encoding="utf-8"), str(SCENARIO))
    kinds = sorted(f"{o.KIND}/{o.meta.namespace or ''}/{o.meta.name}" for o in scenario.objects
                   if isinstance(o, m.ClusterQueue | m.LocalQueue))
    assert kinds == ["ClusterQueue//team-a-gpu", "ClusterQueue//team-b-gpu", "LocalQueue/team-a/gpu",
                     "LocalQueue/team-b/team-b-gpu"]


def test_kueue_default_fungibility_would_borrow_instead() -> None:
    """With Kueue's default flavorFungibility the second job borrows on a100; the Budget's TryNextFlavor uses the
    h100 commitment first, which is the difference the compiled setting exists for."""
    scenario = parse_scenario(SCENARIO.read_text(encoding="utf-8"), str(SCENARIO))
    assert not failed_expectations(scenario, simulate(scenario))
    defaults = tuple(replace(o, flavor_fungibility=m.FlavorFungibility()) if isinstance(o, m.ClusterQueue) else o
                     for o in scenario.objects)
    result = simulate(replace(scenario, objects=defaults))
    assert result.workloads["team-a/second"].state == "Admitted"
    assert dict(result.workloads["team-a/second"].flavors)["main"] == {"nvidia.com/gpu": "a100"}
    assert dict(simulate(scenario).workloads["team-a/second"].flavors)["main"] == {"nvidia.com/gpu": "h100"}


def test_bad_budget_in_scenario_names_its_line() -> None:
    """A Budget whose burst is below its commitment fails the scenario with file:line of that burst."""
    text = SCENARIO.read_text(encoding="utf-8").replace("burst: {nvidia.com/gpu: 4}", "burst: {nvidia.com/gpu: 1}")
    with pytest.raises(ScenarioError) as err:
        parse_scenario(text, "s.yaml")
    line = next(i for i, t in enumerate(text.splitlines(), 1) if "burst: {nvidia.com/gpu: 1}" in t)
    assert f"s.yaml:{line}" in str(err.value) and "budget-burst-below-committed" in str(err.value)
