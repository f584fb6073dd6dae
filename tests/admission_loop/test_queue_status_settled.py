"""A queue whose status was found written is not rebuilt while its object, spec and tally stay the same
(queue_status.QueueStatusWriter); any change to one of them rebuilds it, and a wrong status is corrected."""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from typing import Any

import pytest

from gitopsq.admission.topology import build_topology
from gitopsq.admission_loop import queue_status
from gitopsq.admission_loop.queue_status import QueueStatusWriter
from gitopsq.admission_loop.rate_limited import TokenBucket
from gitopsq.api.codec import decode

V = "kueue.x-k8s.io/v1beta2"


class _Objects:
    """The loop's cache port over plain dicts (what the watch would have delivered), no index."""

    def __init__(self) -> None:
        self.objects: dict[str, dict[str, dict[str, Any]]] = {"clusterqueues": {}, "localqueues": {},
                                                               "workloads": {}}
        self.version = 0

    def put(self, name: str, obj: dict[str, Any]) -> None:
        self.version += 1
        obj = copy.deepcopy(obj)
        obj["metadata"]["resourceVersion"] = str(self.version)
        meta = obj["metadata"]
        self.objects[name][f"{meta.get('namespace', '')}/{meta['name']}"] = obj

    def items(self, name: str) -> list[dict[str, Any]]:
        return list(self.objects[name].values())

    def views(self, name: str, decode: Callable[[dict[str, Any]], Any]) -> list[Any]:
        return [decode(o) for o in self.items(name)]

    def indexed(self, name: str, read: Callable[[Any], Any]) -> None:
        return None


class _Writes:
    """Records queue status writes and puts the result back, as the loop's writer does with the answer."""

    def __init__(self, objects: _Objects) -> None:
        self.objects = objects
        self.sent: list[str] = []

    def queue_status(self, resource: str, path: str, status: Mapping[str, Any]) -> dict[str, Any]:
        self.sent.append(path)
        key = next(k for k, o in self.objects.objects[resource].items() if path.endswith("/" + o["metadata"]["name"]))
        obj = {**self.objects.objects[resource][key], "status": copy.deepcopy(dict(status))}
        self.objects.put(resource, obj)
        return obj


def _queues(objects: _Objects, *, nominal: str = "4", store: bool = True) -> Any:
    cq: dict[str, Any] = {"apiVersion": V, "kind": "ClusterQueue", "metadata": {"name": "cq"}, "spec": {
        "resourceGroups": [{"coveredResources": ["cpu"], "flavors": [{"name": "default", "resources": [
            {"name": "cpu", "nominalQuota": nominal}]}]}]}}
    lq: dict[str, Any] = {"apiVersion": V, "kind": "LocalQueue", "metadata": {"name": "lq", "namespace": "ns"},
          "spec": {"clusterQueue": "cq"}}
    for name, obj in (("clusterqueues", cq), ("localqueues", lq)) if store else ():
        old = objects.objects[name].get(f"{obj['metadata'].get('namespace', '')}/{obj['metadata']['name']}")
        objects.put(name, {**obj, "status": (old or {}).get("status") or {}})
    flavor = {"apiVersion": V, "kind": "ResourceFlavor", "metadata": {"name": "default"}}
    return build_topology([decode(d).obj for d in (flavor, cq, lq)])  # type: ignore[misc]


def _workload(name: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "ns", "uid": name, "creationTimestamp": "2026-11-26T00:00:00Z"},
            "spec": {"queueName": "lq", "podSets": [{"name": "main", "count": 1, "template": {"spec": {
                "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}}}]}}


def test_a_settled_queue_is_skipped_until_its_object_spec_or_tally_changes(monkeypatch: pytest.MonkeyPatch) -> None:
    built: list[str] = []
    flavors = queue_status._flavors

    def counted(topology: Any, cq: str, usage: Any, *, borrowed: bool) -> list[dict[str, Any]]:
        built.append(cq)
        return flavors(topology, cq, usage, borrowed=borrowed)

    monkeypatch.setattr(queue_status, "_flavors", counted)
    objects = _Objects()
    writes = _Writes(objects)
    writer = QueueStatusWriter(objects, writes, min_interval=0.0)  # type: ignore[arg-type]
    topology = _queues(objects)
    writer.run(topology, 0.0)  # first statuses written
    assert sorted(writes.sent) == sorted(["/apis/kueue.x-k8s.io/v1beta2/clusterqueues/cq",
                                          "/apis/kueue.x-k8s.io/v1beta2/namespaces/ns/localqueues/lq"])
    writer.run(topology, 1.0)  # the answers came back with new resourceVersions: found written, settled
    built.clear()
    writes.sent.clear()
    writer.run(topology, 2.0)
    assert built == [] and writes.sent == []  # nothing rebuilt, nothing sent

    objects.put("workloads", _workload("w1"))  # the tally changes: rebuilt and written
    writer.run(topology, 3.0)
    assert built and len(writes.sent) == 2
    cq = objects.objects["clusterqueues"]["/cq"]
    assert cq["status"]["pendingWorkloads"] == 1

    built.clear()
    writes.sent.clear()
    broken = copy.deepcopy(cq)
    broken["status"]["pendingWorkloads"] = 7  # someone else wrote a wrong count: a new resourceVersion
    objects.put("clusterqueues", broken)
    writer.run(topology, 4.0)
    assert writes.sent == ["/apis/kueue.x-k8s.io/v1beta2/clusterqueues/cq"]
    assert objects.objects["clusterqueues"]["/cq"]["status"]["pendingWorkloads"] == 1

    writer.run(topology, 5.0)
    built.clear()
    writes.sent.clear()
    wider = _queues(objects, nominal="8", store=False)  # only the topology changed (the same objects)
    writer.run(wider, 6.0)
    assert built == ["cq", "cq"]  # flavorsReservation and flavorsUsage built again for the new quota


def test_count_refreshes_wait_for_their_budget_but_turning_idle_does_not() -> None:
    """Refreshing counts takes a token from the smaller ``refresh`` budget; turning idle or busy (what clients
    wait for) goes out with the refresh budget spent."""
    clock = [0.0]
    objects = _Objects()
    writes = _Writes(objects)
    refresh = TokenBucket(1.0, 2, clock=lambda: clock[0])
    writer = QueueStatusWriter(objects, writes, min_interval=0.0, refresh=refresh,  # type: ignore[arg-type]
                               clock=lambda: clock[0])
    topology = _queues(objects)
    cq = "/apis/kueue.x-k8s.io/v1beta2/clusterqueues/cq"
    lq = "/apis/kueue.x-k8s.io/v1beta2/namespaces/ns/localqueues/lq"

    def pending() -> tuple[int, int]:
        return (objects.objects["clusterqueues"]["/cq"]["status"].get("pendingWorkloads", 0),
                objects.objects["localqueues"]["ns/lq"]["status"].get("pendingWorkloads", 0))

    objects.put("workloads", _workload("w1"))
    writer.run(topology, 0.0)  # idle -> busy: urgent, no refresh token taken
    assert sorted(writes.sent) == [cq, lq] and refresh.level() == 2
    objects.put("workloads", _workload("w2"))
    writer.run(topology, 0.0)  # a count refresh: both queues, both tokens
    assert pending() == (2, 2) and len(writes.sent) == 4
    objects.put("workloads", _workload("w3"))
    writer.run(topology, 0.0)  # the refresh budget is spent: nothing sent, the loop told to come back
    assert pending() == (2, 2) and len(writes.sent) == 4 and writer.deferred

    objects.objects["workloads"].clear()  # busy -> idle: sent with the refresh budget still empty
    writer.run(topology, 0.0)
    assert pending() == (0, 0) and len(writes.sent) == 6
    objects.put("workloads", _workload("w4"))
    objects.put("workloads", _workload("w5"))
    writer.run(topology, 0.0)  # idle -> busy again: at once
    assert pending() == (2, 2)
    objects.put("workloads", _workload("w6"))
    writer.run(topology, 0.0)
    assert pending() == (2, 2)  # refresh still waiting for tokens
    clock[0] = 1.0  # one token back: one of the two queues refreshed, longest-unwritten first
    writer.run(topology, 1.0)
    assert sorted(pending()) == [2, 3]
