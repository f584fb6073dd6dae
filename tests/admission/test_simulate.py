"""`gitopsq simulate`: scenario parsing, the replay loop, the JSON contract, expectations, the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from gitopsq.admission.topology import Settings
from gitopsq.commands.simulate import command
from gitopsq.errors import ScenarioError
from gitopsq.simulate.replay import failed_expectations, simulate
from gitopsq.simulate.result import to_json
from gitopsq.simulate.scenario import parse_scenario

OBJECTS = """\
objects:
  - {apiVersion: kueue.x-k8s.io/v1beta2, kind: ResourceFlavor, metadata: {name: default}}
  - apiVersion: kueue.x-k8s.io/v1beta2
    kind: ClusterQueue
    metadata: {name: cq}
    spec:
      namespaceSelector: {}
      resourceGroups:
        - coveredResources: [cpu]
          flavors: [{name: default, resources: [{name: cpu, nominalQuota: "4"}]}]
  - {apiVersion: kueue.x-k8s.io/v1beta2, kind: LocalQueue, metadata: {name: q, namespace: ns}, spec: {clusterQueue: cq}}
"""

TRACE = OBJECTS + """\
workloads:
  - {name: first, namespace: ns, queue: q, runtime: 60, podSets: [{name: main, count: 4, requests: {cpu: "1"}}]}
  - {name: second, namespace: ns, queue: q, submitAt: 10, runtime: 30, podSets: [{count: 2, requests: {cpu: "1"}}]}
"""


def test_replay_orders_finish_before_admission_and_reports_waits() -> None:
    """The second workload waits until the first finishes at 60 s, then runs; waits and counts follow."""
    result = simulate(parse_scenario(TRACE, "s.yaml"))
    timeline = [(e.time, e.type, e.workload) for e in result.events if e.type in ("Admitted", "Finished")]
    assert timeline == [(0.0, "Admitted", "ns/first"), (60.0, "Finished", "ns/first"),
                        (60.0, "Admitted", "ns/second"), (90.0, "Finished", "ns/second")]
    assert result.waits["cq"] == (0.0, 50.0)
    assert result.end == 90.0


def test_json_contract_shape_and_determinism() -> None:
    """--output json has events, final and summary as documented, and two runs print the same bytes."""
    scenario = parse_scenario(TRACE + "horizon: 30\n", "s.yaml")
    first, second = to_json(simulate(scenario)), to_json(simulate(scenario))
    assert first == second
    data = json.loads(first)
    assert list(data) == ["events", "final", "summary"]
    assert data["final"]["workloads"]["ns/second"]["state"] == "Pending"
    assert data["final"]["workloads"]["ns/second"]["reason"] == "WaitingForQuota"
    assert data["final"]["clusterQueues"]["cq"] == {"usage": {"default": {"cpu": "4"}}, "pending": 1, "admitted": 1}
    assert data["summary"]["admitted"] == 1 and data["summary"]["utilisation"]["cq"] == 1.0
    assert data["events"][0] == {"time": 0.0, "workload": "ns/first", "type": "QuotaReserved", "clusterQueue": "cq",
                                 "flavors": {"main": {"cpu": "default"}}, "reason": "QuotaReserved",
                                 "message": "Quota reserved in ClusterQueue cq"}


def test_initial_admitted_state_produces_no_events_and_holds_quota() -> None:
    """An `admitted` workload holds quota from the start without an event, and finishes at at + runtime."""
    text = OBJECTS + """\
workloads:
  - name: old
    namespace: ns
    queue: q
    runtime: 100
    podSets: [{count: 4, requests: {cpu: "1"}}]
    admitted: {clusterQueue: cq, flavors: {main: {cpu: default}}, at: -30}
  - {name: new, namespace: ns, queue: q, runtime: 10, podSets: [{count: 1, requests: {cpu: "1"}}]}
"""
    result = simulate(parse_scenario(text, "s.yaml"))
    assert [(e.time, e.type, e.workload) for e in result.events][:3] == [
        (70.0, "Finished", "ns/old"), (70.0, "QuotaReserved", "ns/new"), (70.0, "Admitted", "ns/new")]


def test_admission_check_timing_from_the_scenario() -> None:
    """A check declared Ready after 30 s keeps the workload QuotaReserved until then."""
    text = OBJECTS.replace("namespaceSelector: {}", "namespaceSelector: {}\n      admissionChecksStrategy: "
                           "{admissionChecks: [{name: prov}]}") + """\
  - {apiVersion: kueue.x-k8s.io/v1beta2, kind: AdmissionCheck, metadata: {name: prov}, spec: {controllerName: x}}
settings:
  admissionChecks: {prov: {state: Ready, after: 30}}
workloads:
  - {name: w, namespace: ns, queue: q, podSets: [{count: 1, requests: {cpu: "1"}}]}
horizon: 20
"""
    result = simulate(parse_scenario(text, "s.yaml"))
    assert result.workloads["ns/w"].state == "QuotaReserved"
    later = simulate(parse_scenario(text.replace("horizon: 20", "horizon: 40"), "s.yaml"))
    assert later.workloads["ns/w"].state == "Admitted"


@pytest.mark.parametrize(("text", "fragment"), [
    pytest.param(OBJECTS.replace('nominalQuota: "4"', 'nominalQuota: "4x"'), "s.yaml:10", id="invalid-quantity"),
    pytest.param(OBJECTS.replace("namespaceSelector", "namespaceSelecter"), "s.yaml:7", id="misspelt-field"),
    pytest.param(OBJECTS + "workloads:\n  - {name: w, podSets: [{count: 1}]}\n", "queue is required",
                 id="missing-queue"),
    pytest.param("objects: [\n", "s.yaml:2", id="broken-yaml"),
    pytest.param(OBJECTS.replace('nominalQuota: "4"', 'nominalQuota: "4", lendingLimit: "9"'),
                 "s.yaml:10: error: ClusterQueue/cq: lendingLimit of default/cpu is 9", id="check-rules-apply"),
    pytest.param(OBJECTS + "workloads:\n  - {name: w, queue: q, podSets: [{count: 1}], admitted: {clusterQueue: "
                 "nope}}\n", "not a ClusterQueue of this scenario", id="admitted-in-unknown-queue"),
    pytest.param("settings: {inadmissibleRequeue: Sometimes}\n" + OBJECTS, "inadmissibleRequeue",
                 id="unknown-requeue-mode"),
    pytest.param("settings: {featureGates: {TopologyAwareScheduling: true}}\n" + OBJECTS, "TopologyAwareScheduling",
                 id="unsupported-feature-gate"),
])
def test_invalid_scenarios_raise_with_file_and_line(text: str, fragment: str) -> None:
    """Bad input is a ScenarioError naming the file and line, like `gitopsq check`."""
    with pytest.raises(ScenarioError) as err:
        parse_scenario(text, "s.yaml")
    assert fragment in str(err.value)


def test_failed_expectation_names_its_line() -> None:
    """An expectation the run contradicts is reported as file:line with what happened instead."""
    text = TRACE + "horizon: 30\nexpect:\n  admitted:\n    ns/second: {clusterQueue: cq}\n"
    scenario = parse_scenario(text, "s.yaml")
    failures = failed_expectations(scenario, simulate(scenario))
    assert len(failures) == 1
    line = text.splitlines().index("    ns/second: {clusterQueue: cq}") + 1
    assert failures[0].startswith(f"s.yaml:{line}: expected ns/second to be Admitted, but it is Pending in cq")


@pytest.mark.parametrize(("expect", "code"), [
    pytest.param("  finished: {ns/first: {}}\n", 0, id="expectations-hold-exit-0"),
    pytest.param("  pending: {ns/first: {reason: WaitingForQuota}}\n", 1, id="expectations-fail-exit-1"),
])
def test_cli_exit_codes(tmp_path: Path, expect: str, code: int) -> None:
    """The command exits 0 when expectations hold and 1 when one fails, printing the failure on stderr."""
    path = tmp_path / "s.yaml"
    path.write_text(TRACE + "expect:\n" + expect, encoding="utf-8")
    result = CliRunner().invoke(command, [str(path), "--output", "json"])
    assert result.exit_code == code, result.output
    assert json.loads(result.stdout)["summary"]["finished"] == 2
    assert ("expectation failed" in result.stderr) is (code == 1)


def test_workload_submitted_after_the_horizon_is_reported_pending() -> None:
    """A workload whose submitAt lies beyond the horizon is listed as Pending, NotYetSubmitted."""
    result = simulate(parse_scenario(TRACE + "horizon: 5\n", "s.yaml"))
    final = result.workloads["ns/second"]
    assert (final.state, final.reason) == ("Pending", "NotYetSubmitted")


@pytest.mark.parametrize(("settings", "expected"), [
    pytest.param("", Settings(), id="defaults-decide-as-kueue"),
    pytest.param("settings: {inadmissibleRequeue: Immediate, fairSharing: {lookAhead: true}, featureGates: "
                 "{FlavorFungibilityPreserveScanProgress: false}}\n",
                 Settings(fair_sharing=True, inadmissible_requeue="Immediate", fair_sharing_look_ahead=True,
                          preserve_flavor_scan_progress=False), id="every-departure-set"),
])
def test_scenario_settings_reach_the_engine(settings: str, expected: Settings) -> None:
    """The scenario's settings block becomes the engine's Settings, Kueue's defaults when absent."""
    assert parse_scenario(settings + TRACE, "s.yaml").settings == expected
