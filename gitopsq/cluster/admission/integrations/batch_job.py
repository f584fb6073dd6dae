"""batch/v1 Job: one pod set ``main`` of ``min(parallelism, completions)`` pods (Kueue's job controller)."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from gitopsq.cluster.admission.integrations.base import PodSetPlacement


def _template_spec(job: Mapping[str, Any]) -> Mapping[str, Any]:
    return ((job.get("spec") or {}).get("template") or {}).get("spec") or {}


class BatchJob:
    kind = "Job"
    group = "batch"
    version = "v1"
    resource = "jobs"

    def collection_path(self, namespace: str) -> str:
        return f"/apis/batch/v1/namespaces/{namespace}/jobs"

    def pod_sets(self, job: Mapping[str, Any]) -> list[dict[str, Any]]:
        spec = job.get("spec") or {}
        parallelism = spec.get("parallelism")
        parallelism = 1 if parallelism is None else int(parallelism)
        completions = spec.get("completions")
        count = parallelism if completions is None else min(parallelism, int(completions))
        template = copy.deepcopy(spec.get("template") or {})
        template.get("metadata", {}).pop("creationTimestamp", None)
        return [{"name": "main", "count": count, "template": template}]

    def is_suspended(self, job: Mapping[str, Any]) -> bool:
        return bool((job.get("spec") or {}).get("suspend"))

    def active_pods(self, job: Mapping[str, Any]) -> int:
        status = job.get("status") or {}
        return int(status.get("active") or 0) + int(status.get("terminating") or 0)

    def finished(self, job: Mapping[str, Any]) -> tuple[str, str] | None:
        for c in (job.get("status") or {}).get("conditions") or ():
            if c.get("status") == "True" and c.get("type") in ("Complete", "Failed"):
                reason = "Succeeded" if c["type"] == "Complete" else "Failed"
                return reason, str(c.get("message") or ("Job finished successfully" if reason == "Succeeded"
                                                        else "Job failed"))
        return None

    def start_patch(self, job: Mapping[str, Any], placements: tuple[PodSetPlacement, ...]) -> dict[str, Any]:
        current = _template_spec(job)
        selector = dict(current.get("nodeSelector") or {})
        tolerations = list(current.get("tolerations") or [])
        for p in placements:
            selector.update(p.node_selector)
            tolerations.extend(t for t in p.tolerations if t not in tolerations)
        pod_spec: dict[str, Any] = {"nodeSelector": selector or None}
        if tolerations:
            pod_spec["tolerations"] = tolerations
        return {"spec": {"suspend": False, "template": {"spec": pod_spec}}}

    def suspend_patch(self, job: Mapping[str, Any]) -> dict[str, Any]:
        return {"spec": {"suspend": True}}

    def restore_patch(self, job: Mapping[str, Any], original: list[Mapping[str, Any]]) -> dict[str, Any] | None:
        if not original:
            return None
        want = (original[0].get("template") or {}).get("spec") or {}
        have = _template_spec(job)
        want_sel, have_sel = dict(want.get("nodeSelector") or {}), dict(have.get("nodeSelector") or {})
        want_tol, have_tol = list(want.get("tolerations") or []), list(have.get("tolerations") or [])
        if want_sel == have_sel and want_tol == have_tol:
            return None
        selector: dict[str, Any] = {k: None for k in have_sel if k not in want_sel}
        selector.update(want_sel)
        return {"spec": {"template": {"spec": {"nodeSelector": selector or None, "tolerations": want_tol or None}}}}
