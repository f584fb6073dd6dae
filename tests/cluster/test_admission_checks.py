"""Admission checks on the rig: quota is reserved first, the Job starts only once every check is Ready."""

from __future__ import annotations

import pytest
from envtest_rig import Envtest
from test_admission_support import (
    admission,  # noqa: F401 - the fixture, used through usefixtures
    apply,
    cond,
    create_job,
    job,
    job_manifest,
    rest,
    wait_for,
    workload_of,
)

pytestmark = [pytest.mark.envtest, pytest.mark.usefixtures("admission")]


def test_job_waits_for_ready_admission_checks(kueue_clean: Envtest) -> None:
    """With an admission check on its ClusterQueue a Workload gets QuotaReserved, Admitted=False
    (UnsatisfiedAdmissionChecks) and a Pending check; when the check's controller sets it Ready the Workload is
    Admitted and its Job starts."""
    env = kueue_clean
    ns = env.new_namespace("checks")
    apply(env, f"""
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {{name: default-flavor}}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: AdmissionCheck
metadata: {{name: capacity-ok}}
spec: {{controllerName: example.com/capacity}}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {{name: checked-cq}}
spec:
  namespaceSelector: {{}}
  admissionChecksStrategy: {{admissionChecks: [{{name: capacity-ok}}]}}
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: default-flavor
      resources: [{{name: cpu, nominalQuota: "4"}}]
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {{name: queue, namespace: {ns}}}
spec: {{clusterQueue: checked-cq}}
""")
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
