"""The admission loop on Kueue v0.19.2's own CRDs (from the Go module cache), not gitopsq's: a cluster that keeps
Kueue's CRDs when moving its admission to gitopsq (docs/deploy.md), and the setting of
``benchmarks/kueue-side-by-side --crds kueue``. Kueue's schema validates every pod template field and carries
CEL rules that gitopsq's free-form one does not, so every write the loop makes — the Workload it creates for a
Job, admission, pending reason, eviction, ClusterQueue and LocalQueue status — must pass a stricter server."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from cluster_rig import (
    admitted,
    apply,
    cond,
    create_job,
    finish_job,
    get,
    job,
    job_manifest,
    queue_setup,
    wait_for,
    workload_of,
)
from envtest_rig import REPO_ROOT, Envtest, Rig, prepare
from running_loop import RunningLoop

pytestmark = pytest.mark.envtest


@pytest.fixture(scope="module")
def upstream(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Envtest]:
    """A rig of its own (the session's carries gitopsq's CRDs) with Kueue's CRDs applied and Established."""
    sys.path.insert(0, str(REPO_ROOT / "hack" / "kueue"))
    import kueuebuild

    crds = kueuebuild.crd_dir()
    binaries = prepare(log=True)
    rig = Rig.start(binaries, Path(tmp_path_factory.mktemp("upstream-crds")))
    try:
        env = Envtest(rig, str(binaries.kubectl))
        env.kubectl("apply", "--server-side", "-f", str(crds))
        env.kubectl("wait", "--for=condition=Established", "--timeout=60s", "crd", "--all")
        served = env.kubectl("get", "crd", "workloads.kueue.x-k8s.io", "-o", "jsonpath={.spec.versions[*].name}")
        assert served.stdout.split() == ["v1beta1", "v1beta2"], "not Kueue's CRD (gitopsq's serves v1beta2 only)"
        yield env
    finally:
        rig.stop()


def test_every_write_of_the_loop_passes_kueues_schema(upstream: Envtest) -> None:
    """A Job gets its Workload (Kueue's schema validates the copied pod template), is admitted and started; a
    second waits with a pending reason; an urgent one preempts the first (eviction written, Job suspended again)
    and is admitted; the ClusterQueue's and LocalQueue's status counts and reservations are written; when the
    urgent Job finishes the first is admitted again. Each step is read back from the server."""
    env = upstream
    ns = env.new_namespace("upstream")
    apply(env, queue_setup(ns, "upstream-cq", cpu="2", priority_classes={"urgent": 100},
                           preemption="LowerPriority"))
    with RunningLoop(env):
        create_job(env, job_manifest(ns, "low", "queue", {"cpu": "2"}))
        wait_for("low admitted", lambda: admitted(env, ns, "low"))
        wait_for("low started", lambda: job(env, ns, "low")["spec"]["suspend"] is False)
        low = workload_of(env, ns, "low")
        assert low is not None
        assert low["status"]["admission"]["clusterQueue"] == "upstream-cq"
        assert low["spec"]["podSets"][0]["template"]["spec"]["containers"][0]["resources"]["requests"] == \
            {"cpu": "2"}

        create_job(env, job_manifest(ns, "waiter", "queue", {"cpu": "1"}))
        waiting = wait_for("waiter's pending reason", lambda: (c := cond(workload_of(env, ns, "waiter"),
                                                                          "QuotaReserved")) and c["status"] == "False"
                           and c)
        assert waiting["reason"] == "WaitingForQuota" and "insufficient" in waiting["message"], waiting

        status = wait_for("ClusterQueue status", lambda: (s := get(
            env, "/apis/kueue.x-k8s.io/v1beta2/clusterqueues/upstream-cq").get("status") or {})
            .get("pendingWorkloads") == 1 and s)
        assert (status["reservingWorkloads"], status["admittedWorkloads"]) == (1, 1)
        assert status["flavorsReservation"][0]["resources"][0] == {"name": "cpu", "total": "2", "borrowed": "0"}
        local = wait_for("LocalQueue status", lambda: (s := get(
            env, f"/apis/kueue.x-k8s.io/v1beta2/namespaces/{ns}/localqueues/queue").get("status") or {})
            .get("pendingWorkloads") == 1 and s)
        assert local["admittedWorkloads"] == 1

        create_job(env, job_manifest(ns, "urgent", "queue", {"cpu": "2"},
                                     labels={"kueue.x-k8s.io/priority-class": "urgent"}))
        evicted = wait_for("low evicted", lambda: (c := cond(workload_of(env, ns, "low"), "Evicted"))
                           and c["status"] == "True" and c)
        assert evicted["reason"] == "Preempted"
        preempted = cond(workload_of(env, ns, "low"), "Preempted")
        assert preempted is not None and preempted["reason"] == "InClusterQueue"
        wait_for("urgent admitted", lambda: admitted(env, ns, "urgent"), timeout=30)
        assert job(env, ns, "low")["spec"]["suspend"] is True
        assert not admitted(env, ns, "low")

        finish_job(env, ns, "urgent")
        wait_for("urgent's Workload finished", lambda: (c := cond(workload_of(env, ns, "urgent"), "Finished"))
                 and c["status"] == "True")
        wait_for("low admitted again", lambda: admitted(env, ns, "low"), timeout=30)
