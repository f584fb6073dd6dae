"""The Ray integrations enabled while KubeRay's CRDs are not installed: reported and skipped — batch Jobs keep
being admitted — and picked up, without a restart, once the CRDs appear (the bare rig: the loop's side only, no
KubeRay operator; the CRDs come from the pinned ray-operator module, as the full rig installs them)."""

from __future__ import annotations

import dataclasses

import pytest
from cluster_rig import admitted, apply, create_job, job, job_manifest, queue_setup, wait_for
from envtest_rig import Envtest
from envtestrig.kuberay import CRDS, kuberay_crds
from ray_objects import cluster_spec, create, get_raycluster, get_rayjob, raycluster, rayjob, worker_group, workload_of
from running_loop import FAST, RunningLoop

from gitopsq.metrics import KueueMetrics

pytestmark = pytest.mark.envtest

RAY = ("ray.io/rayjob", "ray.io/raycluster")


def _gauge(metrics: KueueMetrics, framework: str) -> float | None:
    return metrics.registry.get_sample_value("gitopsq_integration_active", {"framework": framework})


def _delete_crds(envtest: Envtest, wait: bool) -> None:
    for name in CRDS:
        envtest.kubectl("delete", f"customresourcedefinition/{name}", "--ignore-not-found",
                        f"--wait={str(wait).lower()}", check=wait)


def test_ray_crds_installed_while_the_loop_runs_are_picked_up(kueue_clean: Envtest) -> None:
    """With the Ray CRDs absent the loop starts, reports both Ray integrations inactive (gauge 0) and admits a
    batch Job; once the CRDs are installed a queued RayJob and a queued RayCluster each get a Workload of their pod
    sets and are admitted and unsuspended (gauges 1), while a queued RayJob on an existing cluster (clusterSelector)
    is left alone."""
    envtest = kueue_clean
    _delete_crds(envtest, wait=True)
    ns = envtest.new_namespace("ray-later")
    apply(envtest, queue_setup(ns, f"cq-{ns}", cpu="16"))
    metrics = KueueMetrics()
    options = dataclasses.replace(FAST, integrations=("batch/job", *RAY), integration_recheck=0.5)
    try:
        with RunningLoop(envtest, options, metrics=metrics) as running:
            assert set(RAY) <= set(running.loop.integrations.absent)
            assert [_gauge(metrics, f) for f in RAY] == [0.0, 0.0]
            create_job(envtest, job_manifest(ns, "plain", "queue", {"cpu": "1"}))
            wait_for("the batch Job admitted", lambda: admitted(envtest, ns, "plain"))
            wait_for("the batch Job started", lambda: job(envtest, ns, "plain")["spec"].get("suspend") is False)

            for crd in kuberay_crds():
                envtest.kubectl("apply", "--server-side", "-f", str(crd))
            wait_for("RayJobs served", lambda: envtest.kubectl("get", "rayjobs", "-n", ns, check=False).returncode
                     == 0, timeout=30)
            spec = cluster_spec(worker_group("workers", replicas=2, gpus=0))
            elsewhere = rayjob(ns, "on-existing", spec, suspend=False)
            elsewhere["spec"] = {**elsewhere["spec"], "clusterSelector": {"ray.io/cluster": "shared"}}
            del elsewhere["spec"]["rayClusterSpec"]
            create(envtest, elsewhere)
            create(envtest, rayjob(ns, "late", spec))
            create(envtest, raycluster(ns, "late-cluster", spec))
            wl = wait_for("the RayJob's Workload", lambda: workload_of(envtest, "RayJob", ns, "late"), timeout=30)
            assert [(p["name"], p["count"]) for p in wl["spec"]["podSets"]] == [("head", 1), ("workers", 2),
                                                                                 ("submitter", 1)]
            wait_for("the RayJob started", lambda: get_rayjob(envtest, ns, "late")["spec"].get("suspend") is False,
                     timeout=30)
            wait_for("the RayCluster started", lambda: get_raycluster(envtest, ns, "late-cluster")["spec"].get(
                "suspend") is False, timeout=30)
            assert workload_of(envtest, "RayJob", ns, "on-existing") is None, "a clusterSelector RayJob was queued"
            assert get_rayjob(envtest, ns, "on-existing")["spec"].get("suspend") is False
            assert [_gauge(metrics, f) for f in RAY] == [1.0, 1.0]
            assert not running.loop.integrations.absent
    finally:
        _delete_crds(envtest, wait=False)
