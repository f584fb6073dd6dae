"""Admission checks on the rig: quota is reserved first, the Job starts only once every check is Ready."""

from __future__ import annotations

import pytest
from cluster_rig import (
    apply,
    cond,
    create_job,
    job,
    job_manifest,
    queue_setup,
    rest,
    wait_for,
    workload_of,
)
from envtest_rig import Envtest

pytestmark = [pytest.mark.envtest, pytest.mark.usefixtures("admission")]


def test_job_waits_for_ready_admission_checks(kueue_clean: Envtest) -> None:
    """With an admission check on its ClusterQueue a Workload gets QuotaReserved, Admitted=False
    (UnsatisfiedAdmissionChecks) and a Pending check; when the check's controller sets it Ready the Workload is
    Admitted and its Job starts."""
    env = kueue_clean
    ns = env.new_namespace("checks")
    apply(env, queue_setup(ns, "checked-cq", cpu="4", check="capacity-ok"))
    # as the check's controller: Kueue treats an AdmissionCheck without Active=True as inactive
    rest(env).request("PATCH", "/apis/kueue.x-k8s.io/v1beta2/admissionchecks/capacity-ok/status",
                      body={"status": {"conditions": [{
                          "type": "Active", "status": "True", "reason": "Active", "message": "ok",
                          "lastTransitionTime": "2026-01-01T00:00:00Z"}]}},
                      content_type="application/merge-patch+json")
    create_job(env, job_manifest(ns, "checked", "queue", {"cpu": "1"}))
    wl = wait_for("quota reserved", lambda: (w := workload_of(env, ns, "checked"))
                  and (c := cond(w, "QuotaReserved")) and c["status"] == "True" and w)
    admitted = cond(wl, "Admitted")
    assert (admitted["status"], admitted["reason"]) == ("False", "UnsatisfiedAdmissionChecks")
    assert [(c["name"], c["state"]) for c in wl["status"]["admissionChecks"]] == [("capacity-ok", "Pending")]
    assert job(env, ns, "checked")["spec"]["suspend"] is True
    checks = [{**c, "state": "Ready", "message": "capacity found"} for c in wl["status"]["admissionChecks"]]
    rest(env).request("PATCH", f"/apis/kueue.x-k8s.io/v1beta2/namespaces/{ns}/workloads/{wl['metadata']['name']}"
                               "/status", body={"status": {"admissionChecks": checks}},
                      content_type="application/merge-patch+json")
    wait_for("admitted", lambda: (c := cond(workload_of(env, ns, "checked"), "Admitted")) and c["status"] == "True")
    wait_for("job started", lambda: job(env, ns, "checked")["spec"]["suspend"] is False)
