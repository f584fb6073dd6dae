"""Preemption while earlier victims are still being evicted, decided on live state as Kueue decides it.

Kueue's scheduler marks victims Evicted and waits: its cache keeps counting them until their jobs have stopped,
its candidate ordering takes workloads already being evicted first (preemption/common/ordering.go), and a victim
whose eviction it has issued but not yet seen is not evicted again (preemption expectations). Each cycle tries one
head per ClusterQueue, so the head that is waiting for its victims keeps the ClusterQueue's next head from
preempting until it is admitted.
"""

from __future__ import annotations

from typing import Any

from gitopsq.admission_loop.decisions import decide
from gitopsq.admission_loop.live_workload import ADMITTED, EVICTING, LiveWorkload, read_workload, topology_of

NOW = 1_893_456_000.0  # 2030-01-01T00:00:00Z


def _queues(nominal: str) -> list[dict[str, Any]]:
    return [
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": "rf"}},
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ns"}},
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": "cq"},
         "spec": {"namespaceSelector": {}, "preemption": {"withinClusterQueue": "LowerPriority"},
                  "resourceGroups": [{"coveredResources": ["cpu"], "flavors": [
                      {"name": "rf", "resources": [{"name": "cpu", "nominalQuota": nominal}]}]}]}},
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue", "metadata": {"name": "lq", "namespace": "ns"},
         "spec": {"clusterQueue": "cq"}},
    ]


def _workload(name: str, *, cpu: str, priority: int, created: str, admitted_at: str | None = None,
              evicted: bool = False) -> LiveWorkload:
    conditions: list[dict[str, str]] = []
    status: dict[str, Any] = {"conditions": conditions}
    if admitted_at is not None:
        conditions += [{"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved",
                        "lastTransitionTime": admitted_at},
                       {"type": "Admitted", "status": "True", "reason": "Admitted", "lastTransitionTime": admitted_at}]
        status["admission"] = {"clusterQueue": "cq", "podSetAssignments": [
            {"name": "main", "flavors": {"cpu": "rf"}, "resourceUsage": {"cpu": cpu}, "count": 1}]}
    if evicted:
        conditions.append({"type": "Evicted", "status": "True", "reason": "Preempted",
                           "lastTransitionTime": "2029-12-31T23:59:59Z"})
    w = read_workload({
        "metadata": {"name": name, "namespace": "ns", "uid": f"inflight-{name}-{created}-{evicted}",
                     "resourceVersion": "1", "generation": 1, "creationTimestamp": created},
        "spec": {"queueName": "lq", "priority": priority, "podSets": [{"name": "main", "count": 1, "template": {
            "spec": {"containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": cpu}}}]}}}]},
        "status": status})
    assert w is not None
    return w


def test_an_inflight_victim_is_taken_first_and_not_joined_by_another() -> None:
    """The head needs 2 cpu; one victim of an earlier preemption (2 cpu) is still being evicted, so Kueue's
    ordering picks it again and issues nothing new: the other running workload, admitted later, keeps running."""
    victim = _workload("victim", cpu="2", priority=0, created="2029-12-31T22:00:00Z",
                       admitted_at="2029-12-31T22:00:01Z", evicted=True)
    running = _workload("running", cpu="2", priority=0, created="2029-12-31T23:00:00Z",
                        admitted_at="2029-12-31T23:00:01Z")
    head = _workload("high", cpu="2", priority=100, created="2029-12-31T23:59:58Z")
    assert (victim.state, running.state) == (EVICTING, ADMITTED)
    live = {w.key: w for w in (victim, running, head)}
    decisions = decide(topology_of(_queues("4")), live, NOW)
    assert decisions.evict == {}
    assert decisions.admit == {}


def test_one_head_per_cluster_queue_preempts_until_its_victims_are_gone() -> None:
    """Two high-priority workloads wait behind four running low-priority ones in a full ClusterQueue. Kueue tries
    one head per ClusterQueue per cycle: the first head's victims are evicted now; the second head's turn comes
    once the first is admitted, by which time work that finished meanwhile may have made room without preemption."""
    low = [_workload(f"low-{i}", cpu="1", priority=0, created=f"2029-12-31T22:0{i}:00Z",
                     admitted_at=f"2029-12-31T22:0{i}:01Z") for i in range(4)]
    high = [_workload(f"high-{i}", cpu="2", priority=100, created=f"2029-12-31T23:59:5{i}Z") for i in range(2)]
    live = {w.key: w for w in (*low, *high)}
    decisions = decide(topology_of(_queues("4")), live, NOW)
    assert sorted(decisions.evict) == ["ns/low-2", "ns/low-3"]  # the most recently admitted first
    assert decisions.admit == {}
