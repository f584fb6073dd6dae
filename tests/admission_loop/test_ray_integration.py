"""The RayJob and RayCluster integrations, pure: Kueue's pod sets (head, worker groups, submitter), placement per
group and its restore, when a RayJob is active, ready and finished, Kueue's webhook refusals, the RayJob's
RayCluster as a managed child, and clusterSelector RayJobs left alone."""

from __future__ import annotations

import copy
from typing import Any

from gitopsq.admission_loop.integrations import BY_FRAMEWORK, PodSetPlacement, parse
from gitopsq.admission_loop.integrations.ancestry import managed_ancestor
from gitopsq.admission_loop.integrations.raycluster import RayCluster
from gitopsq.admission_loop.integrations.rayjob import JOB_UID_LABEL, RayJob
from gitopsq.admission_loop.integrations.registry import refusals
from gitopsq.intake.jobs import JobWebhook, JobWebhookOptions

QUEUE = "kueue.x-k8s.io/queue-name"
SPOT = {"key": "spot", "operator": "Exists", "effect": "NoSchedule"}


def _template(image: str = "ray:2.9", gpus: int = 0) -> dict[str, Any]:
    requests: dict[str, str] = {"cpu": "1"}
    if gpus:
        requests["nvidia.com/gpu"] = str(gpus)
    return {"spec": {"containers": [{"name": "ray", "image": image, "resources": {"requests": requests}}]}}


def _cluster(*groups: dict[str, Any], autoscaling: bool = False) -> dict[str, Any]:
    spec: dict[str, Any] = {"headGroupSpec": {"template": _template()}, "workerGroupSpecs": list(groups)}
    if autoscaling:
        spec["enableInTreeAutoscaling"] = True
    return spec


def _group(name: str, replicas: int | None = None, hosts: int | None = None) -> dict[str, Any]:
    group: dict[str, Any] = {"groupName": name, "template": _template(gpus=4)}
    if replicas is not None:
        group["replicas"] = replicas
    if hosts is not None:
        group["numOfHosts"] = hosts
    return group


def _rayjob(cluster: dict[str, Any], **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "ray.io/v1", "kind": "RayJob",
            "metadata": {"name": "rj", "namespace": "ns", "uid": "u-rj", "labels": {QUEUE: "q"}},
            "spec": {"shutdownAfterJobFinishes": True, "rayClusterSpec": cluster, **spec}}


def test_registry_knows_both_ray_frameworks_and_their_crds() -> None:
    """``ray.io/rayjob`` and ``ray.io/raycluster`` are Kueue's names, each with its CRD, RBAC on its own resource
    and the job webhook."""
    assert [i.framework for i in parse("ray.io/raycluster,ray.io/rayjob")] == ["ray.io/rayjob", "ray.io/raycluster"]
    assert BY_FRAMEWORK["ray.io/rayjob"].crd == "rayjobs.ray.io"
    assert BY_FRAMEWORK["ray.io/raycluster"].crd == "rayclusters.ray.io"
    assert ("ray.io", ("rayjobs",), ("get", "list", "watch", "patch")) in \
        [(r.group, r.resources, r.verbs) for r in BY_FRAMEWORK["ray.io/rayjob"].rules]
    assert BY_FRAMEWORK["ray.io/rayjob"].webhook and BY_FRAMEWORK["ray.io/raycluster"].webhook


def test_pod_sets_are_head_each_worker_group_and_the_submitter() -> None:
    """Head counts 1, a worker group replicas (1 when unset) × numOfHosts; K8sJobMode (the default) adds a
    submitter of 1 pod with KubeRay's default template (head image, 500m CPU / 200Mi) when none is given."""
    job = _rayjob(_cluster(_group("small"), _group("big", replicas=2, hosts=4)))
    sets = RayJob().pod_sets(job)
    assert [(p["name"], p["count"]) for p in sets] == [("head", 1), ("small", 1), ("big", 8), ("submitter", 1)]
    assert all("minCount" not in p for p in sets), "Kueue gives Ray pod sets no minCount"
    (container,) = sets[3]["template"]["spec"]["containers"]
    assert container["image"] == "ray:2.9"
    assert container["resources"]["requests"] == {"cpu": "500m", "memory": "200Mi"}
    interactive = RayJob().pod_sets(_rayjob(_cluster(_group("w")), submissionMode="InteractiveMode"))
    assert [p["name"] for p in interactive] == ["head", "w"]
    sidecar = RayJob().pod_sets(_rayjob(_cluster(_group("w")), submissionMode="SidecarMode"))
    assert [p["name"] for p in sidecar] == ["head", "w"]
    assert [c["name"] for c in sidecar[0]["template"]["spec"]["containers"]] == ["ray", "ray-job-submitter"]


def test_raycluster_pod_sets_count_the_autoscaler_sidecar() -> None:
    """A RayCluster has no submitter; with in-tree autoscaling its head pod set also holds KubeRay's autoscaler
    container (500m / 512Mi by default)."""
    cluster = {"metadata": {"name": "rc", "uid": "u"}, "spec": _cluster(_group("w", replicas=3), autoscaling=True)}
    sets = RayCluster().pod_sets(cluster)
    assert [(p["name"], p["count"]) for p in sets] == [("head", 1), ("w", 3)]
    autoscaler = sets[0]["template"]["spec"]["containers"][1]
    assert autoscaler == {"name": "autoscaler", "resources": {"requests": {"cpu": "500m", "memory": "512Mi"},
                                                             "limits": {"cpu": "500m", "memory": "512Mi"}}}


def test_start_places_every_group_and_restore_undoes_it() -> None:
    """Start writes each pod set's node labels and tolerations into the head, its worker group and the submitter
    template (the default one written when absent), labels them with the job's UID and unsuspends; restore, once
    suspended, puts the Workload's recorded templates back and drops the label; an untouched job needs none."""
    integration = RayJob()
    job = _rayjob(_cluster(_group("w", replicas=2)), suspend=True)
    original = integration.pod_sets(job)
    patch = integration.start_patch(job, (PodSetPlacement("head", 1, {"pool": "od"}, ()),
                                          PodSetPlacement("w", 2, {"pool": "spot"}, (SPOT,)),
                                          PodSetPlacement("submitter", 1, {"pool": "od"}, ())))
    spec = patch["spec"]
    assert spec["suspend"] is False
    head = spec["rayClusterSpec"]["headGroupSpec"]["template"]
    (worker,) = spec["rayClusterSpec"]["workerGroupSpecs"]
    assert (head["spec"]["nodeSelector"], head["spec"].get("tolerations")) == ({"pool": "od"}, None)
    assert (worker["template"]["spec"]["nodeSelector"], worker["template"]["spec"]["tolerations"]) == \
        ({"pool": "spot"}, [SPOT])
    assert worker["replicas"] == 2 and worker["groupName"] == "w"
    assert spec["submitterPodTemplate"]["spec"]["nodeSelector"] == {"pool": "od"}
    for template in (head, worker["template"], spec["submitterPodTemplate"]):
        assert template["metadata"]["labels"][JOB_UID_LABEL] == "u-rj"
    started = copy.deepcopy(job)
    started["spec"]["rayClusterSpec"]["headGroupSpec"] = spec["rayClusterSpec"]["headGroupSpec"]
    started["spec"]["rayClusterSpec"]["workerGroupSpecs"] = spec["rayClusterSpec"]["workerGroupSpecs"]
    started["spec"]["submitterPodTemplate"] = spec["submitterPodTemplate"]
    restore = integration.restore_patch(started, original)
    assert restore is not None
    rc = restore["spec"]["rayClusterSpec"]
    assert rc["headGroupSpec"]["template"]["spec"] == {"nodeSelector": {"pool": None}, "tolerations": None}
    assert rc["headGroupSpec"]["template"]["metadata"] == {"labels": {JOB_UID_LABEL: None}}
    (restored,) = rc["workerGroupSpecs"]
    assert "nodeSelector" not in restored["template"]["spec"] and "tolerations" not in restored["template"]["spec"]
    assert JOB_UID_LABEL not in restored["template"]["metadata"].get("labels", {})
    assert restore["spec"]["submitterPodTemplate"]["spec"]["nodeSelector"] == {"pool": None}
    assert integration.restore_patch(job, original) is None, "nothing to restore on an untouched RayJob"


def test_restore_is_skipped_when_the_groups_no_longer_match_the_pod_sets() -> None:
    """A worker group added since the Workload was made: the cluster templates are not restored (as Kueue)."""
    integration = RayCluster()
    cluster = {"metadata": {"name": "rc", "uid": "u"}, "spec": _cluster(_group("w"))}
    original = integration.pod_sets(cluster)
    placed = integration.start_patch(cluster, (PodSetPlacement("w", 1, {"pool": "spot"}, ()),))
    grown = {**cluster, "spec": {**cluster["spec"], **placed["spec"]}}
    grown["spec"]["workerGroupSpecs"] = [*grown["spec"]["workerGroupSpecs"], _group("extra")]
    assert integration.restore_patch(grown, original) is None
    grown["spec"]["workerGroupSpecs"] = grown["spec"]["workerGroupSpecs"][:1]
    assert integration.restore_patch(grown, original) is not None


def test_rayjob_active_ready_and_finished_follow_kuberay_status() -> None:
    """Active in every deployment status but new and Suspended; ready when the copied cluster state is ready;
    finished on Complete (Succeeded only with jobStatus SUCCEEDED) or Failed, with KubeRay's message."""
    integration = RayJob()
    job = _rayjob(_cluster(_group("w")))
    assert integration.active_pods(job) == 0
    for status, active in (("Initializing", 1), ("Running", 1), ("Suspending", 1), ("Suspended", 0)):
        job["status"] = {"jobDeploymentStatus": status}
        assert integration.active_pods(job) == active, status
    job["status"] = {"jobDeploymentStatus": "Running", "rayClusterStatus": {"state": "ready"}}
    assert integration.pods_ready(job) and integration.finished(job) is None
    job["status"] = {"jobDeploymentStatus": "Complete", "jobStatus": "SUCCEEDED", "message": "done"}
    assert integration.finished(job) == ("Succeeded", "done")
    job["status"] = {"jobDeploymentStatus": "Complete", "jobStatus": "STOPPED"}
    assert integration.finished(job) == ("Failed", "RayJob failed")
    job["status"] = {"jobDeploymentStatus": "Failed", "jobStatus": "FAILED", "message": "exit 1"}
    assert integration.finished(job) == ("Failed", "exit 1")


def test_raycluster_is_active_until_kuberay_reports_it_suspended_and_never_finishes() -> None:
    """A suspended cluster holds quota until its state is suspended (or it never started); ready is state ready;
    a RayCluster never finishes."""
    integration = RayCluster()
    cluster: dict[str, Any] = {"metadata": {"name": "rc"}, "spec": {**_cluster(_group("w")), "suspend": True}}
    assert integration.active_pods(cluster) == 0
    cluster["status"] = {"state": "ready"}
    assert integration.active_pods(cluster) == 1 and integration.pods_ready(cluster)
    cluster["status"] = {"state": "suspended"}
    assert integration.active_pods(cluster) == 0 and not integration.pods_ready(cluster)
    assert integration.finished(cluster) is None
    assert integration.pod_selector("rc", "u") == "ray.io/cluster=rc"


def test_kueue_refusals_for_queued_ray_jobs() -> None:
    """Autoscaling, a worker group named head, more than 18 pod sets, shutdownAfterJobFinishes false, a
    clusterSelector beside a cluster spec and neither are refused, with Kueue's field paths."""
    ok = _rayjob(_cluster(_group("w")))
    assert RayJob().refusals(ok) == []
    bad = _rayjob(_cluster(_group("head"), *(_group(f"g{i}") for i in range(17)), autoscaling=True),
                  shutdownAfterJobFinishes=False)
    messages = RayJob().refusals(bad)
    assert any(m.startswith("spec.shutdownAfterJobFinishes: Invalid value") for m in messages)
    assert any(m.startswith("spec.rayClusterSpec.enableInTreeAutoscaling: Invalid value") for m in messages)
    assert any(m.startswith("spec.rayClusterSpec.workerGroupSpecs[0].groupName: Forbidden") for m in messages)
    assert any(m.startswith("spec.rayClusterSpec.workerGroupSpecs: Too many: 19") for m in messages)
    both = _rayjob(_cluster(_group("w")), clusterSelector={"ray.io/cluster": "c"})
    assert RayJob().refusals(both)[0].startswith("spec.clusterSelector: Invalid value")
    neither = {**ok, "spec": {"shutdownAfterJobFinishes": True}}
    assert RayJob().refusals(neither)[0].startswith("spec.rayClusterSpec: Required value")
    existing = {**ok, "spec": {"clusterSelector": {"ray.io/cluster": "c"}}}
    assert RayJob().refusals(existing) == [] and RayJob().skip(existing) and not RayJob().skip(ok)
    assert RayCluster().refusals({"spec": _cluster(autoscaling=True)})[0].startswith(
        "spec.enableInTreeAutoscaling: Invalid value")


def _review(obj: dict[str, Any], kind: str, operation: str = "CREATE") -> dict[str, Any]:
    return {"request": {"uid": "r", "operation": operation, "namespace": "ns", "object": obj,
                        "kind": {"group": "ray.io", "version": "v1", "kind": kind}}}


def test_the_job_webhook_refuses_queued_autoscaling_and_suspends_queued_clusters() -> None:
    """With the Ray integrations' refusals, a queued autoscaling RayJob is refused on create and update, an
    unqueued one is not; a queued RayCluster is created suspended, a RayJob's RayCluster is left alone."""
    hook = JobWebhook(JobWebhookOptions(owner_kinds=frozenset({("ray.io", "RayJob")}),
                                        refusals=refusals(parse("ray.io/rayjob,ray.io/raycluster"))))
    scaling = _rayjob(_cluster(_group("w"), autoscaling=True))
    for operation in ("CREATE", "UPDATE"):
        answer = hook.validate(_review(scaling, "RayJob", operation))["response"]
        assert not answer["allowed"] and "enableInTreeAutoscaling" in answer["status"]["message"], operation
    unqueued = {**scaling, "metadata": {"name": "rj", "labels": {}}}
    assert hook.validate(_review(unqueued, "RayJob"))["response"]["allowed"]
    cluster = {"metadata": {"name": "rc", "labels": {QUEUE: "q"}}, "spec": _cluster(_group("w"))}
    assert hook.mutate(_review(cluster, "RayCluster"))["response"]["patchType"] == "JSONPatch"
    child = copy.deepcopy(cluster)
    child["metadata"]["ownerReferences"] = [{"apiVersion": "ray.io/v1", "kind": "RayJob", "name": "rj",
                                             "uid": "u-rj", "controller": True}]
    child["spec"]["enableInTreeAutoscaling"] = True
    assert "patch" not in hook.mutate(_review(child, "RayCluster"))["response"]
    assert hook.validate(_review(child, "RayCluster"))["response"]["allowed"]


def test_a_rayjobs_raycluster_has_a_managed_ancestor() -> None:
    """The RayCluster KubeRay makes for a queued RayJob (controller owner, the job's labels copied) is a managed
    child, so it never gets a Workload of its own."""
    parent = _rayjob(_cluster(_group("w")))
    child = {"apiVersion": "ray.io/v1", "kind": "RayCluster",
             "metadata": {"name": "rj-abcde", "namespace": "ns", "uid": "u-rc", "labels": {QUEUE: "q"},
                          "ownerReferences": [{"apiVersion": "ray.io/v1", "kind": "RayJob", "name": "rj",
                                               "uid": "u-rj", "controller": True}]}}

    def lookup(group: str, kind: str, ns: str, name: str) -> dict[str, Any] | None:
        return parent if (group, kind, name) == ("ray.io", "RayJob", "rj") else None

    assert managed_ancestor(child, lookup, QUEUE) is parent


def test_a_raycluster_worker_group_named_submitter_is_restored_like_any_other() -> None:
    """Only a RayJob's submitter pod set is set aside when matching pod sets to groups: a RayCluster's worker
    group called ``submitter`` gets its template restored."""
    integration = RayCluster()
    cluster = {"metadata": {"name": "rc", "uid": "u"}, "spec": _cluster(_group("submitter"))}
    original = integration.pod_sets(cluster)
    placed = integration.start_patch(cluster, (PodSetPlacement("submitter", 1, {"pool": "spot"}, ()),))
    started = {**cluster, "spec": {**cluster["spec"], **placed["spec"]}}
    restore = integration.restore_patch(started, original)
    assert restore is not None
    (group,) = restore["spec"]["workerGroupSpecs"]
    assert "nodeSelector" not in group["template"]["spec"]
