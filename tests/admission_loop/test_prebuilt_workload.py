"""``kueue.x-k8s.io/prebuilt-workload-name``: a Job waits, suspended, for the Workload made for it, then runs
under that Workload — adopted, not duplicated; a prebuilt Workload that does not match the Job is finished
``OutOfSync`` and the Job stays suspended."""

from __future__ import annotations

import time
from typing import Any

import pytest
from cluster_rig import apply, cond, create_job, job, job_manifest, queue_setup, rest, wait_for, workloads
from envtest_rig import Envtest
from running_loop import RunningLoop

from gitopsq.admission_loop.prebuilt import PREBUILT

pytestmark = pytest.mark.envtest


def test_job_waits_for_its_prebuilt_workload_then_runs_under_it(kueue_clean: Envtest) -> None:
    """No Workload is created for a Job naming a prebuilt one that does not exist yet, and it stays suspended;
    once the Workload is created the loop adopts it (controller owner reference to the Job, job-uid label),
    admits it and starts the Job, and it remains the namespace's only Workload."""
    envtest = kueue_clean
    ns = envtest.new_namespace("prebuilt")
    apply(envtest, queue_setup(ns, f"cq-{ns}", cpu="2"))
    manifest = job_manifest(ns, "train", "queue", {"cpu": "1"}, labels={PREBUILT: "made-before"})
    with RunningLoop(envtest):
        created = create_job(envtest, manifest)
        time.sleep(2.0)
        assert workloads(envtest, ns) == [], "a Workload was created instead of waiting for the prebuilt one"
        assert job(envtest, ns, "train")["spec"]["suspend"] is True
        # the Job's template as the API server stored it (defaulted), as Kueue's own prebuilt tests build it
        _prebuilt(envtest, ns, "made-before", created["spec"]["template"], count=1)
        wait_for("the Job started", lambda: job(envtest, ns, "train")["spec"].get("suspend") is False)
        (wl,) = workloads(envtest, ns)
        assert wl["metadata"]["name"] == "made-before"
        (ref,) = wl["metadata"]["ownerReferences"]
        assert (ref["kind"], ref["name"], ref["uid"], ref["controller"]) == ("Job", "train",
                                                                             created["metadata"]["uid"], True)
        assert wl["metadata"]["labels"]["kueue.x-k8s.io/job-uid"] == created["metadata"]["uid"]


def _prebuilt(envtest: Envtest, ns: str, name: str, template: dict[str, Any], *, count: int) -> None:
    rest(envtest).request("POST", f"/apis/kueue.x-k8s.io/v1beta2/namespaces/{ns}/workloads", body={
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload", "metadata": {"name": name, "namespace": ns},
        "spec": {"queueName": "queue", "podSets": [{"name": "main", "count": count, "template": template}]}})


def test_prebuilt_workload_not_matching_the_job_is_finished_out_of_sync(kueue_clean: Envtest) -> None:
    """A prebuilt Workload whose pod set count differs from the Job's parallelism is adopted, then marked
    Finished with Kueue's reason OutOfSync and message, and the Job is never started."""
    envtest = kueue_clean
    ns = envtest.new_namespace("prebuilt-sync")
    apply(envtest, queue_setup(ns, f"cq-{ns}", cpu="4"))
    manifest = job_manifest(ns, "train", "queue", {"cpu": "1"}, labels={PREBUILT: "made-wrong"})
    with RunningLoop(envtest):
        created = create_job(envtest, manifest)
        _prebuilt(envtest, ns, "made-wrong", created["spec"]["template"], count=3)  # the Job runs 1 pod
        finished = wait_for("the prebuilt Workload finished", lambda: cond(
            next(iter(workloads(envtest, ns)), None), "Finished"))
        assert (finished["status"], finished["reason"], finished["message"]) == (
            "True", "OutOfSync", "The prebuilt workload is out of sync with its user job")
        time.sleep(1.5)
        assert job(envtest, ns, "train")["spec"]["suspend"] is True
        (wl,) = workloads(envtest, ns)
        assert wl["metadata"]["name"] == "made-wrong", "a second Workload was created for the Job"
        assert wl["metadata"]["ownerReferences"][0]["uid"] == created["metadata"]["uid"]
