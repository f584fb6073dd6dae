"""JobSet startup orders on the live loop and the full rig, with the real JobSet controller: with
``startupPolicy: InOrder`` or ``dependsOn``, the JobSet is still one Workload admitted whole (Kueue reserves every pod
set at once and leaves the order to the JobSet controller), and waitForPodsReady counts a replicated job that
completed before the next one started (Kueue's JobSet PodsReady: ready + succeeded Jobs reach the replicas)."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

import pytest
from cluster_rig import cond, holds, wait_for
from envtest_rig import RUN_FOR, START_AFTER, FullCluster, NodePools
from gpu_rig import gpu_pools, gpu_queue_yaml, namespace, running, setup
from jobset_rig import create_jobset, get_jobset, jobset, jobset_pods, replicated, workload_of_jobset
from running_loop import FAST, RunningLoop, running_on_clean

from gitopsq.admission_loop.options import WaitForPodsReady
from gitopsq.admission_loop.workload_status import parse_time

pytestmark = pytest.mark.envtest

PODS_READY = dataclasses.replace(FAST, integrations=("batch/job", "jobset.x-k8s.io/jobset"),
                                 wait_for_pods_ready=WaitForPodsReady(enable=True, timeout=60.0))


@pytest.fixture
def ready_loop(full_kueue: FullCluster, jobset_cluster: FullCluster) -> Iterator[RunningLoop]:
    """The loop with batch/job and JobSet and waitForPodsReady (60 s) on the full rig, JobSet controller on."""
    with running_on_clean(full_kueue, PODS_READY) as running_loop:
        yield running_loop


def _created(pod: dict[str, Any]) -> float:
    return parse_time(pod["metadata"]["creationTimestamp"])


def _admitted_whole(cluster: FullCluster, ns: str, name: str) -> dict[str, Any]:
    wl = wait_for("the JobSet admitted", lambda: (w := workload_of_jobset(cluster, ns, name)) and holds(w, "Admitted")
                  and w, timeout=30)
    assert sorted(a["name"] for a in wl["status"]["admission"]["podSetAssignments"]) == ["driver", "workers"]
    assert [(a["name"], a["count"]) for a in wl["status"]["admission"]["podSetAssignments"]] == \
        [("driver", 1), ("workers", 2)]
    return dict(wl)


def test_in_order_jobset_is_admitted_whole_and_pods_ready_waits_for_the_last(ready_loop: RunningLoop,
                                                                            node_pools: NodePools) -> None:
    """A JobSet with startupPolicy InOrder (driver, then workers) is one Workload whose two pod sets are admitted
    together; the JobSet controller creates the workers' pods only once the driver is ready, and the Workload's
    PodsReady turns True only when the workers are ready too, with no eviction."""
    cluster: FullCluster = node_pools.cluster
    pool = gpu_pools(node_pools, {"on-demand": (2, 4)})["on-demand"]
    with namespace(cluster, "js-inorder") as ns:
        setup(cluster, gpu_queue_yaml(ns, f"cq-{ns}", [(pool, 8)]))
        manifest = jobset(ns, "ordered", replicated("driver", replicas=1, pods=1, gpus=1,
                                                    pod_annotations={START_AFTER: "2s"}),
                          replicated("workers", replicas=1, pods=2, gpus=1))
        manifest["spec"]["startupPolicy"] = {"startupPolicyOrder": "InOrder"}
        create_jobset(cluster, manifest)
        _admitted_whole(cluster, ns, "ordered")
        wl = wait_for("PodsReady", lambda: holds(workload_of_jobset(cluster, ns, "ordered"), "PodsReady")
                      and workload_of_jobset(cluster, ns, "ordered"), timeout=90)
        (driver,) = running(jobset_pods(cluster, ns, "ordered", "driver"))
        workers = running(jobset_pods(cluster, ns, "ordered", "workers"))
        assert len(workers) == 2, "PodsReady turned True before the workers were ready"
        ready_at = parse_time(next(c for c in driver["status"]["conditions"] if c["type"] == "Ready")
                              ["lastTransitionTime"])
        assert all(_created(dict(w)) >= ready_at for w in workers), "workers created before the driver was ready"
        assert cond(wl, "Evicted") is None or cond(wl, "Evicted")["status"] == "False"
        started = holds(get_jobset(cluster, ns, "ordered"), "StartupPolicyCompleted")
        assert started is not None


def test_depends_on_complete_counts_the_finished_driver_for_pods_ready(ready_loop: RunningLoop,
                                                                       node_pools: NodePools) -> None:
    """Workers that dependsOn the driver's Complete start only after the driver's pod succeeded; the Workload,
    admitted whole from the start, keeps its admission meanwhile and turns PodsReady once the workers run (the
    succeeded driver Job counts), never evicted."""
    cluster: FullCluster = node_pools.cluster
    pool = gpu_pools(node_pools, {"on-demand": (2, 4)})["on-demand"]
    with namespace(cluster, "js-depends") as ns:
        setup(cluster, gpu_queue_yaml(ns, f"cq-{ns}", [(pool, 8)]))
        workers = replicated("workers", replicas=1, pods=2, gpus=1)
        workers["dependsOn"] = [{"name": "driver", "status": "Complete"}]
        create_jobset(cluster, jobset(ns, "chained", replicated("driver", replicas=1, pods=1, gpus=1,
                                                                 pod_annotations={RUN_FOR: "2s"}), workers))
        _admitted_whole(cluster, ns, "chained")
        wl = wait_for("PodsReady", lambda: holds(workload_of_jobset(cluster, ns, "chained"), "PodsReady")
                      and workload_of_jobset(cluster, ns, "chained"), timeout=90)
        (driver,) = jobset_pods(cluster, ns, "chained", "driver")
        assert driver["status"]["phase"] == "Succeeded"
        running_workers = running(jobset_pods(cluster, ns, "chained", "workers"))
        assert len(running_workers) == 2
        finished_at = max(parse_time(s["state"]["terminated"]["finishedAt"])
                          for s in driver["status"]["containerStatuses"])
        assert all(_created(dict(w)) >= finished_at for w in running_workers), "workers started before the driver ended"
        assert holds(wl, "Admitted") is not None
        assert cond(wl, "Evicted") is None or cond(wl, "Evicted")["status"] == "False"
