"""The per-queue state series (gitopsq/queue_metrics.py): each queue's lines are kept between scrapes and rebuilt
only when its values change; what is served stays prometheus_client's text for the same samples."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from prometheus_client import CollectorRegistry, generate_latest

from gitopsq.admission.topology import build_topology
from gitopsq.api.codec import decode
from gitopsq.exposition import render
from gitopsq.metrics import KueueMetrics

V = "kueue.x-k8s.io/v1beta2"


def _topology(names: list[str], *, stopped: str = "") -> Any:
    docs: list[dict[str, Any]] = [{"apiVersion": V, "kind": "ResourceFlavor", "metadata": {"name": "default"}}]
    for name in names:
        docs.append({"apiVersion": V, "kind": "ClusterQueue", "metadata": {"name": name}, "spec": {
            "cohortName": "all", "resourceGroups": [{"coveredResources": ["cpu"], "flavors": [
                {"name": "default", "resources": [{"name": "cpu", "nominalQuota": "4"}]}]}]}})
        docs.append({"apiVersion": V, "kind": "LocalQueue", "metadata": {"name": f"lq-{name}", "namespace": "ns"},
                     "spec": {"clusterQueue": name, "stopPolicy": "Hold" if name == stopped else "None"}})
    return build_topology([decode(d).obj for d in docs])  # type: ignore[misc]


def _tally(pending: int, reserving: int, cpu: int) -> SimpleNamespace:
    usage = {("default", "cpu"): cpu} if cpu else {}
    return SimpleNamespace(pending=pending, reserving=reserving, admitted=reserving, finished=0, reserved=usage,
                           used=dict(usage))


def _observe(kueue: KueueMetrics, topology: Any, tallies: dict[str, SimpleNamespace]) -> None:
    kueue.observe_queues(topology, tallies, {f"ns/lq-{n}": t for n, t in tallies.items()},
                         [(n, "Pending") for n, t in tallies.items() for _ in range(t.pending)],
                         dict.fromkeys(tallies, 0), active=dict.fromkeys(tallies, 1),
                         lq_active={f"ns/lq-{n}": 1 for n in tallies})


def _line(body: bytes, prefix: str) -> str:
    return next(line for line in body.decode().splitlines() if line.startswith(prefix))


def test_a_changed_queue_is_rendered_anew_and_the_others_are_reused() -> None:
    r = CollectorRegistry()
    kueue = KueueMetrics(r, replica_role="leader")
    topology = _topology(["a", "b", "c"])
    _observe(kueue, topology, {"a": _tally(2, 1, 1500), "b": _tally(0, 0, 0), "c": _tally(5, 2, 4000)})
    first = render(r)
    assert first == generate_latest(r)
    kept_b = kueue.queue_state._cq._kept["b"][2]  # the kept text is what this test is about

    # a: only its quota used changes; c: only its pending count
    _observe(kueue, topology, {"a": _tally(2, 1, 3000), "b": _tally(0, 0, 0), "c": _tally(4, 2, 4000)})
    second = render(r)
    assert second == generate_latest(r)
    assert kueue.queue_state._cq._kept["b"][2] is kept_b  # unchanged: not formatted again
    assert _line(first, 'kueue_cluster_queue_resource_usage{cluster_queue="a"').endswith(" 1.5")
    assert _line(second, 'kueue_cluster_queue_resource_usage{cluster_queue="a"').endswith(" 3.0")
    assert 'kueue_pending_workloads{cluster_queue="c",replica_role="leader",status="inadmissible"} 3.0' in \
        second.decode()
    assert 'kueue_local_queue_resource_usage{flavor="default",name="lq-a",namespace="ns"' in second.decode()


def test_a_queue_gone_from_the_snapshot_is_gone_from_the_answer_and_a_new_topology_counts() -> None:
    r = CollectorRegistry()
    kueue = KueueMetrics(r, replica_role="leader")
    _observe(kueue, _topology(["a", "b"]), {"a": _tally(1, 0, 0), "b": _tally(0, 1, 1000)})
    render(r)
    stopped = _topology(["a"], stopped="a")  # b deleted; a's LocalQueue held: the same tallies, other values
    _observe(kueue, stopped, {"a": _tally(1, 0, 0)})
    body = render(r)
    assert body == generate_latest(r)
    assert 'cluster_queue="b"' not in body.decode() and 'name="lq-b"' not in body.decode()
    assert set(kueue.queue_state._cq._kept) == {"a"}  # forgotten, not kept forever
    assert 'kueue_local_queue_status{active="False",name="lq-a",namespace="ns",replica_role="leader"} 1.0' in \
        body.decode()


def test_no_snapshot_serves_the_families_without_samples() -> None:
    r = CollectorRegistry()
    kueue = KueueMetrics(r, replica_role="leader")
    _observe(kueue, _topology(["a"]), {"a": _tally(1, 0, 0)})
    render(r)
    kueue.queue_state.clear()
    body = render(r)
    assert body == generate_latest(r)
    assert "# TYPE kueue_pending_workloads gauge" in body.decode()
    assert "kueue_pending_workloads{" not in body.decode()
