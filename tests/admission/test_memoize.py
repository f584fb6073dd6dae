"""The engine's memos (`recall`: remembered nominations, shared candidate lists) change no outcome.

Every scenario under tests/scenarios and a sample of differential generator seeds are simulated with the memos on
and off; the JSON results must be equal byte for byte (what benchmarks/outcomes_dump.py compares across
checkouts, here within one).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from differential.generator import generate

from gitopsq.errors import GitopsqError
from gitopsq.simulate.replay import Simulation, simulate
from gitopsq.simulate.result import to_json
from gitopsq.simulate.scenario import parse_scenario

SCENARIOS = sorted((Path(__file__).parents[1] / "scenarios").rglob("*.yaml"))
SEEDS, CHUNK = 200, 50
SEED_WITH_PENDING = 2  # its last instant nominates pending workloads and searches for victims


def _outcome(text: str, name: str, *, memoize: bool) -> str:
    try:
        return to_json(simulate(parse_scenario(text, name), memoize=memoize))
    except GitopsqError as exc:  # an invalid scenario: its error is its outcome
        return f"error: {type(exc).__name__}: {exc}"


def _differing(cases: list[tuple[str, str]]) -> list[str]:
    return [name for name, text in cases
            if _outcome(text, name, memoize=True) != _outcome(text, name, memoize=False)]


def test_every_scenario_settles_the_same_without_memos() -> None:
    """Each scenario under tests/scenarios gives the same JSON result with the memos on and off."""
    assert len(SCENARIOS) > 50
    assert _differing([(str(p), p.read_text(encoding="utf-8")) for p in SCENARIOS]) == []


@pytest.mark.parametrize("first", range(0, SEEDS, CHUNK))
def test_generated_seeds_settle_the_same_without_memos(first: int) -> None:
    """Differential generator seeds give the same JSON result with the memos on and off."""
    cases = [(f"random-{seed}.yaml", yaml.safe_dump(generate(seed))) for seed in range(first, first + CHUNK)]
    assert _differing(cases) == []


@pytest.mark.parametrize("memoize", [True, False])
def test_memos_remember_only_when_asked(memoize: bool) -> None:
    """With memoize on the memos hold what the last instant computed, with it off they stay empty, so the
    comparisons above compare memoized against fresh computation."""
    sim = Simulation(parse_scenario(yaml.safe_dump(generate(SEED_WITH_PENDING)), "random.yaml"), memoize=memoize)
    sim.run()
    state = sim.engine.state
    assert state.nominations.enabled is memoize and state.candidate_lists.enabled is memoize
    assert (len(state.nominations) > 0) is memoize and (len(state.candidate_lists) > 0) is memoize
