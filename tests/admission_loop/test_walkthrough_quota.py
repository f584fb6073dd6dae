"""Walkthroughs (1) and (2) on the real API server: a CPU queue with a job that waits, and a GPU flavor filled
to exactly its nominal quota."""

from __future__ import annotations

import pytest
from cluster_rig import (
    admitted,
    apply,
    cluster_queue,
    columns,
    cond,
    create_job,
    finish_job,
    flavors_usage,
    job,
    job_manifest,
    wait_for,
    workload_of,
    workloads,
)
from envtest_rig import Envtest

pytestmark = [pytest.mark.envtest, pytest.mark.usefixtures("admission")]


def queues(ns: str, *, cpu: str = "4", memory: str = "8Gi", flavor: str = "default-flavor") -> str:
    return f"""
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {{name: {flavor}}}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {{name: cluster-queue}}
spec:
  namespaceSelector: {{}}
  resourceGroups:
  - coveredResources: [cpu, memory]
    flavors:
    - name: {flavor}
      resources:
      - {{name: cpu, nominalQuota: "{cpu}"}}
      - {{name: memory, nominalQuota: {memory}}}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {{name: user-queue, namespace: {ns}}}
spec: {{clusterQueue: cluster-queue}}
"""


def test_third_job_waits_with_kueue_message_until_one_completes(kueue_clean: Envtest) -> None:
    """Jobs of 1 and 2 CPU are admitted into a 4 CPU queue; a third of 2 CPU waits with Kueue's message and is
    admitted, unsuspended, once the first completes."""
    env = kueue_clean
    ns = env.new_namespace("wt1")
    apply(env, queues(ns))
    for name, cpu in (("small", "1"), ("medium", "2")):
        create_job(env, job_manifest(ns, name, "user-queue", {"cpu": cpu, "memory": "1Gi"}))
        wait_for(f"{name} admitted", lambda n=name: admitted(env, ns, n))
    create_job(env, job_manifest(ns, "third", "user-queue", {"cpu": "2", "memory": "1Gi"}))
    reserved = wait_for("third pending with a reason",
                        lambda: (c := cond(workload_of(env, ns, "third"), "QuotaReserved")) and c["status"] == "False"
                        and c["reason"] != "Pending" and c)
    assert (reserved["reason"], reserved["message"]) == (
        "WaitingForQuota",
        "couldn't assign flavors to pod set main: insufficient unused quota for cpu in flavor default-flavor, "
        "1 more needed")
    assert job(env, ns, "third")["spec"]["suspend"] is True
    wait_for("small started", lambda: job(env, ns, "small")["spec"]["suspend"] is False)  # a write after admission
    usage = wait_for("usage of 3 cpu", lambda: (u := flavors_usage(cluster_queue(env, "cluster-queue")))
                     and u[("default-flavor", "cpu")] == "3" and u)
    assert usage[("default-flavor", "memory")] == "2Gi"
    cq_table = wait_for("kubectl shows the pending count", lambda: (out := env.kubectl(
        "get", "clusterqueue", "cluster-queue").stdout) and columns(out, "PENDING WORKLOADS") == [("1",)] and out)
    assert columns(cq_table, "NAME") == [("cluster-queue",)]
    lq_table = env.kubectl("get", "localqueue", "-n", ns).stdout
    assert columns(lq_table, "CLUSTERQUEUE", "PENDING WORKLOADS", "ADMITTED WORKLOADS") == [
        ("cluster-queue", "1", "2")], lq_table

    events = ("get", "events", "-n", ns, "-o", "jsonpath={range .items[*]}{.involvedObject.kind}/{.reason}{'\\n'}{end}")
    reasons = wait_for("events", lambda: (out := env.kubectl(*events).stdout) and "Job/Started" in out
                       and "Workload/WaitingForQuota" in out and out)
    assert {"Workload/QuotaReserved", "Workload/Admitted", "Job/CreatedWorkload"} <= set(reasons.split()), reasons
    finish_job(env, ns, "small")
    wait_for("third admitted", lambda: admitted(env, ns, "third"))
    wait_for("third unsuspended", lambda: job(env, ns, "third")["spec"]["suspend"] is False)
    finished = cond(workload_of(env, ns, "small"), "Finished")
    assert finished is not None and (finished["status"], finished["reason"]) == ("True", "Succeeded")
    out = env.kubectl("get", "workloads", "-n", ns).stdout
    assert sorted(columns(out, "QUEUE", "RESERVED IN", "ADMITTED", "FINISHED")) == [
        ("user-queue", "cluster-queue", "True", ""), ("user-queue", "cluster-queue", "True", ""),
        ("user-queue", "cluster-queue", "True", "True")], out


def test_gpu_flavor_admits_exactly_its_nominal_quota(kueue_clean: Envtest) -> None:
    """33 jobs of 2 GPUs against nominalQuota 64: 32 admitted, the 33rd waits for nvidia.com/gpu in the flavor,
    and flavorsUsage shows 64."""
    env = kueue_clean
    ns = env.new_namespace("wt2")
    apply(env, f"""
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {{name: a100}}
spec:
  nodeLabels: {{gpu.example.com/model: a100}}
  tolerations: [{{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}}]
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {{name: gpu-queue}}
spec:
  namespaceSelector: {{}}
  resourceGroups:
  - coveredResources: [nvidia.com/gpu]
    flavors:
    - name: a100
      resources: [{{name: nvidia.com/gpu, nominalQuota: 64}}]
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {{name: gpus, namespace: {ns}}}
spec: {{clusterQueue: gpu-queue}}
""")
    for i in range(33):
        create_job(env, job_manifest(ns, f"train-{i:02d}", "gpus", {"nvidia.com/gpu": "2"}))

    def settled() -> list[dict[str, object]] | None:
        wls = workloads(env, ns)
        done = len(wls) == 33 and all(cond(w, "QuotaReserved") for w in wls)
        return wls if done and sum(cond(w, "Admitted") is not None and cond(w, "Admitted")["status"] == "True"
                                   for w in wls) == 32 else None

    wls = wait_for("32 admitted", settled, timeout=60)
    waiting = [w for w in wls if cond(w, "QuotaReserved")["status"] == "False"]
    assert len(waiting) == 1
    c = cond(waiting[0], "QuotaReserved")
    assert c["message"] == ("couldn't assign flavors to pod set main: insufficient unused quota for nvidia.com/gpu "
                            "in flavor a100, 2 more needed"), c
    # Counts in a ClusterQueue's status may lag by one status interval (2 s, docs/admission-loop.md): wait for them.
    cq = wait_for("flavorsUsage 64, 32 admitted, 1 pending", lambda: (q := cluster_queue(env, "gpu-queue"))
                  and flavors_usage(q).get(("a100", "nvidia.com/gpu")) == "64"
                  and (q["status"].get("admittedWorkloads"), q["status"].get("pendingWorkloads")) == (32, 1) and q)
    assert flavors_usage(cq) == {("a100", "nvidia.com/gpu"): "64"}
    started = wait_for("jobs started with the flavor's labels", lambda: (j := job(env, ns, "train-00"))
                       and j["spec"]["suspend"] is False and j)
    pod = started["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == {"gpu.example.com/model": "a100"}
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in pod["tolerations"]
