"""Topology-aware scheduling in the admission engine: time per placement and per decision, and peak memory.

Scenario 1 is Kueue v0.19.2's ``BenchmarkSchedulerTAS`` (pkg/scheduler/scheduler_tas_bench_test.go): 1,000 nodes
(10 CPU, 100Gi, 110 pods and 28 more resources at 10 each), blocks of 31 nodes, 8 node groups; the cluster filled
with admitted TAS workloads (1–10 CPU per pod, placed node by node until the next one does not fit); then a
200-pod workload at half a node per pod, unconstrained, with a node selector for group-1, in a ClusterQueue with
ample quota. Its placement fails on the full cluster and succeeds on an empty one (Kueue then looks for
preemption victims; gitopsq's engine does not search TAS victims, so the workload waits).

Scenario 2 is the same at 10,000 nodes in 4 levels (10 zones × 10 blocks × 10 racks × 10 hosts), filled the same
way, with the same workload unconstrained, and once more requiring one block on an empty cluster.

Figures: ms per placement (one pod set, `tas_placement.place`, with the current usage and on an empty cluster),
ms per decision and decisions per CPU-second (`Engine.schedule` of the instant that decides the pending
workload: quota, both placements, its pending reason), and the peak memory of building and scheduling
(tracemalloc). Run: ``.venv/bin/python benchmarks/tas_bench.py`` (it prints which engine it measures).
"""

from __future__ import annotations

import time
import tracemalloc
from collections.abc import Callable

from gitopsq.admission import ENGINE
from gitopsq.admission.engine import Engine
from gitopsq.admission.tas_domains import HOSTNAME, ONE_POD, PODS, TasCluster, TasNode, TasTopology
from gitopsq.admission.tas_filter import PodConstraints
from gitopsq.admission.tas_placement import Placement, PodSetPlacement, place
from gitopsq.admission.tas_requests import TopologyRequest
from gitopsq.admission.topology import build_topology
from gitopsq.api import model as m
from gitopsq.api.codec import decode
from gitopsq.api.frozenmap import FrozenMap
from gitopsq.api.quantity import quantity

V = "kueue.x-k8s.io/v1beta2"
GI = 1024 ** 3
EXTRA = [f"example.com/res-{r}" for r in range(2, 30)]


def _obj(doc: dict[str, object]) -> m.QueueObject:
    obj = decode(doc).obj
    assert obj is not None and not isinstance(obj, m.Workload)
    return obj


def queue_objects() -> list[m.QueueObject]:
    resources = [{"name": "cpu", "nominalQuota": "100000"}, {"name": "memory", "nominalQuota": "1000000Gi"},
                 *({"name": r, "nominalQuota": "100000"} for r in EXTRA)]
    return [
        _obj({"apiVersion": V, "kind": "ResourceFlavor", "metadata": {"name": "tas-flavor"},
              "spec": {"nodeLabels": {"tas-node": "true"}, "topologyName": "tas-topology"}}),
        _obj({"apiVersion": V, "kind": "ClusterQueue", "metadata": {"name": "tas-main"}, "spec": {
            "namespaceSelector": {}, "preemption": {"withinClusterQueue": "LowerPriority"},
            "resourceGroups": [{"coveredResources": ["cpu", "memory", *EXTRA],
                                "flavors": [{"name": "tas-flavor", "resources": resources}]}]}}),
        _obj({"apiVersion": V, "kind": "LocalQueue", "metadata": {"name": "tas-main", "namespace": "default"},
              "spec": {"clusterQueue": "tas-main"}}),
    ]


def allocatable() -> dict[str, int]:
    return {"cpu": 10_000, "memory": 100 * GI * 1000, PODS: 110 * ONE_POD, **dict.fromkeys(EXTRA, 10_000)}


def kueue_nodes(count: int = 1000, groups: int = 8) -> tuple[tuple[str, ...], list[TasNode]]:
    """BenchmarkSchedulerTAS's nodes: blocks of sqrt(count) nodes, node groups round-robin over blocks."""
    branching = max(int(count ** 0.5), 1)
    nodes, block, node_id = [], 0, 0
    for _ in range(count):
        node_id += 1
        if node_id == branching:
            node_id, block = 0, block + 1
        host = f"node-{block}-{node_id}"
        nodes.append(TasNode(host, {"cloud.com/topology-block": f"b-{block}", HOSTNAME: host, "tas-node": "true",
                                    "node-group": f"group-{block % groups + 1}"}, allocatable()))
    return ("cloud.com/topology-block", HOSTNAME), nodes


def four_level_nodes(count: int = 10_000, groups: int = 8) -> tuple[tuple[str, ...], list[TasNode]]:
    levels = ("example.com/zone", "example.com/block", "example.com/rack", HOSTNAME)
    nodes = []
    for i in range(count):
        zone, block, rack = i // 1000, i // 100, i // 10
        host = f"node-{i}"
        nodes.append(TasNode(host, {levels[0]: f"z-{zone}", levels[1]: f"b-{block}", levels[2]: f"r-{rack}",
                                    HOSTNAME: host, "tas-node": "true", "node-group": f"group-{block % groups + 1}"},
                             allocatable()))
    return levels, nodes


def pod_set(count: int, cpu: int, mem_gi: int, selector: dict[str, str] | None = None) -> tuple[m.PodSet, ...]:
    requests = {"cpu": quantity(str(cpu)), "memory": quantity(f"{mem_gi}Gi"),
                **{r: quantity(str(cpu)) for r in EXTRA}}
    return (m.PodSet(name="main", count=count, requests=FrozenMap(requests),
                     node_selector=FrozenMap(selector or {})),)


def fill(engine: Engine, nodes: list[TasNode]) -> int:
    """Admitted workloads until the cluster is full, placed as BenchmarkSchedulerTAS places them."""
    cpu_left = [10] * len(nodes)
    ram_left = [100] * len(nodes)
    index, root = 1, int(len(nodes) ** 0.5)
    while True:
        cpu, ram, pods = index % 10 + 1, index % 100 + 1, (index * 10) % root + 1
        placed: dict[str, int] = {}
        backup = (list(cpu_left), list(ram_left))
        done = 0
        for j, n in enumerate(nodes):
            while cpu_left[j] >= cpu and ram_left[j] >= ram and done < pods:
                cpu_left[j] -= cpu
                ram_left[j] -= ram
                done += 1
                placed[n.name] = placed.get(n.name, 0) + 1
            if done == pods:
                break
        if done < pods:
            cpu_left, ram_left = backup
            return index - 1
        key = f"default/wl-{index}"
        ps = pod_set(pods, cpu, ram)
        engine.submit(key=key, namespace="default", queue="tas-main", priority=index, created=0.0, pod_sets=ps)
        per_pod = {r: q.milli for r, q in ps[0].requests.items()}
        usage = {h: {**{r: v * c for r, v in per_pod.items()}, PODS: ONE_POD * c} for h, c in placed.items()}
        placement = Placement((HOSTNAME,), tuple(((h,), c) for h, c in sorted(placed.items())),
                              tuple(sorted(placed.items())))
        engine.restore(key, cluster_queue="tas-main", flavors={"main": dict.fromkeys(per_pod, "tas-flavor")},
                       at=0.0, placements=(PodSetPlacement("main", "tas-flavor", "tas-topology", placement, usage),))
        index += 1


def timed(fn: Callable[[], object], repeat: int) -> tuple[float, float]:
    """(wall ms, CPU ms) per call, best of ``repeat`` runs."""
    best_wall = best_cpu = float("inf")
    for _ in range(repeat):
        w, c = time.perf_counter(), time.process_time()
        fn()
        best_wall = min(best_wall, (time.perf_counter() - w) * 1000)
        best_cpu = min(best_cpu, (time.process_time() - c) * 1000)
    return best_wall, best_cpu


def _request(engine: Engine, i: int, ps: tuple[m.PodSet, ...], request: TopologyRequest) -> str:
    """Submit the i-th pending workload: a new priority each time, so it is not parked behind an equivalent one."""
    key = f"default/requested-{i}"
    engine.submit(key=key, namespace="default", queue="tas-main", priority=10**6 + i, created=float(i),
                  pod_sets=ps, topology_requests={"main": request})
    return key


def scenario(name: str, levels: tuple[str, ...], nodes: list[TasNode], request: TopologyRequest,
             selector: dict[str, str] | None, *, full: bool, rounds: int = 5) -> None:
    # Peak memory: building the tree, the engine and its admitted placements, and the first decision. Timings
    # come after, with tracemalloc stopped (it slows every allocation).
    tracemalloc.start()
    cluster = TasCluster([TasTopology("tas-topology", levels)], nodes)
    engine = Engine(build_topology(queue_objects()), tas=cluster)
    admitted = fill(engine, nodes) if full else 0
    flavor = engine.topology.flavors["tas-flavor"]
    tree = cluster.tree(flavor)
    assert tree is not None
    ps = pod_set(200, 5, 50, selector)
    engine.schedule(0.0)
    _request(engine, 0, ps, request)
    engine.schedule(0.0)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()

    per_pod = {r: q.milli for r, q in ps[0].requests.items()}
    pod = PodConstraints(ps[0].node_selector, (), ())

    def placement(used: bool) -> Callable[[], object]:
        return lambda: place(tree, request, implied=False, count=200, per_pod=per_pod, pod=pod,
                             used=cluster.leaf_usage("tas-topology") if used else {}, assumed={})

    now_wall, now_cpu = timed(placement(True), rounds)
    empty_wall, empty_cpu = timed(placement(False), rounds)
    fits_now = place(tree, request, implied=False, count=200, per_pod=per_pod, pod=pod,
                     used=cluster.leaf_usage("tas-topology"), assumed={})
    fits_empty = place(tree, request, implied=False, count=200, per_pod=per_pod, pod=pod, used={}, assumed={})
    cpu_total = wall_total = 0.0
    key = ""
    for i in range(1, rounds + 1):
        key = _request(engine, i, ps, request)
        w, c = time.perf_counter(), time.process_time()
        engine.schedule(float(i))
        wall_total += time.perf_counter() - w
        cpu_total += time.process_time() - c
    print(f"{name}: {len(nodes):,} nodes, {len(levels)} levels, {admitted:,} admitted TAS workloads")
    print(f"  placement with current usage: {now_wall:.1f} ms ({now_cpu:.1f} ms CPU), "
          f"{'fits' if fits_now.placement else 'does not fit: ' + fits_now.reason[:90]}")
    spread = f"fits on {len(fits_empty.placement.domains)} nodes" if fits_empty.placement else "no fit"
    print(f"  placement on an empty cluster: {empty_wall:.1f} ms ({empty_cpu:.1f} ms CPU), {spread}")
    last = engine.view(key)
    print(f"  decision (Engine.schedule): {wall_total / rounds * 1000:.1f} ms, "
          f"{rounds / cpu_total:,.1f} decisions per CPU-second; the last one: {last.state} {last.reason}")
    print(f"  peak memory (tracemalloc: nodes, tree, engine, admitted placements, one decision): "
          f"{peak / 2**20:,.1f} MiB")


def main() -> None:
    print(f"admission engine: {ENGINE}")
    levels, nodes = kueue_nodes()
    scenario("BenchmarkSchedulerTAS", levels, nodes, TopologyRequest(unconstrained=True), {"node-group": "group-1"},
             full=True)
    levels, nodes = four_level_nodes()
    scenario("10k nodes, unconstrained, full cluster", levels, nodes, TopologyRequest(unconstrained=True),
             {"node-group": "group-1"}, full=True)
    levels, nodes = four_level_nodes()
    scenario("10k nodes, required block, empty cluster", levels, nodes, TopologyRequest(required=levels[1]), None,
             full=False)


if __name__ == "__main__":
    main()
