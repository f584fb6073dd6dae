"""waitForPodsReady on the full rig: a gang whose pods all run is marked PodsReady; one that cannot get all its pods
scheduled (too few fake GPU nodes) is evicted after the timeout, gives its quota back, waits out its backoff,
is requeued, and is deactivated once it has used up its requeues."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterator

import pytest
from cluster_rig import cluster_queue, cond, create_job, flavors_usage, holds, job, wait_for, workload_of
from envtest_rig import GPU, FullCluster, NodePools
from gpu_rig import gpu_job, gpu_pools, gpu_queue_yaml, namespace, pods_of, running, setup
from running_loop import FAST, RunningLoop

from gitopsq.admission_loop.options import RequeuingStrategy, WaitForPodsReady
from gitopsq.admission_loop.workload_status import parse_time

pytestmark = pytest.mark.envtest

PODS_READY = WaitForPodsReady(enable=True, timeout=2.0, requeuing_strategy=RequeuingStrategy(
    backoff_limit_count=1, backoff_base_seconds=5, backoff_max_seconds=20))
# A 5 s backoff: long enough that a poll on a loaded 2-core machine sees the Requeued=False window.


@pytest.fixture
def gang_loop(full_kueue: FullCluster) -> Iterator[RunningLoop]:
    """The admission loop on the full rig with waitForPodsReady on (2 s timeout, 5 s backoff, one requeue)."""
    full_kueue.delete_all()
    try:
        with RunningLoop(full_kueue, dataclasses.replace(FAST, wait_for_pods_ready=PODS_READY)) as running_loop:
            yield running_loop
    finally:
        full_kueue.delete_all()


def test_a_gang_whose_pods_all_run_is_pods_ready(gang_loop: RunningLoop, node_pools: NodePools) -> None:
    """Both pods of an admitted 2-pod GPU Job become Ready on the pool: its Workload gets PodsReady=True, reason
    Started, and stays admitted past the timeout."""
    cluster: FullCluster = node_pools.cluster
    pool = gpu_pools(node_pools, {"on-demand": (1, 4)})["on-demand"]
    with namespace(cluster, "ready") as ns:
        setup(cluster, gpu_queue_yaml(ns, f"cq-{ns}", [(pool, 4)]))
        create_job(cluster, gpu_job(ns, "gang", pods=2, gpus=2))
        ready = wait_for("PodsReady=True", lambda: holds(workload_of(cluster, ns, "gang"), "PodsReady"), timeout=30)
        assert (ready["reason"], ready["message"]) == (
            "Started", "All pods reached readiness and the workload is running")
        assert len(running(pods_of(cluster, ns, "gang"))) == 2
        wl = workload_of(cluster, ns, "gang")
        admitted_at = parse_time(cond(wl, "Admitted")["lastTransitionTime"])  # type: ignore[index]
        wait_for("the timeout to pass", lambda: time.time() > admitted_at + PODS_READY.timeout + 2, timeout=10)
        wl = workload_of(cluster, ns, "gang")
        assert holds(wl, "Admitted") and not holds(wl, "Evicted"), "a ready gang is never timed out"


def test_a_gang_that_cannot_be_placed_times_out_backs_off_and_is_deactivated(
        gang_loop: RunningLoop, node_pools: NodePools) -> None:
    """Quota for 8 GPUs but one 4-GPU node: a Job of 2 × 4 GPUs is admitted, one pod stays unschedulable, and
    after the 2 s timeout it is evicted (PodsReadyTimeout, Kueue's message, requeueState count 1 and requeueAt
    5 s on), its Job stopped and its quota returned; it stays out (Requeued=False) until requeueAt, is requeued
    (BackoffFinished), admitted and timed out again, and this time deactivated
    (DeactivatedDueToRequeuingLimitExceeded) with its quota returned for good."""
    cluster: FullCluster = node_pools.cluster
    pool = gpu_pools(node_pools, {"on-demand": (1, 4)})["on-demand"]
    with namespace(cluster, "gang") as ns:
        cq = f"cq-{ns}"
        setup(cluster, gpu_queue_yaml(ns, cq, [(pool, 8)]))
        create_job(cluster, gpu_job(ns, "gang", pods=2, gpus=4))
        waiting = wait_for("PodsReady=False WaitForStart", lambda: (c := cond(workload_of(cluster, ns, "gang"),
                                                                               "PodsReady")) and c, timeout=30)
        assert (waiting["status"], waiting["reason"]) == ("False", "WaitForStart")
        wait_for("one pod running, one unschedulable", lambda: len(running(pods_of(cluster, ns, "gang"))) == 1
                 and len(pods_of(cluster, ns, "gang")) == 2, timeout=30)

        evicted = wait_for("evicted for PodsReady timeout",
                           lambda: holds(workload_of(cluster, ns, "gang"), "Evicted"), timeout=30)
        wl = workload_of(cluster, ns, "gang")
        assert wl is not None
        key = f"{ns}/{wl['metadata']['name']}"
        assert (evicted["reason"], evicted["message"]) == ("PodsReadyTimeout", f"Exceeded the PodsReady timeout {key}")
        admitted_at = parse_time(cond(wl, "Admitted")["lastTransitionTime"])  # type: ignore[index]
        assert parse_time(evicted["lastTransitionTime"]) - admitted_at >= PODS_READY.timeout - 1
        state = wl["status"]["requeueState"]
        assert state["count"] == 1
        assert parse_time(state["requeueAt"]) - parse_time(evicted["lastTransitionTime"]) == pytest.approx(
            PODS_READY.requeuing_strategy.backoff_base_seconds, abs=1)

        # Quota back once the Job has stopped; out of the queue until requeueAt, then requeued.
        seen: list[tuple[str, str]] = []
        usage_seen: set[str | None] = set()

        def readmitted() -> bool:
            w = workload_of(cluster, ns, "gang")
            requeued = cond(w, "Requeued")
            if requeued is not None and (requeued["status"], requeued["reason"]) not in seen:
                seen.append((requeued["status"], requeued["reason"]))
            usage_seen.add(flavors_usage(cluster_queue(cluster, cq)).get((pool.flavor, GPU)))
            return bool(holds(w, "QuotaReserved")) and bool(seen) and seen[-1][0] == "True"

        wait_for("requeued and admitted again", readmitted, timeout=30)
        assert seen[:2] == [("False", "PodsReadyTimeout"), ("True", "BackoffFinished")], seen
        assert "0" in usage_seen or None in usage_seen, f"the quota was given back in between: {usage_seen}"

        evicted = wait_for("deactivated", lambda: (c := holds(workload_of(cluster, ns, "gang"), "Evicted"))
                           and c["reason"] != "PodsReadyTimeout" and c, timeout=30)
        assert evicted["reason"] == "DeactivatedDueToRequeuingLimitExceeded"
        assert evicted["message"] == ("The workload is deactivated due to exceeding the maximum number of re-queuing "
                                      "retries")
        wl = wait_for("quota returned", lambda: (w := workload_of(cluster, ns, "gang"))
                      and not (w.get("status") or {}).get("admission") and w, timeout=30)
        assert wl["spec"]["active"] is False
        assert not (wl.get("status") or {}).get("requeueState"), "requeueState cleared on deactivation"
        requeued = cond(wl, "Requeued")
        assert requeued is not None and (requeued["status"], requeued["reason"]) == (
            "False", "DeactivatedDueToRequeuingLimitExceeded")
        wait_for("queue usage back to 0", lambda: flavors_usage(cluster_queue(cluster, cq)).get(
            (pool.flavor, GPU)) in ("0", None))
        assert job(cluster, ns, "gang")["spec"]["suspend"] is True


def test_block_admission_holds_new_work_while_a_gang_is_not_ready(full_kueue: FullCluster,
                                                                   node_pools: NodePools) -> None:
    """With blockAdmission, a Job that fits waits (QuotaReserved=False, WaitingForPodsReady) while an admitted
    gang cannot get all its pods placed; when the gang times out and is evicted, the waiting Job is admitted
    and runs."""
    cluster = full_kueue
    pool = gpu_pools(node_pools, {"on-demand": (1, 4)})["on-demand"]
    blocking = dataclasses.replace(PODS_READY, block_admission=True, timeout=3.0)
    full_kueue.delete_all()
    try:
        with RunningLoop(full_kueue, dataclasses.replace(FAST, wait_for_pods_ready=blocking)), \
                namespace(cluster, "block") as ns:
            setup(cluster, gpu_queue_yaml(ns, f"cq-{ns}", [(pool, 12)]))
            create_job(cluster, gpu_job(ns, "gang", pods=2, gpus=4))
            wait_for("gang admitted", lambda: holds(workload_of(cluster, ns, "gang"), "Admitted"))
            create_job(cluster, gpu_job(ns, "small", pods=1, gpus=1))
            held = wait_for("small held back", lambda: (c := cond(workload_of(cluster, ns, "small"), "QuotaReserved"))
                            and c["status"] == "False" and c, timeout=30)
            assert (held["reason"], held["message"]) == (
                "WaitingForPodsReady", "waiting for all admitted workloads to be in PodsReady condition")
            assert holds(workload_of(cluster, ns, "gang"), "Admitted"), "held while the gang is admitted, not ready"
            wait_for("gang evicted", lambda: holds(workload_of(cluster, ns, "gang"), "Evicted"), timeout=30)
            wait_for("small admitted", lambda: holds(workload_of(cluster, ns, "small"), "Admitted"), timeout=30)
            wait_for("small running", lambda: len(running(pods_of(cluster, ns, "small"))) == 1, timeout=60)
    finally:
        full_kueue.delete_all()
