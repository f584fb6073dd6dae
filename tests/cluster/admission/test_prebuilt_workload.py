"""``kueue.x-k8s.io/prebuilt-workload-name``: a Job waits, suspended, for the Workload made for it, then runs
under that Workload — adopted, not duplicated."""

from __future__ import annotations

import time

import pytest
from cluster_rig import apply, create_job, job, job_manifest, queue_setup, rest, wait_for, workloads
from envtest_rig import Envtest
from running_loop import RunningLoop

from gitopsq.cluster.admission.prebuilt import PREBUILT

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
        template = manifest["spec"]["template"]
        rest(envtest).request("POST", f"/apis/kueue.x-k8s.io/v1beta2/namespaces/{ns}/workloads", body={
            "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
            "metadata": {"name": "made-before", "namespace": ns},
            "spec": {"queueName": "queue", "podSets": [{"name": "main", "count": 1, "template": template}]}})
        wait_for("the Job started", lambda: job(envtest, ns, "train")["spec"].get("suspend") is False)
        (wl,) = workloads(envtest, ns)
        assert wl["metadata"]["name"] == "made-before"
        (ref,) = wl["metadata"]["ownerReferences"]
        assert (ref["kind"], ref["name"], ref["uid"], ref["controller"]) == ("Job", "train",
                                                                             created["metadata"]["uid"], True)
        assert wl["metadata"]["labels"]["kueue.x-k8s.io/job-uid"] == created["metadata"]["uid"]
