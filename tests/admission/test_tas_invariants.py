"""Invariants of topology-aware scheduling over generated clusters and workloads (seeded, so a failure replays):
whatever the engine admits, no node holds more than its room, every admitted TAS pod set has all its pods placed
on nodes of its flavor, and a required level keeps all of a pod set's pods in one domain of that level."""

from __future__ import annotations

import random

import pytest

from gitopsq.admission.engine import Engine
from gitopsq.admission.tas_domains import TasCluster, TasNode, TasTopology
from gitopsq.admission.tas_requests import TopologyRequest
from gitopsq.api import model as m

from .builders import cq, lq, pod_sets, tas_flavor, topology

BLOCK, RACK, HOST = "example.com/block", "example.com/rack", "kubernetes.io/hostname"
LEVELS = (BLOCK, RACK, HOST)


def _cluster(rng: random.Random) -> list[TasNode]:
    nodes = []
    for b in range(rng.randint(1, 3)):
        for r in range(rng.randint(1, 3)):
            for h in range(rng.randint(1, 4)):
                name = f"n-{b}-{r}-{h}"
                labels = {BLOCK: f"b{b}", RACK: f"b{b}-r{r}", HOST: name, "tas-node": "true"}
                nodes.append(TasNode(name, labels, {"cpu": rng.choice((2000, 4000, 8000)), "pods": 10_000},
                                     non_tas_usage={"cpu": rng.choice((0, 0, 500))}))
    return nodes


def _request(rng: random.Random) -> TopologyRequest:
    kind = rng.choice(("required", "preferred", "unconstrained", "slices"))
    level = rng.choice(LEVELS)
    if kind == "required":
        return TopologyRequest(required=level)
    if kind == "preferred":
        return TopologyRequest(preferred=level)
    if kind == "slices":
        return TopologyRequest(required=BLOCK, slice_topology=rng.choice((RACK, HOST)), slice_size=2)
    return TopologyRequest(unconstrained=True)


@pytest.mark.parametrize("seed", range(40))
def test_admitted_placements_respect_nodes(seed: int) -> None:
    rng = random.Random(seed)
    nodes = _cluster(rng)
    room = {n.name: n.allocatable["cpu"] - n.non_tas_usage.get("cpu", 0) for n in nodes}
    by_name = {n.name: n for n in nodes}
    e = Engine(topology(tas_flavor(topology_name="t"), cq("q", quotas={"tas-default": {"cpu": "1000"}}),
                        lq("ns", "q", "q")),
               tas=TasCluster([TasTopology("t", LEVELS)], nodes))
    requests: dict[str, TopologyRequest] = {}
    pods: dict[str, tuple[m.PodSet, ...]] = {}
    for i in range(rng.randint(3, 12)):
        key = f"ns/w{i}"
        count = rng.choice((1, 2, 3, 4, 6, 8))
        requests[key] = _request(rng)
        if requests[key].slice_topology is not None and count % 2:
            count += 1
        pods[key] = pod_sets(("main", count, {"cpu": rng.choice(("500m", "1", "2"))}))
        e.submit(key=key, namespace="ns", queue="q", priority=rng.randint(0, 2), created=float(i),
                 pod_sets=pods[key], topology_requests={"main": requests[key]})
    for step in range(3):
        e.schedule(float(step))
        used: dict[str, int] = {}
        for key, request in requests.items():
            if e.view(key).state not in ("Admitted", "QuotaReserved"):
                continue
            (p,) = e.placements(key)
            ps = pods[key][0]
            assert sum(c for _, c in p.placement.domains) == ps.count
            level = request.required
            if level is not None:
                index = LEVELS.index(level)
                assert len({by_name[leaf].labels[LEVELS[index]] for leaf, _ in p.placement.leaves}) == 1
            for leaf, c in p.placement.leaves:
                used[leaf] = used.get(leaf, 0) + c * ps.requests["cpu"].milli
        assert all(used[n] <= room[n] for n in used), (seed, step, used, room)
        admitted = [k for k in requests if e.view(k).state == "Admitted"]
        if admitted:
            e.finish(rng.choice(admitted), float(step))
