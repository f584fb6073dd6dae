"""Admission checks live on the full rig, the test acting as the checks' controller (it sets the AdmissionCheck's
``Active`` condition and check states on Workloads as an external controller would): Ready starts the Job,
Retry evicts and requeues after the check's delay, Rejected deactivates, and an inactive check stops its
ClusterQueue admitting."""

from __future__ import annotations

import time
from typing import Any

import pytest
from checks_rig import set_check_active, set_check_state
from cluster_rig import apply, cluster_queue, cond, create_job, job, rest, wait_for, workload_of
from envtest_rig import RUN_FOR, FullCluster, NodePools
from gpu_rig import gpu_job, gpu_pools, gpu_queue_yaml, namespace, pods_of, running
from running_loop import RunningLoop

from gitopsq.admission_loop.workload_status import parse_time

pytestmark = pytest.mark.envtest

DELAY = 8  # the Retry check's requeueAfterSeconds


def _check_yaml(name: str) -> str:
    return f"apiVersion: kueue.x-k8s.io/v1beta2\nkind: AdmissionCheck\nmetadata: {{name: {name}}}\n" \
           "spec: {controllerName: example.com/capacity}\n"


def _checked_queue(cluster: FullCluster, node_pools: NodePools, ns: str, check: str) -> str:
    pool = gpu_pools(node_pools, {"on-demand": (1, 8)})["on-demand"]
    cq = f"cq-{ns}"
    text = gpu_queue_yaml(ns, cq, [(pool, 8)]).replace(
        "  preemption:", f"  admissionChecksStrategy: {{admissionChecks: [{{name: {check}}}]}}\n  preemption:")
    apply(cluster, _check_yaml(check) + "---\n" + text)
    return cq


def _reserved(cluster: FullCluster, ns: str, name: str) -> dict[str, Any] | None:
    wl = workload_of(cluster, ns, name)
    c = cond(wl, "QuotaReserved")
    return wl if wl is not None and c is not None and c["status"] == "True" and wl["status"].get(
        "admissionChecks") else None


def test_retry_evicts_resets_checks_and_requeues_after_the_delay(full_admission: RunningLoop,
                                                                 node_pools: NodePools) -> None:
    """A check in Retry (requeueAfterSeconds 8) evicts the reserving Workload with Kueue's reason and message,
    resets its checks to Pending with the retry counted, keeps it out of the queue until the delay is over, then
    reserves again; a Ready answer then starts the Job and its pods run."""
    cluster: FullCluster = node_pools.cluster
    with namespace(cluster, "retry") as ns:
        check = f"capacity-{ns}"
        _checked_queue(cluster, node_pools, ns, check)
        set_check_active(cluster, check, True)
        create_job(cluster, gpu_job(ns, "trainer", pods=2, gpus=1, pod_annotations={RUN_FOR: "30s"}))
        wl = wait_for("quota reserved with a Pending check", lambda: _reserved(cluster, ns, "trainer"), timeout=30)
        assert [c["state"] for c in wl["status"]["admissionChecks"]] == ["Pending"]
        # requeueAt is the check's lastTransitionTime, in whole seconds as the API writes it, plus the delay (as
        # Kueue computes it): up to a second earlier than the delay after this call, so the wait is checked against
        # it. The delay is long enough for the released state to outlast eviction and release on a slow machine:
        # with 3 s, a pass of 2 s once released and reserved again before the poll saw the moment in between.
        retried = parse_time(set_check_state(cluster, wl, "Retry", "no capacity yet", requeue_after=DELAY))
        evicted = wait_for("evicted by the check", lambda: (c := cond(workload_of(cluster, ns, "trainer"), "Evicted"))
                           and c["status"] == "True" and c)
        assert evicted["reason"] == "AdmissionCheck"
        assert evicted["message"] == f'Evicted due to AdmissionCheck in Retry state: "{check}" (no capacity yet)'
        released = wait_for("reservation released", lambda: (w := workload_of(cluster, ns, "trainer"))
                            and not w["status"].get("admission") and w)
        requeued = cond(released, "Requeued")
        assert requeued is not None and (requeued["status"], requeued["reason"]) == ("False", "AdmissionCheck")
        state = released["status"]["admissionChecks"][0]
        assert (state["state"], state.get("retryCount")) == ("Pending", 1)
        assert state["message"] == "Reset to Pending after eviction. Previously: Retry"
        requeue_at = parse_time(released["status"]["requeueState"]["requeueAt"])
        assert requeue_at == retried + DELAY
        again = wait_for("reserved again after the delay", lambda: (w := _reserved(cluster, ns, "trainer"))
                         and cond(w, "Requeued")["reason"] == "BackoffFinished" and w, timeout=30 + DELAY)
        assert time.time() >= requeue_at, "requeued before the check's requeueAfterSeconds"
        assert job(cluster, ns, "trainer")["spec"]["suspend"] is True
        set_check_state(cluster, again, "Ready", "capacity found")
        wait_for("admitted", lambda: (c := cond(workload_of(cluster, ns, "trainer"), "Admitted"))
                 and c["status"] == "True")
        wait_for("pods running", lambda: len(running(pods_of(cluster, ns, "trainer"))) == 2, timeout=60)


def test_rejected_deactivates_the_workload(full_admission: RunningLoop, node_pools: NodePools) -> None:
    """A check in Rejected marks the Workload DeactivationTarget (reason AdmissionCheck) with a Warning event
    AdmissionCheckRejected, turns spec.active false and evicts it with DeactivatedDueToAdmissionCheck; the Job
    stays suspended and the quota goes back."""
    cluster: FullCluster = node_pools.cluster
    with namespace(cluster, "reject") as ns:
        check = f"capacity-{ns}"
        cq = _checked_queue(cluster, node_pools, ns, check)
        set_check_active(cluster, check, True)
        create_job(cluster, gpu_job(ns, "trainer", pods=1, gpus=4))
        wl = wait_for("quota reserved", lambda: _reserved(cluster, ns, "trainer"), timeout=30)
        set_check_state(cluster, wl, "Rejected", "quota project closed")
        words = f'AdmissionCheck in Rejected state: "{check}" (quota project closed)'
        evicted = wait_for("deactivated and evicted", lambda: (c := cond(workload_of(cluster, ns, "trainer"),
                                                                          "Evicted")) and c["status"] == "True" and c)
        assert evicted["reason"] == "DeactivatedDueToAdmissionCheck"
        assert evicted["message"] == f"The workload is deactivated due to {words}"
        final = wait_for("reservation released", lambda: (w := workload_of(cluster, ns, "trainer"))
                         and not w["status"].get("admission") and w)
        assert final["spec"]["active"] is False
        assert job(cluster, ns, "trainer")["spec"]["suspend"] is True
        events = rest(cluster).request("GET", f"/api/v1/namespaces/{ns}/events")["items"]
        rejected = [e for e in events if e.get("reason") == "AdmissionCheckRejected"]
        assert rejected and rejected[0]["type"] == "Warning"
        assert rejected[0]["message"] == f"Deactivated due to {words}"
        wait_for("quota free", lambda: cluster_queue(cluster, cq).get("status", {}).get("reservingWorkloads") == 0)


def test_inactive_admission_check_makes_its_cluster_queue_inactive(full_admission: RunningLoop,
                                                                   node_pools: NodePools) -> None:
    """Until its controller sets Active=True, an AdmissionCheck makes the ClusterQueue Active=False with reason
    AdmissionCheckInactive and Kueue's message, and nothing is reserved there; once Active the Workload
    reserves quota."""
    cluster: FullCluster = node_pools.cluster
    with namespace(cluster, "inactive") as ns:
        check = f"capacity-{ns}"
        cq = _checked_queue(cluster, node_pools, ns, check)
        active = wait_for("queue inactive", lambda: (c := cond(cluster_queue(cluster, cq), "Active"))
                          and c["status"] == "False" and c)
        assert active["reason"] == "AdmissionCheckInactive"
        assert active["message"] == f"Can't admit new workloads: references inactive AdmissionCheck(s): {check}."
        create_job(cluster, gpu_job(ns, "trainer", pods=1, gpus=1))
        wait_for("workload created", lambda: workload_of(cluster, ns, "trainer"))
        time.sleep(1.5)
        assert _reserved(cluster, ns, "trainer") is None, "reserved in an inactive ClusterQueue"
        set_check_active(cluster, check, True)
        wait_for("queue active", lambda: (c := cond(cluster_queue(cluster, cq), "Active")) and c["status"] == "True")
        wait_for("quota reserved once the check is active", lambda: _reserved(cluster, ns, "trainer"), timeout=30)
        set_check_active(cluster, check, False)
        wait_for("queue inactive again", lambda: (c := cond(cluster_queue(cluster, cq), "Active"))
                 and c["status"] == "False")
        assert _reserved(cluster, ns, "trainer") is not None, "an inactive check must not evict reserved work"
