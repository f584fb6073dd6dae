"""The scenario suite: each tests/scenarios/*.yaml pins one Kueue rule, replayed through `gitopsq simulate`.

Three layers of checking, all independent of the engine's own `expect` checker:
1. `expect` (the scenario's outcomes, derived by hand from Kueue's documented behaviour) is checked against the
   `--output json` object by this module, and `simulate` itself must agree (exit 0);
2. `pins/<name>.yaml` holds what `expect` cannot say (event order and times, workloads that must see no event,
   final usage, per-ClusterQueue counts, evictions);
3. `golden/<name>.json` is the whole JSON output, written only after it was checked by hand against 1 and 2.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from gitopsq.cli import cli

HERE = Path(__file__).resolve().parent
SCENARIOS = sorted(HERE.glob("*.yaml"))
NAMES = [p.stem for p in SCENARIOS]
PINS = {p.stem: p for p in sorted((HERE / "pins").glob("*.yaml"))}
GOLDEN = {p.stem: p for p in sorted((HERE / "golden").glob("*.json"))}


@cache
def _load(name: str) -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load((HERE / f"{name}.yaml").read_text(encoding="utf-8"))
    return data


@cache
def _run(name: str) -> tuple[int, str, str]:
    """Exit code, stdout (the JSON object) and stderr of `gitopsq simulate <name>.yaml --output json`."""
    result = CliRunner().invoke(cli, ["simulate", str(HERE / f"{name}.yaml"), "--output", "json"])
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result.exit_code, result.stdout, result.stderr


def _output(name: str) -> dict[str, Any]:
    code, out, err = _run(name)
    assert out.strip(), f"simulate printed nothing (exit {code}): {err}"
    parsed: dict[str, Any] = json.loads(out)
    return parsed


def _final(name: str, workload: str) -> dict[str, Any]:
    workloads = _output(name)["final"]["workloads"]
    assert workload in workloads, f"{workload} missing from final.workloads"
    entry: dict[str, Any] = workloads[workload]
    return entry


def _check_placement(name: str, workload: str, state: str, want: dict[str, Any]) -> None:
    got = _final(name, workload)
    assert got["state"] == state, f"{workload}: expected {state}, got {got}"
    if "clusterQueue" in want:
        assert got.get("clusterQueue") == want["clusterQueue"], f"{workload}: {got}"
    if "flavors" in want:
        assert got.get("flavors") == want["flavors"], f"{workload}: expected flavors {want['flavors']}, got {got}"


def _check_expect(name: str) -> None:
    expect = _load(name)["expect"]
    for workload, want in (expect.get("admitted") or {}).items():
        _check_placement(name, workload, "Admitted", want or {})
    for workload, want in (expect.get("quotaReserved") or {}).items():
        _check_placement(name, workload, "QuotaReserved", want or {})
    for workload in expect.get("finished") or {}:
        assert _final(name, workload)["state"] == "Finished", f"{workload}: {_final(name, workload)}"
    for workload, want in (expect.get("pending") or {}).items():
        got = _final(name, workload)
        assert got["state"] == "Pending", f"{workload}: expected Pending, got {got}"
        for field in ("reason", "message"):
            if field in (want or {}):
                assert got.get(field) == want[field], f"{workload}: expected {field} {want[field]!r}, got {got}"
    events = _output(name)["events"]
    for workload, want in (expect.get("preempted") or {}).items():
        reasons = [e.get("reason") for e in events if e["workload"] == workload and e["type"] == "Preempted"]
        assert reasons, f"{workload} was never preempted; events: {_events_of(events, workload)}"
        if want and "reason" in want:
            assert want["reason"] in reasons, f"{workload}: preempted with {reasons}, expected {want['reason']}"


def _events_of(events: list[dict[str, Any]], workload: str) -> list[tuple[float, str, str]]:
    return [(e["time"], e["type"], e.get("reason", "")) for e in events if e["workload"] == workload]


def _check_pins(name: str) -> None:
    pins = yaml.safe_load(PINS[name].read_text(encoding="utf-8"))
    output = _output(name)
    events = output["events"]
    if "events" in pins:
        # The pinned events must appear in this order (other events may come between them).
        position = 0
        for want in pins["events"]:
            for index in range(position, len(events)):
                e = events[index]
                same = (e["workload"], e["type"], float(e["time"])) == (want["workload"], want["type"],
                                                                        float(want["time"]))
                if same and ("reason" not in want or e.get("reason") == want["reason"]):
                    position = index + 1
                    break
            else:
                raise AssertionError(f"event {want} not found in order; events: "
                                     f"{[(e['time'], e['workload'], e['type']) for e in events]}")
    for workload in pins.get("noEvents", []):
        assert not _events_of(events, workload), f"{workload} should see no event: {_events_of(events, workload)}"
    for cq, usage in (pins.get("usage") or {}).items():
        got = output["final"]["clusterQueues"][cq]["usage"]
        assert got == usage, f"{cq}: expected usage {usage}, got {got}"
    for cq, counts in (pins.get("queues") or {}).items():
        got = output["final"]["clusterQueues"][cq]
        assert {k: got.get(k) for k in counts} == counts, f"{cq}: expected {counts}, got {got}"
    for workload, want in (pins.get("evicted") or {}).items():
        evictions = [e for e in events if e["workload"] == workload and e["type"] == "Evicted"]
        assert evictions, f"{workload} was never evicted; events: {_events_of(events, workload)}"
        assert any(all(e.get(k) == v for k, v in want.items()) for e in evictions), \
            f"{workload}: evictions {evictions}, expected {want}"


def test_suite_has_at_least_forty_scenarios() -> None:
    """The suite holds at least forty scenario files (issue 4, item 10)."""
    assert len(SCENARIOS) >= 40, len(SCENARIOS)


@pytest.mark.parametrize("name", NAMES)
def test_scenario_file_states_one_rule_with_reasoning(name: str) -> None:
    """A scenario names itself after its file, explains its Kueue rule in `description` and expects outcomes."""
    data = _load(name)
    assert data["name"] == name
    assert len(data.get("description", "")) >= 80, "the description must carry the reasoning"
    assert data.get("expect"), "a scenario without expectations pins nothing"


@pytest.mark.parametrize("name", NAMES)
def test_scenario_outcome_matches_kueue(name: str) -> None:
    """`gitopsq simulate --output json` ends every expected workload as Kueue would, and simulate agrees (exit 0)."""
    _check_expect(name)
    code, _, err = _run(name)
    assert code == 0, f"simulate exited {code}: {err}"


@pytest.mark.parametrize("name", sorted(PINS))
def test_scenario_timeline_pins_hold(name: str) -> None:
    """Event order and times, untouched workloads, final usage and evictions pinned for the scenario hold."""
    assert name in NAMES, f"pins/{name}.yaml has no scenario"
    _check_pins(name)


@pytest.mark.parametrize("name", sorted(GOLDEN))
def test_scenario_output_matches_hand_checked_golden(name: str) -> None:
    """The whole JSON output equals the golden file that was checked by hand, byte for byte."""
    assert name in NAMES, f"golden/{name}.json has no scenario"
    _, out, _ = _run(name)
    assert out == GOLDEN[name].read_text(encoding="utf-8")
