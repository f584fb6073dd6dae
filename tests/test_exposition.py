"""The /metrics text (gitopsq/exposition.py): byte for byte what prometheus_client writes, served over HTTP."""

from __future__ import annotations

import gzip
import urllib.request
from types import SimpleNamespace

from prometheus_client import PLATFORM_COLLECTOR, CollectorRegistry, generate_latest

from gitopsq.admission.topology import build_topology
from gitopsq.api.codec import decode
from gitopsq.exposition import render
from gitopsq.metrics import KueueMetrics, SyncMetrics, serve

V = "kueue.x-k8s.io/v1beta2"


def registry() -> CollectorRegistry:
    """Every kind of series the controller serves, with label values that need escaping (the process and GC
    collectors' values move between two reads, so only the platform's static series stand for them)."""
    r = CollectorRegistry()
    r.register(PLATFORM_COLLECTOR)
    kueue = KueueMetrics(r, replica_role="leader")
    SyncMetrics(r, source="https://example.test/queues.git").syncs.labels("ok").inc()
    for i, pc in enumerate(["", 'quo"ted', "back\\slash", "new\nline"]):
        w = SimpleNamespace(priority_class=pc, queue=f"q{i}", namespace="ns", cluster_queue=f"cq{i}", key=f"ns/w{i}",
                            uid=f"u{i}")
        kueue.admitted(w, f"cq{i}", 3.5 * i, checks=False)
        kueue.evicted(w, "Preempted", "InClusterQueue", "preemptor path: /cq0; preemptee path: /cq1;")
    topology = build_topology([decode(d).obj for d in (  # type: ignore[misc]
        {"apiVersion": V, "kind": "ResourceFlavor", "metadata": {"name": "default"}},
        {"apiVersion": V, "kind": "ClusterQueue", "metadata": {"name": "cq0"}, "spec": {"cohortName": "all",
         "resourceGroups": [{"coveredResources": ["cpu"], "flavors": [{"name": "default", "resources": [
             {"name": "cpu", "nominalQuota": "4", "borrowingLimit": "2"}]}]}]}},
        {"apiVersion": V, "kind": "LocalQueue", "metadata": {"name": "q0", "namespace": "ns"},
         "spec": {"clusterQueue": "cq0"}})])
    tally = SimpleNamespace(pending=2, reserving=1, admitted=1, finished=3, reserved={("default", "cpu"): 1500},
                            used={("default", "cpu"): 1500})
    kueue.observe_queues(topology, {"cq0": tally}, {"ns/q0": tally}, [("cq0", "Pending")] * 2, {"cq0": 3},
                         active={"cq0": 1}, lq_active={"ns/q0": 1})
    return r


def test_render_is_generate_latest_byte_for_byte() -> None:
    r = registry()
    first = render(r)
    assert first == generate_latest(r)
    assert b'priority_class="quo\\"ted"' in first and b"kueue_cluster_queue_nominal_quota{" in first
    assert render(r) == generate_latest(r)  # and again, from the kept label texts


def test_the_endpoint_serves_it_plain_and_gzipped() -> None:
    r = registry()
    server = serve("127.0.0.1:0", r)
    try:
        url = f"http://127.0.0.1:{server.server_port}/metrics"
        with urllib.request.urlopen(url, timeout=10) as answer:
            assert answer.headers["Content-Type"] == "text/plain; version=0.0.4; charset=utf-8"
            plain = answer.read()
        request = urllib.request.Request(url, headers={"Accept-Encoding": "gzip"})
        with urllib.request.urlopen(request, timeout=10) as answer:
            assert answer.headers["Content-Encoding"] == "gzip"
            zipped = gzip.decompress(answer.read())
    finally:
        server.shutdown()
    for body in (plain, zipped):
        assert b"kueue_pending_workloads{cluster_queue=\"cq0\",replica_role=\"leader\",status=\"active\"} 1.0" in body
        assert b"# TYPE kueue_admission_wait_time_seconds histogram" in body
