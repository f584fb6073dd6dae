"""The TrainJob integration's pure side: pod sets rendered from the runtime and the TrainJob's overrides, start
and restore through podSpecOverrides and Kueue's index annotation, active/ready from the JobSet Trainer made,
finished from the TrainJob's conditions, and the related objects it is read with."""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from typing import Any

import pytest
from trainjob_objects import torch_runtime, trainjob

from gitopsq.admission_loop.integration_watch import IntegrationWatch
from gitopsq.admission_loop.integrations import BY_FRAMEWORK, PodSetPlacement, select
from gitopsq.admission_loop.integrations.base import related_kinds, with_related
from gitopsq.admission_loop.integrations.registry import owner_kinds, spec_label_kinds
from gitopsq.admission_loop.integrations.trainjob import OVERRIDE_MARK, TrainJob
from gitopsq.admission_loop.job_reconciler import JobReconciler
from gitopsq.errors import ClusterError
from gitopsq.intake.jobs import JobWebhook, JobWebhookOptions

SPOT = {"key": "spot", "operator": "Exists", "effect": "NoSchedule"}
TJ = TrainJob()


def _read(job: Mapping[str, Any], runtime: Mapping[str, Any] | None, jobset: Mapping[str, Any] | None = None
          ) -> Mapping[str, Any]:
    store = {("clustertrainingruntimes", "torch"): runtime, ("jobsets", "ns/tj"): jobset}
    return with_related(TJ, {**job, "metadata": {**job["metadata"], "uid": "u1"}}, lambda r, k: store.get((r, k)))


def _jobset(active: int, ready: int, replicas: int = 1, owner: str = "u1") -> dict[str, Any]:
    return {"metadata": {"name": "tj", "namespace": "ns",
                         "ownerReferences": [{"kind": "TrainJob", "uid": owner, "controller": True}]},
            "spec": {"replicatedJobs": [{"name": "node", "replicas": replicas}]},
            "status": {"replicatedJobsStatus": [{"name": "node", "active": active, "ready": ready}]}}


def test_registered_under_kueues_name_with_its_runtimes_and_jobsets_related() -> None:
    """The registry knows ``trainer.kubeflow.org/trainjob``; it is watched with both runtime kinds and JobSets."""
    integration = BY_FRAMEWORK["trainer.kubeflow.org/trainjob"]
    assert integration.kind_info.plural == "trainjobs" and integration.webhook
    assert [k.plural for k in related_kinds(integration)] == ["trainingruntimes", "clustertrainingruntimes",
                                                              "jobsets"]


def test_trainer_pod_set_counts_num_nodes_with_resources_per_node() -> None:
    """The trainer job's pod set counts ``numNodes`` pods whose ``node`` container asks ``resourcesPerNode``;
    an initializer job is its own one-pod set with the runtime's resources."""
    job = _read(trainjob("ns", "tj", "torch", nodes=3, gpus=4), torch_runtime("torch", initializer=True))
    sets = TJ.pod_sets(job)
    assert [(s["name"], s["count"]) for s in sets] == [("dataset-initializer", 1), ("node", 3)]
    node = sets[1]["template"]["spec"]["containers"][0]
    assert node["resources"]["limits"] == {"nvidia.com/gpu": "4"}
    assert sets[0]["template"]["spec"]["containers"][0]["resources"] == {"requests": {"cpu": "1"}}


def test_num_nodes_falls_back_to_the_runtime_ml_policy() -> None:
    """Without ``trainer.numNodes`` the trainer pod set counts the runtime's ``mlPolicy.numNodes``."""
    job = trainjob("ns", "tj", "torch", nodes=1, gpus=1)
    del job["spec"]["trainer"]["numNodes"]
    (node,) = TJ.pod_sets(_read(job, torch_runtime("torch", num_nodes=5)))
    assert node["count"] == 5


def test_user_overrides_shape_the_pod_set_template() -> None:
    """A user's podSpecOverride aimed at ``node`` adds its node selector and tolerations to that pod set."""
    job = trainjob("ns", "tj", "torch", nodes=1, gpus=1,
                   overrides=[{"targetJobs": [{"name": "node"}], "nodeSelector": {"zone": "a"}, "tolerations": [SPOT]}])
    (node,) = TJ.pod_sets(_read(job, torch_runtime("torch")))
    assert node["template"]["spec"]["nodeSelector"] == {"zone": "a"}
    assert node["template"]["spec"]["tolerations"] == [SPOT]


def test_missing_runtime_is_a_clear_error_naming_the_trainjob() -> None:
    """A TrainJob whose runtime does not exist yet has no pod sets: the error names the TrainJob and runtime."""
    with pytest.raises(ClusterError, match=r"TrainJob/ns/tj: its ClusterTrainingRuntime 'torch' does not exist"):
        TJ.pod_sets(_read(trainjob("ns", "tj", "torch", nodes=1, gpus=1), None))


def test_start_appends_one_override_per_pod_set_after_the_users_and_marks_the_index() -> None:
    """Start keeps the user's override first, appends one per pod set with its placement, records index 1 and
    unsuspends; restore cuts back to the user's and drops the mark once no child Job is active."""
    user = {"targetJobs": [{"name": "node"}], "serviceAccountName": "trainer"}
    job = _read(trainjob("ns", "tj", "torch", nodes=2, gpus=4, overrides=[user]), torch_runtime("torch"))
    patch = TJ.start_patch(job, (PodSetPlacement("node", 2, {"pool": "spot"}, (SPOT,)),))
    assert patch["spec"]["suspend"] is False
    assert patch["metadata"]["annotations"] == {OVERRIDE_MARK: "1"}
    assert patch["spec"]["podSpecOverrides"] == [user, {"targetJobs": [{"name": "node"}],
                                                        "nodeSelector": {"pool": "spot"}, "tolerations": [SPOT]}]
    started = {**trainjob("ns", "tj", "torch", nodes=2, gpus=4), "spec": {**job["spec"], **patch["spec"]}}
    started["metadata"] = {**job["metadata"], "annotations": {OVERRIDE_MARK: "1"}}
    running = _read(started, torch_runtime("torch"), _jobset(active=1, ready=1))
    assert TJ.restore_patch(running, []) is None, "restored while a child Job is still active"
    assert TJ.pod_sets(running)[0]["template"]["spec"].get("nodeSelector") is None, "admission's override leaked"
    stopped = _read(started, torch_runtime("torch"), _jobset(active=0, ready=0))
    assert TJ.restore_patch(stopped, []) == {"metadata": {"annotations": {OVERRIDE_MARK: None}},
                                             "spec": {"podSpecOverrides": [user]}}
    assert TJ.restore_patch(started, []) is None, "restored without knowing whether its Jobs still run"


def test_active_and_ready_come_from_the_jobset_trainer_made_for_it() -> None:
    """Active child Jobs and readiness are read from the TrainJob's own JobSet; a JobSet of the same name that
    another object controls is ignored."""
    job = trainjob("ns", "tj", "torch", nodes=2, gpus=4)
    assert TJ.active_pods(_read(job, None, _jobset(active=1, ready=1))) == 1
    assert TJ.pods_ready(_read(job, None, _jobset(active=1, ready=1)))
    assert not TJ.pods_ready(_read(job, None, _jobset(active=1, ready=0)))
    assert TJ.active_pods(_read(job, None, _jobset(active=1, ready=1, owner="other"))) == 0
    assert not TJ.pods_ready(_read(job, None, None))


@pytest.mark.parametrize(("kind", "reason"), [("Complete", "Succeeded"), ("Failed", "Failed")])
def test_finished_from_the_trainjob_conditions(kind: str, reason: str) -> None:
    """A TrainJob ``Complete`` or ``Failed`` condition that is True finishes its Workload with its message."""
    job = trainjob("ns", "tj", "torch", nodes=1, gpus=1)
    assert TJ.finished(job) is None
    job["status"] = {"conditions": [{"type": kind, "status": "True", "message": "done"}]}
    assert TJ.finished(job) == (reason, "done")


class _Discovery:
    """API discovery answering for the group versions in ``served`` (resource names), 404 for the rest."""

    def __init__(self, served: dict[str, set[str]]) -> None:
        self.served = served

    def request(self, method: str, path: str, **_: Any) -> Any:
        group_version = path.removeprefix("/apis/")
        if group_version not in self.served:
            raise ClusterError("not found", status=404)
        return {"resources": [{"name": n} for n in sorted(self.served[group_version])]}


class _Cache:
    def __init__(self) -> None:
        self.watched: list[str] = []
        self.listed: set[str] = set()

    def add(self, kind: Any) -> bool:
        self.watched.append(kind.plural)
        return True

    def synced(self, name: str) -> bool:
        return name in self.listed


def test_trainjobs_are_watched_only_with_their_runtimes_and_jobsets_served_and_synced() -> None:
    """With the Trainer CRDs served but not the JobSet one the integration stays skipped, naming the JobSet CRD;
    once JobSets are served its related kinds are watched before TrainJobs, and it is ready only when all four
    informers have listed."""
    trainer = {"trainjobs", "trainingruntimes", "clustertrainingruntimes"}
    client, cache = _Discovery({"trainer.kubeflow.org/v1alpha1": trainer}), _Cache()
    watch = IntegrationWatch(client, cache, select(["trainer.kubeflow.org/trainjob"]))
    watch.refresh(force=True)
    assert cache.watched == []
    assert watch.absent["trainer.kubeflow.org/trainjob"] == \
        "CustomResourceDefinition jobsets.jobset.x-k8s.io is not installed"
    client.served["jobset.x-k8s.io/v1alpha2"] = {"jobsets"}
    watch.refresh(force=True)
    assert cache.watched == ["trainingruntimes", "clustertrainingruntimes", "jobsets", "trainjobs"]
    cache.listed = {"trainjobs", "jobsets"}
    assert watch.ready() == (), "ready before its runtimes were listed"
    cache.listed |= {"trainingruntimes", "clustertrainingruntimes"}
    assert [i.framework for i in watch.ready()] == ["trainer.kubeflow.org/trainjob"]


class _Store:
    """The reconciler's view of a watch cache: objects by resource and key, every resource watched."""

    def __init__(self, objects: dict[str, list[dict[str, Any]]]) -> None:
        self.objects = objects

    def items(self, name: str) -> list[dict[str, Any]]:
        return list(self.objects.get(name, []))

    def get(self, name: str, key: str) -> dict[str, Any] | None:
        for obj in self.objects.get(name, []):
            meta = obj["metadata"]
            if key in (meta["name"], f"{meta.get('namespace')}/{meta['name']}"):
                return obj
        return None

    def indexed(self, name: str, read: Any) -> None:
        return None

    def watches(self, name: str) -> bool:
        return True


class _Writer:
    """Records what the reconciler would create."""

    def __init__(self) -> None:
        self.writes = 0
        self.created: list[Mapping[str, Any]] = []
        self.patched: list[tuple[str, Mapping[str, Any]]] = []

    def patch(self, resource: str, path: str, body: Mapping[str, Any], obj: str) -> dict[str, Any]:
        self.writes += 1
        self.patched.append((obj, body))
        return dict(body)

    def create(self, resource: str, path: str, body: Mapping[str, Any], obj: str) -> dict[str, Any]:
        self.writes += 1
        self.created.append(body)
        return dict(body)

    def event(self, obj: Mapping[str, Any], kind: str, reason: str, message: str, *, warning: bool = False) -> None:
        pass


def _owned(kind: str, name: str, uid: str, owner: tuple[str, str, str, str], **extra: Any) -> dict[str, Any]:
    api_version, owner_kind, owner_name, owner_uid = owner
    return {"kind": kind, "metadata": {"name": name, "namespace": "ns", "uid": uid, "labels": {
        "kueue.x-k8s.io/queue-name": "queue"}, "ownerReferences": [
        {"apiVersion": api_version, "kind": owner_kind, "name": owner_name, "uid": owner_uid, "controller": True}]},
        **extra}


def test_a_queued_job_under_a_trainjobs_jobset_gets_no_workload_with_the_jobset_integration_off() -> None:
    """With batch/job and TrainJob running but not JobSet, a queue-labelled Job whose controller is the JobSet a
    queued TrainJob controls is a managed child (the walk reads JobSets, a kind TrainJob relates): only the
    TrainJob gets a Workload, and the child, running while the TrainJob is not admitted, is suspended."""
    tj = {**trainjob("ns", "tj", "torch", nodes=2, gpus=4), "status": {}}
    tj["metadata"]["uid"] = "u-tj"
    jobset = _owned("JobSet", "tj", "u-js", ("trainer.kubeflow.org/v1alpha1", "TrainJob", "tj", "u-tj"))
    job = _owned("Job", "tj-node-0", "u-job", ("jobset.x-k8s.io/v1alpha2", "JobSet", "tj", "u-js"),
                 spec={"template": {"spec": {"containers": [{"name": "node"}]}}})
    store = _Store({"trainjobs": [tj], "jobsets": [jobset], "jobs": [job],
                    "clustertrainingruntimes": [torch_runtime("torch")]})
    writer = _Writer()
    JobReconciler(store, writer, now=lambda: 0.0,  # type: ignore[arg-type]  (a partial cache and writer)
                  integrations=select(["batch/job", "trainer.kubeflow.org/trainjob"])).reconcile()
    assert [w["metadata"]["ownerReferences"][0]["kind"] for w in writer.created] == ["TrainJob"]
    assert [(p["name"], p["count"]) for p in writer.created[0]["spec"]["podSets"]] == [("node", 2)]
    assert [(obj, body["spec"]["suspend"]) for obj, body in writer.patched] == [("Job/ns/tj-node-0", True)]


def _trainjob_review(job: dict[str, Any]) -> dict[str, Any]:
    return {"request": {"uid": "r1", "operation": "CREATE", "namespace": "ns", "object": job,
                        "kind": {"group": "trainer.kubeflow.org", "version": "v1alpha1", "kind": "TrainJob"}}}


def _patch(answer: dict[str, Any]) -> list[dict[str, Any]]:
    response = answer["response"]
    return json.loads(base64.b64decode(response["patch"])) if "patch" in response else []


def test_the_webhook_suspends_a_queued_trainjob_and_copies_its_queue_into_spec_labels() -> None:
    """With the registry's options a queued TrainJob is created suspended with ``spec.labels`` holding its queue
    (added to the user's labels, escaped in the JSON pointer); one already suspended still gets the label; a
    JobSet (not a TrainJob) gets no spec label."""
    running = select(["jobset.x-k8s.io/jobset", "trainer.kubeflow.org/trainjob"])
    hook = JobWebhook(JobWebhookOptions(owner_kinds=owner_kinds(running), spec_label_kinds=spec_label_kinds(running)))
    plain = trainjob("ns", "tj", "torch", nodes=1, gpus=1, suspend=False)
    assert _patch(hook.mutate(_trainjob_review(plain))) == [
        {"op": "add", "path": "/spec/suspend", "value": True},
        {"op": "add", "path": "/spec/labels", "value": {"kueue.x-k8s.io/queue-name": "queue"}}]
    labelled = trainjob("ns", "tj", "torch", nodes=1, gpus=1)
    labelled["spec"]["labels"] = {"team": "ml"}
    assert _patch(hook.mutate(_trainjob_review(labelled))) == [
        {"op": "add", "path": "/spec/labels/kueue.x-k8s.io~1queue-name", "value": "queue"}]
    review = _trainjob_review({"metadata": {"name": "js", "labels": {"kueue.x-k8s.io/queue-name": "q"}},
                               "spec": {"replicatedJobs": []}})
    review["request"]["kind"] = {"group": "jobset.x-k8s.io", "version": "v1alpha2", "kind": "JobSet"}
    assert _patch(hook.mutate(review)) == [{"op": "add", "path": "/spec/suspend", "value": True}]
