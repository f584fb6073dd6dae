"""The Job admission webhook's decisions (pure: the HTTPS server is gitopsq.webhook.server, its certificates
gitopsq.webhook.certs).

- ``POST /mutate-batch-v1-job``: a job (a batch/v1 Job, or another kind whose integration uses this webhook:
  the configurations' rules list them) labelled ``kueue.x-k8s.io/queue-name`` is created suspended, so no pod
  starts before the admission loop admits it (Kueue's ``ApplyDefaultForSuspend``); for the kinds in
  ``spec_label_kinds`` (TrainJob) the queue label is also written into ``spec.labels``, as Kueue's webhook does.
- ``POST /validate-batch-v1-job``: in the namespaces the repository marks as managed, a job without a queue
  label is refused; every job created or updated is judged by the CEL policies that match its kind
  (gitopsq.policy, the same engine as ``gitopsq check``); a Deny verdict refuses it, a Warn verdict is
  returned as an admission warning.
- ``POST /mutate--v1-pod`` (`mutate_pod`, with the pod integration): a queued Pod is gated for the admission loop
  (gitopsq.intake.pods); pods are never validated here (a managed namespace's Job pods carry no queue label).
A queued job of a kind whose integration has ``refusals`` (a RayJob or RayCluster asking for autoscaling) is
refused on create and update with Kueue's reasons.
A job with a managed ancestor (a JobSet's Jobs; Kueue's ``FindAncestorJobManagedByKueue``: the whole chain of
controller owners is walked, and an ancestor is managed when it is a job of a running integration with a queue
label) is left alone by all three: its ancestor is the one queued. The walk needs API reads, so the controller passes
it in (``JobWebhookOptions.managed_ancestor``); without it only the direct controller owner's kind is looked at.
Requests and answers are ``admission.k8s.io/v1`` AdmissionReviews. A malformed review is answered 400.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import cast

from gitopsq.api.raw_objects import KubeObject
from gitopsq.intake.admission_review import AdmissionRequest, AdmissionResponse, AdmissionReview, PatchOperation
from gitopsq.intake.pods import pod_patch
from gitopsq.manifests.object_rules import QUEUE_NAME_LABEL as QUEUE_LABEL
from gitopsq.policy import Change, ObjectKey, Operation, Policy, PolicyInput, evaluate


@dataclass(frozen=True, slots=True)
class JobWebhookOptions:
    managed_namespaces: frozenset[str] = frozenset()  # Jobs here must carry a queue label
    policies: Sequence[Policy] = field(default_factory=tuple)
    # (group, kind) of the running integrations: a job controlled by one of these is a managed child
    owner_kinds: frozenset[tuple[str, str]] = frozenset({("jobset.x-k8s.io", "JobSet")})
    # (group, kind) whose queue label is also written into ``spec.labels`` when it is queued (Kueue's TrainJob
    # webhook: Trainer copies those labels onto the JobSet and the pods it makes)
    spec_label_kinds: frozenset[tuple[str, str]] = frozenset()
    # (group, kind) -> why a queued job of that kind is refused (an integration's ``refusals``, e.g. a RayJob
    # with autoscaling); kinds not here are refused by nothing but the checks above
    refusals: Mapping[tuple[str, str], Callable[[KubeObject], list[str]]] = field(default_factory=dict)
    # whether a job has a managed ancestor, walking the whole owner chain (the controller wires the API reads)
    managed_ancestor: Callable[[KubeObject], bool] | None = None


def _answer(uid: str, allowed: bool, *, message: str = "", patch: Sequence[PatchOperation] | None = None,
            warnings: Sequence[str] = ()) -> AdmissionReview:
    response: AdmissionResponse = {"uid": uid, "allowed": allowed}
    if not allowed:
        response["status"] = {"code": 403, "reason": "Forbidden", "message": message}
    if patch:
        response["patchType"] = "JSONPatch"
        response["patch"] = base64.b64encode(json.dumps(patch).encode()).decode()
    if warnings:
        response["warnings"] = list(warnings)
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response}


def _request_of(review: Mapping[str, object]) -> AdmissionRequest:
    """The request of a decoded AdmissionReview (KeyError without one: the server answers such a review 400)."""
    return cast(AdmissionReview, review)["request"]


class JobWebhook:
    """Decides AdmissionReviews for batch/v1 Jobs (no I/O: gitopsq.webhook.server feeds it). `mutate` is where a
    queued Job is created suspended, `validate` where a Job admission request is allowed or refused."""

    def __init__(self, options: JobWebhookOptions | None = None) -> None:
        self.options = options or JobWebhookOptions()

    def _child(self, job: KubeObject) -> bool:
        """Whether the job has a managed ancestor (or, with no walk wired, a controller of a queued job kind)."""
        if self.options.managed_ancestor is not None:
            return self.options.managed_ancestor(job)
        for ref in (job.get("metadata") or {}).get("ownerReferences") or ():
            if ref.get("controller"):
                group = str(ref.get("apiVersion") or "").rpartition("/")[0]
                return (group, str(ref.get("kind"))) in self.options.owner_kinds
        return False

    def mutate(self, review: Mapping[str, object]) -> AdmissionReview:
        request = _request_of(review)
        job = request.get("object") or {}
        labels = (job.get("metadata") or {}).get("labels") or {}
        spec = job.get("spec") or {}
        patch: list[PatchOperation] = []
        if request.get("operation") == "CREATE" and labels.get(QUEUE_LABEL) and not self._child(job):
            if spec.get("suspend") is not True:
                patch.append({"op": "add", "path": "/spec/suspend", "value": True})
            gvk = request.get("kind") or {}
            if (gvk.get("group"), gvk.get("kind")) in self.options.spec_label_kinds:
                queue = labels[QUEUE_LABEL]
                spec_labels = spec.get("labels")
                if not isinstance(spec_labels, Mapping):
                    patch.append({"op": "add", "path": "/spec/labels", "value": {QUEUE_LABEL: queue}})
                elif spec_labels.get(QUEUE_LABEL) != queue:
                    path = "/spec/labels/" + QUEUE_LABEL.replace("~", "~0").replace("/", "~1")
                    patch.append({"op": "add", "path": path, "value": queue})
        return _answer(request["uid"], True, patch=patch)

    def mutate_pod(self, review: Mapping[str, object]) -> AdmissionReview:
        """A queued Pod created gated, labelled managed, with Kueue's finalizer and its role hash."""
        request = _request_of(review)
        if request.get("operation") != "CREATE":
            return _answer(request["uid"], True)
        return _answer(request["uid"], True, patch=pod_patch(request.get("object") or {}, self.options.owner_kinds))

    def validate(self, review: Mapping[str, object]) -> AdmissionReview:
        request = _request_of(review)
        job = request.get("object") or {}
        meta = job.get("metadata") or {}
        namespace = request.get("namespace") or meta.get("namespace") or ""
        labels = meta.get("labels") or {}
        if request.get("operation") == "CREATE" and namespace in self.options.managed_namespaces \
                and not labels.get(QUEUE_LABEL) and not self._child(job):
            kind = str((request.get("kind") or {}).get("kind") or "Job")
            return _answer(request["uid"], False, message=(
                f"namespace {namespace} is managed by gitopsq: {kind}s there need the label {QUEUE_LABEL} "
                "naming a LocalQueue"))
        gvk = request.get("kind") or {}
        judge = self.options.refusals.get((str(gvk.get("group") or ""), str(gvk.get("kind") or "")))
        if judge is not None and labels.get(QUEUE_LABEL) and not self._child(job) and \
                request.get("operation") in ("CREATE", "UPDATE"):
            refused = judge(job)
            if refused:
                return _answer(request["uid"], False, message="; ".join(refused))
        denied, warnings = self._policies(request, job)
        if denied:
            return _answer(request["uid"], False, message="; ".join(denied), warnings=warnings)
        return _answer(request["uid"], True, warnings=warnings)

    def _policies(self, request: AdmissionRequest, job: KubeObject) -> tuple[list[str], list[str]]:
        if not self.options.policies:
            return [], []
        gvk = request.get("kind") or {}
        group, version, kind = gvk.get("group") or "batch", gvk.get("version") or "v1", gvk.get("kind") or "Job"
        head = {"apiVersion": f"{group}/{version}" if group else version, "kind": kind}
        obj = {**head, **job}
        old = request.get("oldObject")
        operation = Operation.UPDATE if request.get("operation") == "UPDATE" else Operation.CREATE
        key = ObjectKey.of(obj)
        plural = str((request.get("resource") or {}).get("resource") or "jobs")
        change = Change(operation=operation, path=f"cluster/{key.namespace}/{plural}/{key.name}", key=key, object=obj,
                        old_object={**head, **old} if old else None)
        verdicts = evaluate(self.options.policies, PolicyInput(changes=(change,), desired={}, repo={}))
        denied = [f"{v.policy}: {v.message}" for v in verdicts if not v.allowed and v.severity.value == "Deny"]
        warnings = [f"{v.policy}: {v.message}" for v in verdicts if not v.allowed and v.severity.value == "Warn"]
        return denied, warnings
