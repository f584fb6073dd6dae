"""An enabled integration whose CRD is not installed is reported and skipped — batch Jobs keep being admitted —
and is picked up, without a restart, once its CRD appears (the bare rig: the loop's side only, no JobSet
controller)."""

from __future__ import annotations

import dataclasses

import pytest
from cluster_rig import admitted, apply, create_job, job, job_manifest, queue_setup, wait_for
from envtest_rig import Envtest
from envtestrig.build import jobset_crds
from jobset_rig import create_jobset, get_jobset, jobset, replicated, workload_of_jobset
from running_loop import FAST, RunningLoop

from gitopsq.metrics import KueueMetrics

pytestmark = pytest.mark.envtest

CRD = "customresourcedefinition/jobsets.jobset.x-k8s.io"


def _gauge(metrics: KueueMetrics, framework: str) -> float | None:
    return metrics.registry.get_sample_value("gitopsq_integration_active", {"framework": framework})


def test_jobset_crd_installed_while_the_loop_runs_is_picked_up(kueue_clean: Envtest) -> None:
    """With the JobSet CRD absent the loop starts, reports the integration inactive (gauge 0) and admits a batch
    Job; once the CRD is installed it starts watching JobSets and a queued JobSet gets its Workload, is admitted
    and unsuspended (gauge 1)."""
    envtest = kueue_clean
    envtest.kubectl("delete", CRD, "--ignore-not-found", "--wait=true")
    ns = envtest.new_namespace("crd-later")
    apply(envtest, queue_setup(ns, f"cq-{ns}", cpu="8"))
    metrics = KueueMetrics()
    options = dataclasses.replace(FAST, integrations=("batch/job", "jobset.x-k8s.io/jobset"), integration_recheck=0.5)
    try:
        with RunningLoop(envtest, options, metrics=metrics) as running:
            assert "jobset.x-k8s.io/jobset" in running.loop.integrations.absent
            assert _gauge(metrics, "jobset.x-k8s.io/jobset") == 0.0
            assert _gauge(metrics, "batch/job") == 1.0
            create_job(envtest, job_manifest(ns, "plain", "queue", {"cpu": "1"}))
            wait_for("the batch Job admitted", lambda: admitted(envtest, ns, "plain"))
            wait_for("the batch Job started", lambda: job(envtest, ns, "plain")["spec"].get("suspend") is False)

            for crd in jobset_crds():
                envtest.kubectl("apply", "--server-side", "-f", str(crd))
            wait_for("JobSets served", lambda: envtest.kubectl("get", "jobsets", "-n", ns, check=False).returncode
                     == 0, timeout=30)
            create_jobset(envtest, jobset(ns, "late", replicated("workers", replicas=2, pods=1, gpus=0)))
            wl = wait_for("the JobSet's Workload", lambda: workload_of_jobset(envtest, ns, "late"), timeout=30)
            assert [(p["name"], p["count"]) for p in wl["spec"]["podSets"]] == [("workers", 2)]
            wait_for("the JobSet started", lambda: get_jobset(envtest, ns, "late")["spec"].get("suspend") is False,
                     timeout=30)
            assert _gauge(metrics, "jobset.x-k8s.io/jobset") == 1.0
            assert not running.loop.integrations.absent
    finally:
        envtest.kubectl("delete", CRD, "--ignore-not-found", "--wait=false", check=False)
