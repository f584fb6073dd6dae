"""The admission check's controller as the full-rig tests play it (no tests here): its ``Active`` condition and
the state of its checks on a Workload, written through the status subresource."""

from __future__ import annotations

import time
from typing import Any

from cluster_rig import rest
from envtest_rig import FullCluster

MERGE = "application/merge-patch+json"


def set_check_active(cluster: FullCluster, name: str, active: bool) -> None:
    """As the check's controller: the AdmissionCheck's own ``Active`` condition."""
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    body = {"status": {"conditions": [{"type": "Active", "status": "True" if active else "False",
                                       "reason": "Active" if active else "Inactive", "message": "by the test",
                                       "lastTransitionTime": now}]}}
    rest(cluster).request("PATCH", f"/apis/kueue.x-k8s.io/v1beta2/admissionchecks/{name}/status", body=body,
                          content_type=MERGE)


def set_check_state(cluster: FullCluster, wl: dict[str, Any], state: str, message: str,
                    requeue_after: int | None = None) -> str:
    """As the check's controller: the state of every check on the Workload's status; returns the
    ``lastTransitionTime`` written (whole seconds, as the API serialises it)."""
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    checks = []
    for c in wl["status"]["admissionChecks"]:
        item = {**c, "state": state, "message": message, "lastTransitionTime": now}
        if requeue_after is not None:
            item["requeueAfterSeconds"] = requeue_after
        checks.append(item)
    meta = wl["metadata"]
    rest(cluster).request("PATCH", f"/apis/kueue.x-k8s.io/v1beta2/namespaces/{meta['namespace']}/workloads/"
                                   f"{meta['name']}/status", body={"status": {"admissionChecks": checks}},
                          content_type=MERGE)
    return now
