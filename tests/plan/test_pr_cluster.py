"""`gitopsq plan --cluster`: current Workloads and their admissions read from the real kube-apiserver rig."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from envtest_rig import Envtest
from fixtures_pr import DS_CPU, TemplateRepo
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from gitopsq.commands.plan import make_plan
from gitopsq.plan.render_markdown import render_markdown

GROUP, VERSION = "kueue.x-k8s.io", "v1beta2"
ON_DEMAND = {"cloud.example.com/capacity-type": "on-demand"}


def _ensure_namespace(api: Any, name: str) -> None:
    try:
        client.CoreV1Api(api).create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name)))
    except ApiException as err:
        if err.status != 409:
            raise


def _workload(name: str, namespace: str, queue: str, *, priority: int, count: int, requests: dict[str, str],
              node_selector: dict[str, str] | None = None) -> dict[str, Any]:
    pod: dict[str, Any] = {"containers": [{"name": "c", "image": "busybox", "resources": {"requests": requests}}]}
    if node_selector:
        pod["nodeSelector"] = node_selector
    return {"apiVersion": f"{GROUP}/{VERSION}", "kind": "Workload",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"queueName": queue, "priority": priority,
                     "podSets": [{"name": "main", "count": count, "template": {"spec": pod}}]}}


def _admit(api: Any, namespace: str, name: str, *, cq: str, flavors: dict[str, str], usage: dict[str, str],
           count: int) -> None:
    """Write the status Kueue writes once quota is reserved and the workload admitted."""
    condition = {"status": "True", "lastTransitionTime": "2026-01-01T08:00:00Z"}
    status = {"status": {
        "admission": {"clusterQueue": cq, "podSetAssignments": [
            {"name": "main", "flavors": flavors, "resourceUsage": usage, "count": count}]},
        "conditions": [{**condition, "type": "QuotaReserved", "reason": "QuotaReserved",
                        "message": f"Quota reserved in ClusterQueue {cq}"},
                       {**condition, "type": "Admitted", "reason": "Admitted", "message": "The workload is admitted"}],
    }}  # fmt: skip
    client.CustomObjectsApi(api).patch_namespaced_custom_object_status(GROUP, VERSION, namespace, "workloads", name,
                                                                       status)


def test_workloads_from_the_cluster_show_the_borrower_preempted(kueue_clean: Envtest, tmp_path: Path) -> None:
    """Workloads created through the API with admission status: ml-research's GPU training and its borrowing
    CPU sweep are admitted, data-science's ETL job waits; shrinking data-science's on-demand CPUs to 72 makes
    the ETL job reclaim, and the plan reports the sweep preempted — read from the cluster, not a file."""
    repo = TemplateRepo(tmp_path / "queues")
    repo.branch("shrink")
    repo.replace("teams/data-science/cluster-queue.yaml", DS_CPU,
                 '{name: cpu, nominalQuota: "72", borrowingLimit: "32"}')
    repo.commit("data-science: on-demand CPU 96 → 72", "erin")
    with kueue_clean.api_client() as api:
        custom = client.CustomObjectsApi(api)
        for ns in ("ml-research", "data-science"):
            _ensure_namespace(api, ns)
        for body in (_workload("train", "ml-research", "training", priority=500, count=12,
                               requests={"cpu": "8", "nvidia.com/gpu": "2"}),
                     _workload("sweep", "ml-research", "training", priority=100, count=90, requests={"cpu": "1"},
                               node_selector=ON_DEMAND),
                     _workload("etl", "data-science", "analysis", priority=1000, count=70, requests={"cpu": "1"},
                               node_selector=ON_DEMAND)):
            custom.create_namespaced_custom_object(GROUP, VERSION, body["metadata"]["namespace"], "workloads", body)
        _admit(api, "ml-research", "train", cq="ml-research", flavors={"cpu": "a100", "nvidia.com/gpu": "a100"},
               usage={"cpu": "96", "nvidia.com/gpu": "24"}, count=12)
        _admit(api, "ml-research", "sweep", cq="ml-research", flavors={"cpu": "on-demand"}, usage={"cpu": "90"},
               count=90)
    plan = make_plan(str(repo.root), "main", "shrink", kubeconfig=str(kueue_clean.kubeconfig), use_cache=False)
    assert plan.impact is not None, plan.impact_notes
    assert plan.impact.workloads == 3
    assert (plan.impact.admitted_before, plan.impact.admitted_after) == (3, 2)
    (preempted,) = plan.impact.of_kind("preempted")
    assert (preempted.key, preempted.reason) == ("ml-research/sweep", "InCohortReclamation")
    assert any("read from the cluster" in n for n in plan.impact_notes)
    assert "`ml-research/sweep` in `ml-research` — InCohortReclamation" in render_markdown(plan)


def test_finished_workloads_are_left_out(kueue_clean: Envtest, tmp_path: Path) -> None:
    """A Workload whose Finished condition is True holds no quota and is not counted."""
    repo = TemplateRepo(tmp_path / "queues")
    with kueue_clean.api_client() as api:
        _ensure_namespace(api, "data-science")
        custom = client.CustomObjectsApi(api)
        custom.create_namespaced_custom_object(GROUP, VERSION, "data-science", "workloads",
                                               _workload("done", "data-science", "analysis", priority=0, count=1,
                                                         requests={"cpu": "1"}))
        cond = {"type": "Finished", "status": "True", "reason": "Succeeded",
                "message": "done", "lastTransitionTime": "2026-01-01T08:00:00Z"}
        custom.patch_namespaced_custom_object_status(GROUP, VERSION, "data-science", "workloads", "done",
                                                     {"status": {"conditions": [cond]}})
    plan = make_plan(str(repo.root), "main", "main", kubeconfig=str(kueue_clean.kubeconfig), use_cache=False)
    assert plan.impact is not None and plan.impact.workloads == 0
