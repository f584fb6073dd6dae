"""gitopsq.yaml's ``admission`` block reaches the live loop: one fair-sharing scenario decided by ``gitopsq simulate``
and by the loop on the full rig (real Jobs on KWOK GPU nodes) admits and preempts the same workloads."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from cluster_rig import cond, create_job, workload_of
from envtest_rig import GPU, TERMINATE_AFTER, FullCluster, NodePools
from gpu_rig import gpu_job, gpu_pools, namespace, setup
from running_loop import RunningLoop

from gitopsq.manifests.config import parse_config

pytestmark = pytest.mark.envtest

GITOPSQ_YAML = """apiVersion: gitopsq.dev/v1alpha1
kind: RepositoryConfig
platformTeam: platform
include: ["**"]
admission:
  fairSharing: {preemptionStrategies: [LessThanOrEqualToFinalShare, LessThanInitialShare]}
  inadmissibleRequeue: Batched
  featureGates: {FlavorFungibilityPreserveScanProgress: true}
"""


def _objects(ns: str, flavor: str, label: str) -> str:
    """A lender with 8 GPUs and two borrowing ClusterQueues (weights 1 and 2) in one cohort, LocalQueues in
    ``ns``: with fair sharing the second team reclaims its share by preemption; without, it waits."""
    cq = []
    for name, nominal, weight in ((f"lender-{ns}", 8, 1), (f"cq-a-{ns}", 0, 1), (f"cq-b-{ns}", 0, 2)):
        cq.append(f"""apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {{name: {name}}}
spec:
  cohortName: pool-{ns}
  namespaceSelector: {{}}
  fairSharing: {{weight: {weight}}}
  preemption: {{reclaimWithinCohort: Any, withinClusterQueue: Never}}
  resourceGroups:
  - coveredResources: [cpu, "{GPU}"]
    flavors:
    - name: {flavor}
      resources: [{{name: cpu, nominalQuota: "{nominal * 8}"}}, {{name: "{GPU}", nominalQuota: "{nominal}"}}]
""")
    lqs = [f"""apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {{name: queue-{t}, namespace: {ns}}}
spec: {{clusterQueue: cq-{t}-{ns}}}
""" for t in ("a", "b")]
    rf = f"""apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {{name: {flavor}}}
spec:
  nodeLabels: {{pool: {label}}}
"""
    return "---\n".join([rf, *cq, *lqs])


JOBS = [("a-1", "a", 0), ("a-2", "a", 0), ("a-3", "a", 0), ("a-4", "a", 0), ("b-1", "b", 30), ("b-2", "b", 30)]


def _scenario(ns: str, objects: str) -> str:
    """The same objects and workloads in simulate's scenario format, its settings gitopsq.yaml's block."""
    import yaml

    admission = yaml.safe_load(GITOPSQ_YAML)["admission"]
    workloads = [{"name": name, "namespace": ns, "queue": f"queue-{team}", "submitAt": at,
                  "podSets": [{"name": "main", "count": 1, "requests": {"cpu": "1", GPU: "2"}}]}
                 for name, team, at in JOBS]
    return yaml.safe_dump({"name": "fair-sharing-live", "settings": admission,
                           "objects": list(yaml.safe_load_all(objects)), "workloads": workloads})


def _simulated(tmp_path: Path, scenario: str) -> tuple[set[str], set[str]]:
    path = tmp_path / "scenario.yaml"
    path.write_text(scenario)
    out = subprocess.run([sys.executable, "-m", "gitopsq", "simulate", "-o", "json", str(path)], check=True,
                         capture_output=True, text=True, env=os.environ).stdout
    result = json.loads(out)
    admitted = {k.split("/")[1] for k, v in result["final"]["workloads"].items() if v["state"] == "Admitted"}
    preempted = {e["workload"].split("/")[1] for e in result["events"] if e["type"] == "Preempted"}
    return admitted, preempted


def _shape(outcome: tuple[set[str], set[str]]) -> tuple[frozenset[str], frozenset[str], int, int]:
    """What must match: team b's admitted and preempted Workloads by name, and how many of team a's are admitted
    and preempted. Team a's four are identical (same priority), so Kueue picks the victims among them by
    reservation time, most recent first, then by an id: on a cluster the times are whole seconds and the four
    admissions may straddle a second boundary, while simulate reserves all four in one instant."""
    admitted, preempted = outcome
    return (frozenset(n for n in admitted if n.startswith("b-")), frozenset(n for n in preempted if n.startswith("b-")),
            sum(n.startswith("a-") for n in admitted), sum(n.startswith("a-") for n in preempted))


def _live(cluster: FullCluster, ns: str) -> tuple[set[str], set[str]]:
    admitted, preempted = set(), set()
    for name, _, _ in JOBS:
        wl = workload_of(cluster, ns, name)
        c = cond(wl, "Admitted")
        if c is not None and c["status"] == "True":
            admitted.add(name)
        if cond(wl, "Preempted") is not None:
            preempted.add(name)
    return admitted, preempted


def test_simulate_and_the_live_loop_admit_and_preempt_the_same(full_admission: RunningLoop, node_pools: NodePools,
                                                               tmp_path: Path) -> None:
    """With gitopsq.yaml's fair-sharing block given to the running loop, the scenario `gitopsq simulate` replays
    and the same Jobs on the full rig end with the same admitted and the same preempted workloads (and some
    preemption happens, which without fair sharing it would not)."""
    cluster: FullCluster = node_pools.cluster
    pool = gpu_pools(node_pools, {"on-demand": (2, 4)})["on-demand"]
    config = parse_config(GITOPSQ_YAML.encode()).config
    assert config is not None
    full_admission.loop.configure(config.admission)
    with namespace(cluster, "fair") as ns:
        objects = _objects(ns, pool.flavor, pool.label)
        expected = _simulated(tmp_path, _scenario(ns, objects))
        assert expected[1], "the scenario must preempt, or it proves nothing about the settings"
        # Team b's LocalQueue comes last, once both its Workloads exist: simulate has them arrive in one instant,
        # while two Jobs created one after the other may straddle a pass (b-1 alone preempting first).
        *first, queue_b = objects.split("---\n")
        setup(cluster, "---\n".join(first))
        started = time.monotonic()
        for name, team, at in JOBS:
            if at:  # the second team arrives once the first one holds the whole lender
                deadline = time.monotonic() + 60
                while _live(cluster, ns)[0] != {n for n, t, _ in JOBS if t == "a"}:
                    assert time.monotonic() < deadline, f"team a never fully admitted: {_live(cluster, ns)}"
                    time.sleep(0.2)
            create_job(cluster, gpu_job(ns, name, pods=1, gpus=2, labels={"kueue.x-k8s.io/queue-name":
                                                                           f"queue-{team}"},
                                        pod_annotations={TERMINATE_AFTER: "1s"}))
        deadline = time.monotonic() + 60
        while any(workload_of(cluster, ns, name) is None for name, team, _ in JOBS if team == "b"):
            assert time.monotonic() < deadline, "team b's Workloads were never created"
            time.sleep(0.2)
        assert "name: queue-b" in queue_b
        setup(cluster, queue_b)
        deadline = time.monotonic() + 60
        live: tuple[set[str], set[str]] = (set(), set())
        while time.monotonic() < deadline:
            live = _live(cluster, ns)
            if _shape(live) == _shape(expected):
                break
            time.sleep(0.3)
        assert _shape(live) == _shape(expected), f"simulate {expected} != live {live}"
        time.sleep(2)  # settled: nothing else is admitted or preempted afterwards
        assert _shape(_live(cluster, ns)) == _shape(expected)
        print(f"fair-sharing comparison settled in {time.monotonic() - started:.1f}s")
