"""Shared builders and helpers of the rig tests (no tests here): Kueue objects, Jobs, REST reads, waiting. The
admission loop's own (a running loop, its fixture) are in admission_loop/running_loop.py."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from envtest_rig import Envtest

from gitopsq.cluster.apply import KubeRest

T = TypeVar("T")


def rest(envtest: Envtest) -> KubeRest:
    return KubeRest(envtest.api_client())


def wait_for(what: str, probe: Callable[[], T | None], timeout: float = 20.0) -> T:
    """Poll ``probe`` until it returns something truthy; fail with ``what`` and the last value otherwise."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = probe()
        if last:
            return last
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}; last value: {last!r}")


def apply(envtest: Envtest, text: str) -> None:
    envtest.kubectl("apply", "--server-side", "-f", "-", stdin=text)


def job_manifest(namespace: str, name: str, queue: str | None, requests: dict[str, str], *, suspend: bool = True,
                 parallelism: int = 1, labels: dict[str, str] | None = None,
                 priority_class: str | None = None) -> dict[str, Any]:
    meta_labels = dict(labels or {})
    if queue is not None:
        meta_labels["kueue.x-k8s.io/queue-name"] = queue
    pod_spec: dict[str, Any] = {"restartPolicy": "Never", "containers": [
        {"name": "main", "image": "registry.k8s.io/pause:3.10", "resources": {
            "requests": requests, "limits": {r: q for r, q in requests.items() if "/" in r}}}]}
    if priority_class:
        pod_spec["priorityClassName"] = priority_class
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "namespace": namespace, "labels": meta_labels},
            "spec": {"suspend": suspend, "parallelism": parallelism, "completions": parallelism,
                     "template": {"spec": pod_spec}}}


def create_job(envtest: Envtest, manifest: dict[str, Any]) -> dict[str, Any]:
    ns = manifest["metadata"]["namespace"]
    answer: dict[str, Any] = rest(envtest).request("POST", f"/apis/batch/v1/namespaces/{ns}/jobs", body=manifest)
    return answer


def get(envtest: Envtest, path: str) -> dict[str, Any]:
    answer: dict[str, Any] = rest(envtest).request("GET", path)
    return answer


def job(envtest: Envtest, ns: str, name: str) -> dict[str, Any]:
    return get(envtest, f"/apis/batch/v1/namespaces/{ns}/jobs/{name}")


def workloads(envtest: Envtest, ns: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = get(envtest, f"/apis/kueue.x-k8s.io/v1beta2/namespaces/{ns}/workloads")["items"]
    return items


def workload_of(envtest: Envtest, ns: str, job_name: str) -> dict[str, Any] | None:
    for wl in workloads(envtest, ns):
        if any(r.get("name") == job_name and r.get("kind") == "Job"
               for r in wl["metadata"].get("ownerReferences") or ()):
            return wl
    return None


def cond(obj: dict[str, Any] | None, kind: str) -> dict[str, Any] | None:
    for c in ((obj or {}).get("status") or {}).get("conditions") or ():
        if c["type"] == kind:
            return c  # type: ignore[no-any-return]
    return None


def holds(obj: dict[str, Any] | None, kind: str) -> dict[str, Any] | None:
    """The condition ``kind`` of ``obj`` when its status is True, else None."""
    c = cond(obj, kind)
    return c if c is not None and c["status"] == "True" else None


def admitted(envtest: Envtest, ns: str, job_name: str) -> bool:
    c = cond(workload_of(envtest, ns, job_name), "Admitted")
    return c is not None and c["status"] == "True"


def finish_job(envtest: Envtest, ns: str, name: str, *, failed: bool = False) -> None:
    """What the job controller would write when the job ends (envtest has no controller-manager)."""
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    kind = "Failed" if failed else "Complete"
    interim = "FailureTarget" if failed else "SuccessCriteriaMet"
    status: dict[str, Any] = {"startTime": now, "conditions": [
        {"type": interim, "status": "True", "lastProbeTime": now, "lastTransitionTime": now,
         "reason": "BackoffLimitExceeded" if failed else "CompletionsReached", "message": "done"},
        {"type": kind, "status": "True", "lastProbeTime": now, "lastTransitionTime": now,
         "reason": "BackoffLimitExceeded" if failed else "CompletionsReached",
         "message": "Job has reached the specified backoff limit" if failed else "Reached expected number of "
                                                                                "succeeded pods"}]}
    if failed:
        status["failed"] = 1
    else:
        status["succeeded"] = job(envtest, ns, name)["spec"].get("completions") or 1
        status["completionTime"] = now
    rest(envtest).request("PATCH", f"/apis/batch/v1/namespaces/{ns}/jobs/{name}/status", body={"status": status},
                          content_type="application/merge-patch+json")


def cluster_queue(envtest: Envtest, name: str) -> dict[str, Any]:
    return get(envtest, f"/apis/kueue.x-k8s.io/v1beta2/clusterqueues/{name}")


def flavors_usage(cq: dict[str, Any], field: str = "flavorsUsage") -> dict[tuple[str, str], str]:
    return {(f["name"], r["name"]): r["total"] for f in (cq.get("status") or {}).get(field) or ()
            for r in f["resources"]}


def dump(obj: Any) -> str:
    return json.dumps(obj, indent=1, sort_keys=True)


# --- Kueue objects, as YAML documents for `apply` ------------------------------------------------------------------

def queue_setup(ns: str, cluster_queue: str, *, cpu: str = "1", priority_classes: Mapping[str, int] | None = None,
                preemption: str | None = None, cohort: str | None = None, borrowing_limit: str | None = None,
                check: str | None = None, extra: str = "") -> str:
    """One flavor ``default-flavor``, the named WorkloadPriorityClasses, a ClusterQueue of ``cpu`` nominal CPU
    (optionally in ``cohort``, with a borrowing limit, a within-queue preemption policy and an admission
    ``check``, whose AdmissionCheck is made too) and the LocalQueue ``queue`` in ``ns`` pointing at it; ``extra``
    documents go before the ClusterQueue."""
    docs = ["apiVersion: kueue.x-k8s.io/v1beta2\nkind: ResourceFlavor\nmetadata: {name: default-flavor}\n"]
    for name, value in (priority_classes or {}).items():
        docs.append(f"apiVersion: kueue.x-k8s.io/v1beta2\nkind: WorkloadPriorityClass\nmetadata: {{name: {name}}}\n"
                    f"value: {value}\n")
    if check:
        docs.append(f"apiVersion: kueue.x-k8s.io/v1beta2\nkind: AdmissionCheck\nmetadata: {{name: {check}}}\n"
                    "spec: {controllerName: example.com/capacity}\n")
    if extra:
        docs.append(extra)
    spec = "  namespaceSelector: {}\n"
    if cohort:
        spec = f"  cohortName: {cohort}\n" + spec
    if preemption:
        spec += f"  preemption: {{withinClusterQueue: {preemption}}}\n"
    if check:
        spec += f"  admissionChecksStrategy: {{admissionChecks: [{{name: {check}}}]}}\n"
    limit = f", borrowingLimit: \"{borrowing_limit}\"" if borrowing_limit else ""
    docs.append(f"""apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {{name: {cluster_queue}}}
spec:
{spec}  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: default-flavor
      resources: [{{name: cpu, nominalQuota: "{cpu}"{limit}}}]
""")
    docs.append(f"apiVersion: kueue.x-k8s.io/v1beta2\nkind: LocalQueue\nmetadata: {{name: queue, namespace: {ns}}}\n"
                f"spec: {{clusterQueue: {cluster_queue}}}\n")
    return "---\n".join(docs)


def columns(table: str, *names: str) -> list[tuple[str, ...]]:
    """Cells of kubectl's printed table by header name (blank cells stay blank)."""
    header, *rows = table.splitlines()
    starts = [header.index(n) for n in names]
    ends = [min([p for p in (header.index(h) for h in header.split("  ") if h.strip()) if p > s] + [10_000])
            for s in starts]
    return [tuple(row[s:e].strip() for s, e in zip(starts, ends, strict=True)) for row in rows]
