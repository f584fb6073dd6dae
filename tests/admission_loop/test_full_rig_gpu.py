"""The live loop on the full rig (real Job controller and scheduler, KWOK GPU nodes): flavors proven by where pods
run, and a started Job preempted off a flavor with node labels and tolerations, as Kueue stops it."""

from __future__ import annotations

import time
from typing import Any

import pytest
from cluster_rig import cond, create_job, job, wait_for, workload_of
from envtest_rig import RUN_FOR, TERMINATE_AFTER, FullCluster, NodePools
from gpu_rig import gpu_job, gpu_pools, gpu_queue_yaml, namespace, pods_of, running, setup
from running_loop import RunningLoop

pytestmark = pytest.mark.envtest


def _holds_quota(wl: dict[str, Any] | None) -> bool:
    c = cond(wl, "QuotaReserved")
    return wl is not None and bool((wl.get("status") or {}).get("admission")) and c is not None \
        and c["status"] == "True"


def test_pods_of_admitted_jobs_run_on_the_nodes_of_their_flavor(full_admission: RunningLoop,
                                                                  node_pools: NodePools) -> None:
    """The first Job fills the on-demand flavor and the second gets spot: every pod of each runs on a node of
    its flavor's pool (the flavor's nodeLabels, and for spot its toleration of the pool's taint)."""
    cluster: FullCluster = node_pools.cluster
    pools = gpu_pools(node_pools, {"on-demand": (2, 4), "spot": (2, 4)})
    with namespace(cluster, "place") as ns:
        setup(cluster, gpu_queue_yaml(ns, f"cq-{ns}", [(pools["on-demand"], 8), (pools["spot"], 8)]))
        create_job(cluster, gpu_job(ns, "first", pods=4, gpus=2))
        wait_for("first admitted", lambda: _holds_quota(workload_of(cluster, ns, "first")))
        create_job(cluster, gpu_job(ns, "second", pods=4, gpus=2))
        for name, pool in (("first", pools["on-demand"]), ("second", pools["spot"])):
            pods = wait_for(f"4 pods of {name} Running", lambda n=name: len(running(pods_of(cluster, ns, n))) == 4
                            and running(pods_of(cluster, ns, n)), timeout=60)
            wl = workload_of(cluster, ns, name)
            assert wl is not None
            assignment = wl["status"]["admission"]["podSetAssignments"][0]
            assert set(assignment["flavors"].values()) == {pool.flavor}
            assert {p["spec"]["nodeName"] for p in pods} <= pool.nodes, f"{name} ran outside pool {pool.label}"
            template = job(cluster, ns, name)["spec"]["template"]["spec"]
            assert template["nodeSelector"] == {"pool": pool.label}
            assert bool(template.get("tolerations")) == pool.spot


def test_started_job_preempted_on_a_tainted_flavor_is_stopped_as_kueue_does(full_admission: RunningLoop,
                                                                             node_pools: NodePools) -> None:
    """A low-priority Job running on the spot flavor (node labels + toleration) is preempted by a high-priority
    one: the loop suspends it, clears its startTime, restores its pod template (accepted by the API server),
    keeps its quota while its pods terminate, then releases it, and the preemptor's pods land on the freed
    nodes."""
    cluster: FullCluster = node_pools.cluster
    pools = gpu_pools(node_pools, {"spot": (2, 4)})
    spot = pools["spot"]
    with namespace(cluster, "preempt") as ns:
        setup(cluster, gpu_queue_yaml(ns, f"cq-{ns}", [(spot, 8)], preemption="LowerPriority",
                                      priorities={f"low-{ns}": 10, f"high-{ns}": 100}))
        create_job(cluster, gpu_job(ns, "low", pods=2, gpus=4, priority=f"low-{ns}",
                                    pod_annotations={TERMINATE_AFTER: "2s"}))
        wait_for("low running on spot", lambda: len(running(pods_of(cluster, ns, "low"))) == 2, timeout=60)
        started = wait_for("low's startTime", lambda: job(cluster, ns, "low").get("status", {}).get("startTime"))
        assert started
        assert {p["spec"]["nodeName"] for p in pods_of(cluster, ns, "low")} <= spot.nodes

        create_job(cluster, gpu_job(ns, "high", pods=2, gpus=4, priority=f"high-{ns}",
                                    pod_annotations={RUN_FOR: "2s"}))
        evicted = wait_for("low evicted", lambda: (c := cond(workload_of(cluster, ns, "low"), "Evicted"))
                           and c["status"] == "True" and c)
        assert evicted["reason"] == "Preempted"
        # While low's pods terminate (2 s each), its quota stays reserved and high is not admitted.
        saw_terminating = 0
        deadline = time.monotonic() + 30
        while pods_of(cluster, ns, "low"):
            assert time.monotonic() < deadline, "low's pods never went away"
            low_wl, high_wl = workload_of(cluster, ns, "low"), workload_of(cluster, ns, "high")
            if pods_of(cluster, ns, "low"):
                assert _holds_quota(low_wl), "quota released while low's pods still exist"
                assert not _holds_quota(high_wl), "high admitted while low's pods still exist"
                saw_terminating += 1
            time.sleep(0.1)
        assert saw_terminating >= 3, "the terminating window was observed"
        stopped = job(cluster, ns, "low")
        assert stopped["spec"]["suspend"] is True
        assert stopped.get("status", {}).get("startTime") is None, "startTime cleared before the restore"
        template = stopped["spec"]["template"]["spec"]
        assert not template.get("nodeSelector") and not template.get("tolerations"), "pod template restored"
        assert "kueue.x-k8s.io/stopping" not in (stopped["metadata"].get("annotations") or {})
        low_wl = wait_for("low's quota released", lambda: (w := workload_of(cluster, ns, "low"))
                          and not _holds_quota(w) and w)
        assert cond(low_wl, "Requeued")["status"] == "True"  # type: ignore[index]
        high_pods = wait_for("high's pods Running", lambda: len(running(pods_of(cluster, ns, "high"))) == 2
                             and running(pods_of(cluster, ns, "high")), timeout=60)
        assert {p["spec"]["nodeName"] for p in high_pods} <= spot.nodes
        # high completes after 2 s; low is admitted again onto the same flavor and its pods run there too.
        wait_for("high Finished", lambda: (c := cond(workload_of(cluster, ns, "high"), "Finished"))
                 and c["status"] == "True", timeout=60)
        relaunched = wait_for("low running again", lambda: len(running(pods_of(cluster, ns, "low"))) == 2
                              and running(pods_of(cluster, ns, "low")), timeout=60)
        assert {p["spec"]["nodeName"] for p in relaunched} <= spot.nodes
