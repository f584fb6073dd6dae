"""The TrainJob integration with its CRDs absent at start: reported and skipped while batch Jobs are admitted, and
picked up without a restart once the Trainer CRDs and the JobSet CRD it reads (its related kinds) are served
(the bare rig: the loop's side only; the Trainer controller's side is test_full_rig_trainjob.py)."""

from __future__ import annotations

import dataclasses

import pytest
from cluster_rig import admitted, apply, create_job, job, job_manifest, queue_setup, wait_for
from envtest_rig import Envtest
from envtestrig.build import jobset_crds
from envtestrig.trainer import CRD_NAMES, trainer_crds
from running_loop import FAST, RunningLoop
from trainjob_objects import (
    create_runtime,
    create_trainjob,
    get_trainjob,
    torch_runtime,
    trainjob,
    workload_of_trainjob,
)

from gitopsq.metrics import KueueMetrics

pytestmark = pytest.mark.envtest

FRAMEWORK = "trainer.kubeflow.org/trainjob"
CRDS = [f"customresourcedefinition/{name}" for name in (*CRD_NAMES, "jobsets.jobset.x-k8s.io")]


def _gauge(metrics: KueueMetrics, framework: str) -> float | None:
    return metrics.registry.get_sample_value("gitopsq_integration_active", {"framework": framework})


def test_trainjob_crds_installed_while_the_loop_runs_are_picked_up(kueue_clean: Envtest) -> None:
    """With no Trainer or JobSet CRD the loop starts, reports the TrainJob integration inactive and admits a batch
    Job; with the Trainer CRDs alone it stays skipped, naming the missing JobSet CRD; once that is installed too
    a queued TrainJob gets its Workload (pod set ``node`` of 2, from its runtime), is admitted and unsuspended
    with gitopsq's podSpecOverride."""
    envtest = kueue_clean
    envtest.kubectl("delete", *CRDS, "--ignore-not-found", "--wait=true")
    ns = envtest.new_namespace("tj-later")
    apply(envtest, queue_setup(ns, f"cq-{ns}", cpu="8"))
    metrics = KueueMetrics()
    options = dataclasses.replace(FAST, integrations=("batch/job", FRAMEWORK), integration_recheck=0.5)
    try:
        with RunningLoop(envtest, options, metrics=metrics) as running:
            assert FRAMEWORK in running.loop.integrations.absent
            assert _gauge(metrics, FRAMEWORK) == 0.0
            create_job(envtest, job_manifest(ns, "plain", "queue", {"cpu": "1"}))
            wait_for("the batch Job admitted", lambda: admitted(envtest, ns, "plain"))
            wait_for("the batch Job started", lambda: job(envtest, ns, "plain")["spec"].get("suspend") is False)

            for crd in trainer_crds():
                envtest.kubectl("apply", "--server-side", "-f", str(crd))
            wait_for("TrainJobs served", lambda: envtest.kubectl("get", "trainjobs", "-n", ns, check=False)
                     .returncode == 0, timeout=30)
            wait_for("the missing JobSet CRD named", lambda: "jobsets.jobset.x-k8s.io is not installed" in
                     running.loop.integrations.absent.get(FRAMEWORK, ""), timeout=10)
            for crd in jobset_crds():
                envtest.kubectl("apply", "--server-side", "-f", str(crd))
            create_runtime(envtest, torch_runtime(f"torch-{ns}"))
            manifest = trainjob(ns, "late", f"torch-{ns}", nodes=2, gpus=0)
            manifest["spec"]["trainer"]["resourcesPerNode"] = {"requests": {"cpu": "1"}}
            create_trainjob(envtest, manifest)
            wl = wait_for("the TrainJob's Workload", lambda: workload_of_trainjob(envtest, ns, "late"), timeout=30)
            assert [(p["name"], p["count"]) for p in wl["spec"]["podSets"]] == [("node", 2)]
            started = wait_for("the TrainJob started", lambda: get_trainjob(envtest, ns, "late")["spec"].get(
                "suspend") is False and get_trainjob(envtest, ns, "late"), timeout=30)
            assert [o["targetJobs"] for o in started["spec"]["podSpecOverrides"]] == [[{"name": "node"}]]
            assert _gauge(metrics, FRAMEWORK) == 1.0
            assert not running.loop.integrations.absent
    finally:
        envtest.kubectl("delete", "clustertrainingruntime", f"torch-{ns}", "--ignore-not-found", check=False)
        envtest.kubectl("delete", *CRDS, "--ignore-not-found", "--wait=false", check=False)
