"""Workloads that finish at the same instant reach the engine one by one, as Kueue's watch events do."""

from __future__ import annotations

import pytest

from gitopsq.simulate.replay import simulate
from gitopsq.simulate.scenario import parse_scenario

# cq-x and cq-y lend nothing and borrow from cq-z, whose 4 cpu are held by running-a and running-b until 10 s.
# small (2 cpu, priority 1) fits in one release; big (4 cpu, priority 5) needs both and comes first when both
# are free. Checked on Kueue v0.19.2 (scripts/differential: StrictFIFO two runs, BestEffortFIFO one).
SCENARIO = """\
objects:
  - {apiVersion: kueue.x-k8s.io/v1beta2, kind: ResourceFlavor, metadata: {name: default}}
  - apiVersion: kueue.x-k8s.io/v1beta2
    kind: ClusterQueue
    metadata: {name: cq-x}
    spec:
      namespaceSelector: {}
      cohortName: pool
      queueingStrategy: STRATEGY
      resourceGroups:
        - coveredResources: [cpu]
          flavors: [{name: default, resources: [{name: cpu, nominalQuota: 0}]}]
  - apiVersion: kueue.x-k8s.io/v1beta2
    kind: ClusterQueue
    metadata: {name: cq-y}
    spec:
      namespaceSelector: {}
      cohortName: pool
      queueingStrategy: STRATEGY
      resourceGroups:
        - coveredResources: [cpu]
          flavors: [{name: default, resources: [{name: cpu, nominalQuota: 0}]}]
  - apiVersion: kueue.x-k8s.io/v1beta2
    kind: ClusterQueue
    metadata: {name: cq-z}
    spec:
      namespaceSelector: {}
      cohortName: pool
      resourceGroups:
        - coveredResources: [cpu]
          flavors: [{name: default, resources: [{name: cpu, nominalQuota: 4}]}]
  - {apiVersion: kueue.x-k8s.io/v1beta2, kind: LocalQueue, metadata: {name: q, namespace: x},
     spec: {clusterQueue: cq-x}}
  - {apiVersion: kueue.x-k8s.io/v1beta2, kind: LocalQueue, metadata: {name: q, namespace: y},
     spec: {clusterQueue: cq-y}}
  - {apiVersion: kueue.x-k8s.io/v1beta2, kind: LocalQueue, metadata: {name: q, namespace: z},
     spec: {clusterQueue: cq-z}}
workloads:
  - name: running-a
    namespace: z
    queue: q
    runtime: RUNTIME_A
    podSets: [{count: 2, requests: {cpu: "1"}}]
    admitted: {clusterQueue: cq-z, flavors: {main: {cpu: default}}, at: -20}
  - name: running-b
    namespace: z
    queue: q
    runtime: 20
    podSets: [{count: 2, requests: {cpu: "1"}}]
    admitted: {clusterQueue: cq-z, flavors: {main: {cpu: default}}, at: -10}
  - {name: small, namespace: x, queue: q, priority: 1, podSets: [{count: 2, requests: {cpu: "1"}}]}
  - {name: big, namespace: y, queue: q, priority: 5, podSets: [{count: 4, requests: {cpu: "1"}}]}
"""


def _admitted(strategy: str, runtime_a: int) -> list[str]:
    text = SCENARIO.replace("STRATEGY", strategy).replace("RUNTIME_A", str(runtime_a))
    result = simulate(parse_scenario(text, "finish-events.yaml"))
    return sorted(key for key, w in result.workloads.items() if w.state == "Admitted")


@pytest.mark.parametrize(("strategy", "runtime_a", "admitted"), [
    pytest.param("StrictFIFO", 30, ["x/small"], id="strict-fifo-head-takes-the-first-release-alone"),
    pytest.param("BestEffortFIFO", 30, ["y/big"], id="parked-heads-wait-for-the-requeue-batch-and-see-both"),
    pytest.param("StrictFIFO", 40, ["x/small"], id="releases-at-different-instants-alike"),
])
def test_a_cycle_runs_between_two_finishes_of_one_instant(strategy: str, runtime_a: int,
                                                          admitted: list[str]) -> None:
    """A head already in its queue's heap gets one cycle after the first finish, before the second is seen."""
    assert _admitted(strategy, runtime_a) == admitted


def test_the_cycle_between_finishes_is_reported_in_order() -> None:
    """small's admission falls between the two Finished events of the instant."""
    text = SCENARIO.replace("STRATEGY", "StrictFIFO").replace("RUNTIME_A", "30")
    result = simulate(parse_scenario(text, "finish-events.yaml"))
    assert [(e.type, e.workload) for e in result.events if e.time == 10.0 and e.type != "QuotaReserved"] == [
        ("Finished", "z/running-a"), ("Admitted", "x/small"), ("Finished", "z/running-b")]
