"""Jobs whose spec changes under their Workload, and children of managed jobs, on the full rig (real Job and
JobSet controllers, scheduler, KWOK nodes): a suspended JobSet edited while it waits has its Workload updated in
place; a suspended Job edited while its Workload holds a reservation gets a new Workload; a running Job whose
parallelism changes is stopped and gets a new Workload of the new shape; a child Job started while its managed
parent is not admitted is suspended again."""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Iterator
from typing import Any

import pytest
from checks_rig import set_check_active
from cluster_rig import apply, cond, get, rest, wait_for, workload_of
from envtest_rig import FullCluster, NodePools
from gpu_rig import MERGE, SPOT_TAINT, gpu_job, gpu_pools, gpu_queue_yaml, namespace, pods_of, running, setup
from jobset_rig import JOBSETS, create_jobset, get_jobset, jobset, replicated, workload_of_jobset
from running_loop import FAST, RunningLoop, running_on_clean

pytestmark = pytest.mark.envtest

WITH_JOBSET = dataclasses.replace(FAST, integrations=("batch/job", "jobset.x-k8s.io/jobset"))
JOBS = "/apis/batch/v1/namespaces/{ns}/jobs"


@pytest.fixture
def jobset_loop(full_kueue: FullCluster, jobset_cluster: FullCluster) -> Iterator[RunningLoop]:
    """The admission loop with the batch/job and JobSet integrations on the full rig (JobSet controller on)."""
    with running_on_clean(full_kueue, WITH_JOBSET) as running_loop:
        yield running_loop


def _events(cluster: FullCluster, ns: str, reason: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = rest(cluster).request("GET", f"/api/v1/namespaces/{ns}/events")["items"]
    return [e for e in items if e.get("reason") == reason]


def _ours(cluster: FullCluster, ns: str) -> list[dict[str, Any]]:
    """The loop's Suspended events on the child (the Job controller records its own, "Job suspended")."""
    return [e for e in _events(cluster, ns, "Suspended")
            if e["involvedObject"]["name"] == "child" and e["message"] == "Kueue managed child job suspended"]


def _admitted(wl: dict[str, Any] | None) -> bool:
    c = cond(wl, "Admitted")
    return c is not None and c["status"] == "True"


def test_suspended_jobset_edited_while_pending_has_its_workload_updated(jobset_loop: RunningLoop,
                                                                        node_pools: NodePools) -> None:
    """A JobSet waiting for quota (three 4-GPU workers, 8 GPUs in the queue) whose workers are given a
    toleration keeps the same Workload, now carrying that toleration in its pod set (Kueue's UpdatedWorkload
    event); with the quota raised it is admitted and its pods run with the toleration."""
    cluster: FullCluster = node_pools.cluster
    spot = gpu_pools(node_pools, {"spot": (3, 4)})["spot"]
    with namespace(cluster, "js-edit") as ns:
        cq = f"cq-{ns}"
        setup(cluster, gpu_queue_yaml(ns, cq, [(spot, 8)]))
        create_jobset(cluster, jobset(ns, "train", replicated("workers", replicas=3, pods=1, gpus=4)))
        before = wait_for("the Workload pending", lambda: (w := workload_of_jobset(cluster, ns, "train"))
                          and (c := cond(w, "QuotaReserved")) and c["status"] == "False" and w, timeout=30)
        toleration = {"key": "example.com/edited", "operator": "Exists", "effect": "NoSchedule"}
        rjobs = copy.deepcopy(get_jobset(cluster, ns, "train")["spec"]["replicatedJobs"])
        rjobs[0]["template"]["spec"]["template"]["spec"]["tolerations"] = [toleration]
        rest(cluster).request("PATCH", f"{JOBSETS.format(ns=ns)}/train", body={"spec": {"replicatedJobs": rjobs}},
                              content_type=MERGE)
        after = wait_for("the Workload updated", lambda: (w := workload_of_jobset(cluster, ns, "train"))
                         and w["spec"]["podSets"][0]["template"]["spec"].get("tolerations") and w, timeout=30)
        assert after["metadata"]["uid"] == before["metadata"]["uid"], "the Workload was re-created, not updated"
        assert after["spec"]["podSets"][0]["template"]["spec"]["tolerations"] == [toleration]
        updated = wait_for("the UpdatedWorkload event", lambda: _events(cluster, ns, "UpdatedWorkload"))
        assert updated[0]["message"] == \
            f"Updated not matching Workload for suspended job: {ns}/{after['metadata']['name']}"
        assert updated[0]["involvedObject"]["kind"] == "JobSet"
        setup(cluster, gpu_queue_yaml(ns, cq, [(spot, 12)]))
        wait_for("the JobSet admitted and started", lambda: _admitted(workload_of_jobset(cluster, ns, "train"))
                 and get_jobset(cluster, ns, "train")["spec"].get("suspend") is False, timeout=30)
        pods = wait_for("three workers running", lambda: len(r := running(get(
            cluster, f"/api/v1/namespaces/{ns}/pods")["items"])) == 3 and r, timeout=60)
        for pod in pods:
            assert toleration in pod["spec"]["tolerations"]
            assert SPOT_TAINT["key"] in {t.get("key") for t in pod["spec"]["tolerations"]}
        assert workload_of_jobset(cluster, ns, "train")["metadata"]["uid"] == before["metadata"]["uid"]


def test_running_job_whose_parallelism_changes_gets_a_new_workload(jobset_loop: RunningLoop,
                                                                   node_pools: NodePools) -> None:
    """A running 2-pod Job scaled to 3 pods no longer matches its Workload: it is stopped (Kueue's message), the
    old Workload is deleted (DeletedWorkload event) and a Workload of 3 pods is created, admitted and run."""
    cluster: FullCluster = node_pools.cluster
    spot = gpu_pools(node_pools, {"spot": (3, 4)})["spot"]
    with namespace(cluster, "job-scale") as ns:
        setup(cluster, gpu_queue_yaml(ns, f"cq-{ns}", [(spot, 12)]))
        manifest = gpu_job(ns, "train", pods=2, gpus=4)
        del manifest["spec"]["completions"]  # a work queue: its parallelism may change while it runs
        rest(cluster).request("POST", JOBS.format(ns=ns), body=manifest)
        wait_for("two pods running", lambda: len(running(pods_of(cluster, ns, "train"))) == 2, timeout=60)
        old = workload_of(cluster, ns, "train")
        assert old is not None and old["spec"]["podSets"][0]["count"] == 2
        rest(cluster).request("PATCH", f"{JOBS.format(ns=ns)}/train", body={"spec": {"parallelism": 3}},
                              content_type=MERGE)
        stopped = wait_for("the Job stopped", lambda: [e for e in _events(cluster, ns, "Stopped")
                                                       if e["involvedObject"]["name"] == "train"])
        assert stopped[0]["message"] == \
            "No matching Workload; restoring pod templates according to existent Workload"
        deleted = wait_for("the DeletedWorkload event", lambda: _events(cluster, ns, "DeletedWorkload"))
        assert deleted[0]["message"] == f"Deleted not matching Workload: {ns}/{old['metadata']['name']}"
        new = wait_for("a new Workload admitted", lambda: (w := workload_of(cluster, ns, "train"))
                       and w["metadata"]["uid"] != old["metadata"]["uid"] and _admitted(w) and w, timeout=60)
        assert new["spec"]["podSets"][0]["count"] == 3
        wait_for("three pods running", lambda: len(running(pods_of(cluster, ns, "train"))) == 3, timeout=60)
        workloads = get(cluster, f"/apis/kueue.x-k8s.io/v1beta2/namespaces/{ns}/workloads")["items"]
        assert len(workloads) == 1


def test_child_started_while_its_managed_parent_waits_is_suspended(jobset_loop: RunningLoop,
                                                                   node_pools: NodePools) -> None:
    """A Job controlled by a queued Job that is not admitted (no quota), started unsuspended and without a queue
    label, is suspended by the loop (Kueue's "Kueue managed child job suspended") and gets no Workload; once the
    parent is admitted, the child started again is left running."""
    cluster: FullCluster = node_pools.cluster
    pool = gpu_pools(node_pools, {"on-demand": (2, 4)})["on-demand"]  # untainted: the child needs no toleration
    with namespace(cluster, "child") as ns:
        cq = f"cq-{ns}"
        setup(cluster, gpu_queue_yaml(ns, cq, [(pool, 0)]))
        parent = rest(cluster).request("POST", JOBS.format(ns=ns), body=gpu_job(ns, "parent", pods=1, gpus=4))
        wait_for("the parent's Workload", lambda: workload_of(cluster, ns, "parent"), timeout=30)
        child = gpu_job(ns, "child", pods=1, gpus=4)
        del child["metadata"]["labels"]["kueue.x-k8s.io/queue-name"]
        child["spec"]["suspend"] = False
        child["metadata"]["ownerReferences"] = [{"apiVersion": "batch/v1", "kind": "Job", "name": "parent",
                                                 "uid": parent["metadata"]["uid"], "controller": True}]
        rest(cluster).request("POST", JOBS.format(ns=ns), body=child)
        wait_for("the child suspended", lambda: get(cluster, f"{JOBS.format(ns=ns)}/child")["spec"]["suspend"])
        wait_for("the loop's Suspended event", lambda: _ours(cluster, ns))
        assert workload_of(cluster, ns, "child") is None
        setup(cluster, gpu_queue_yaml(ns, cq, [(pool, 8)]))
        wait_for("the parent admitted", lambda: _admitted(workload_of(cluster, ns, "parent")), timeout=30)
        rest(cluster).request("PATCH", f"{JOBS.format(ns=ns)}/child", body={"spec": {"suspend": False}},
                              content_type=MERGE)
        wait_for("the child's pod running", lambda: running(pods_of(cluster, ns, "child")), timeout=60)
        assert get(cluster, f"{JOBS.format(ns=ns)}/child")["spec"]["suspend"] is False
        assert len(_ours(cluster, ns)) == 1, "the child was suspended again after its parent's admission"


def test_suspended_job_edited_while_its_workload_holds_quota_gets_a_new_workload(jobset_loop: RunningLoop,
                                                                                 node_pools: NodePools) -> None:
    """A suspended Job whose Workload reserved quota and waits for an admission check is given a toleration: the
    old Workload is deleted at once (DeletedWorkload), the Job keeps its edit, and a new Workload carrying the
    toleration reserves quota again."""
    cluster: FullCluster = node_pools.cluster
    pool = gpu_pools(node_pools, {"on-demand": (1, 8)})["on-demand"]
    with namespace(cluster, "job-edit") as ns:
        check = f"capacity-{ns}"
        text = gpu_queue_yaml(ns, f"cq-{ns}", [(pool, 8)]).replace(
            "  preemption:", f"  admissionChecksStrategy: {{admissionChecks: [{{name: {check}}}]}}\n  preemption:")
        apply(cluster, f"apiVersion: kueue.x-k8s.io/v1beta2\nkind: AdmissionCheck\nmetadata: {{name: {check}}}\n"
                       "spec: {controllerName: example.com/capacity}\n---\n" + text)
        set_check_active(cluster, check, True)
        rest(cluster).request("POST", JOBS.format(ns=ns), body=gpu_job(ns, "train", pods=1, gpus=4))
        old = wait_for("quota reserved, the check pending", lambda: (w := workload_of(cluster, ns, "train"))
                       and (c := cond(w, "QuotaReserved")) and c["status"] == "True" and w, timeout=30)
        toleration = {"key": "example.com/edited", "operator": "Exists", "effect": "NoSchedule"}
        rest(cluster).request("PATCH", f"{JOBS.format(ns=ns)}/train", content_type=MERGE,
                              body={"spec": {"template": {"spec": {"tolerations": [toleration]}}}})
        new = wait_for("a new Workload reserving quota", lambda: (w := workload_of(cluster, ns, "train"))
                       and w["metadata"]["uid"] != old["metadata"]["uid"]
                       and (c := cond(w, "QuotaReserved")) and c["status"] == "True" and w, timeout=30)
        assert new["spec"]["podSets"][0]["template"]["spec"]["tolerations"] == [toleration]
        assert [c["state"] for c in new["status"]["admissionChecks"]] == ["Pending"]
        deleted = wait_for("the DeletedWorkload event", lambda: _events(cluster, ns, "DeletedWorkload"))
        assert deleted[0]["message"] == f"Deleted not matching Workload: {ns}/{old['metadata']['name']}"
        job = get(cluster, f"{JOBS.format(ns=ns)}/train")
        assert job["spec"]["suspend"] is True
        assert job["spec"]["template"]["spec"]["tolerations"] == [toleration], "the Job's edit was undone"
