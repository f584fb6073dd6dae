"""A TrainJob's pod sets, rendered the way Kubeflow Trainer v2.0 renders its JobSet: from the referenced
runtime's JobSet template with the TrainJob's overrides (pure; trainjob.py is the integration).

Per replicated job of the runtime's ``spec.template.spec.replicatedJobs``, one pod set named after it:
- the trainer job (its template labelled ``trainer.kubeflow.org/trainjob-ancestor-step: trainer``) runs one Job of
  ``spec.trainer.numNodes`` pods (else the runtime's ``mlPolicy.numNodes``, else 1), and its ``node`` container
  takes the TrainJob's image, command, args and ``resourcesPerNode``;
- any other job (a dataset or model initializer) ``replicas`` Jobs of ``parallelism`` pods (1 and 1 unset);
- the user's ``podSpecOverrides`` aimed at the job add their node selector, tolerations and service account.
"""

from __future__ import annotations

import copy
from typing import Final

from gitopsq.api.pod_object import PodSpec, ResourceRequirements
from gitopsq.api.trainjob_object import PodSpecOverride, Trainer, TrainingRuntimeObject, TrainJobObject
from gitopsq.api.workload_object import PodSet
from gitopsq.cluster.kinds import Kind
from gitopsq.errors import ClusterError

TRAINING_RUNTIME: Final = Kind("TrainingRuntime", "trainer.kubeflow.org", "v1alpha1", "trainingruntimes", True,
                               synced=False)
CLUSTER_TRAINING_RUNTIME: Final = Kind("ClusterTrainingRuntime", "trainer.kubeflow.org", "v1alpha1",
                                       "clustertrainingruntimes", False, synced=False)
ANCESTOR_LABEL: Final = "trainer.kubeflow.org/trainjob-ancestor-step"
TRAINER_CONTAINER: Final = "node"
RELATED: Final = "gitopsq.dev/related"  # where with_related puts the runtime and JobSet (never sent to the API)
OVERRIDE_MARK: Final = "kueue.x-k8s.io/trainjob-override-idx"  # index of the first override admission added


def runtime_ref(job: TrainJobObject) -> tuple[str, str]:
    """(kind, name) of the runtime a TrainJob names; the kind defaults to ClusterTrainingRuntime, as Trainer's."""
    ref = (job.get("spec") or {}).get("runtimeRef") or {}
    return str(ref.get("kind") or CLUSTER_TRAINING_RUNTIME.kind), str(ref.get("name") or "")


def user_overrides(job: TrainJobObject) -> list[PodSpecOverride]:
    """The TrainJob's ``podSpecOverrides`` without the ones admission added (those from the index annotation)."""
    overrides = list((job.get("spec") or {}).get("podSpecOverrides") or ())
    mark = ((job.get("metadata") or {}).get("annotations") or {}).get(OVERRIDE_MARK)
    try:
        return overrides[:int(mark)] if mark is not None else overrides
    except ValueError:
        return overrides  # not a number: nothing of ours can be told apart, keep them all


def _count(value: int | None, default: int = 1) -> int:
    return default if value is None else int(value)


def render_pod_sets(job: TrainJobObject, runtime: TrainingRuntimeObject | None) -> list[PodSet]:
    """The Workload pod sets of ``job`` given its runtime; a missing runtime, or one without replicated jobs, is
    a ClusterError naming the TrainJob and the runtime (the reconciler retries at the next pass)."""
    meta = job.get("metadata") or {}
    obj = f"TrainJob/{meta.get('namespace')}/{meta.get('name')}"
    kind, name = runtime_ref(job)
    if runtime is None:
        raise ClusterError(f"{obj}: its {kind} {name!r} does not exist (yet)", obj=obj)
    spec = runtime.get("spec") or {}
    rjobs = list((((spec.get("template") or {}).get("spec")) or {}).get("replicatedJobs") or ())
    if not rjobs:
        raise ClusterError(f"{obj}: {kind} {name!r} has no spec.template.spec.replicatedJobs", obj=obj)
    trainer = (job.get("spec") or {}).get("trainer") or {}
    nodes = _count(trainer.get("numNodes"), _count((spec.get("mlPolicy") or {}).get("numNodes")))
    overrides = user_overrides(job)
    out: list[PodSet] = []
    for rjob in rjobs:
        job_template = rjob.get("template") or {}
        labels = (job_template.get("metadata") or {}).get("labels") or {}
        is_trainer = labels.get(ANCESTOR_LABEL) == "trainer"
        template = copy.deepcopy((job_template.get("spec") or {}).get("template") or {})
        template.get("metadata", {}).pop("creationTimestamp", None)
        pod_spec = template.setdefault("spec", {})
        if is_trainer:
            count = nodes
            _apply_trainer(pod_spec, trainer)
        else:
            count = _count(rjob.get("replicas")) * _count((job_template.get("spec") or {}).get("parallelism"))
        for override in overrides:
            if any(t.get("name") == rjob.get("name") for t in override.get("targetJobs") or ()):
                _apply_override(pod_spec, override)
        out.append({"name": str(rjob.get("name")), "count": count, "template": template})
    return out


def _apply_trainer(pod_spec: PodSpec, trainer: Trainer) -> None:
    for container in pod_spec.get("containers") or ():
        if container.get("name") != TRAINER_CONTAINER:
            continue
        if trainer.get("image") is not None:
            container["image"] = trainer["image"]
        if trainer.get("command") is not None:
            container["command"] = copy.deepcopy(trainer["command"])
        if trainer.get("args") is not None:
            container["args"] = copy.deepcopy(trainer["args"])
        resources = trainer.get("resourcesPerNode") or {}
        if resources.get("limits") or resources.get("requests"):
            kept: ResourceRequirements = {}
            for key in resources:  # in the TrainJob's order
                if key == "limits" and resources.get("limits"):
                    kept["limits"] = dict(resources["limits"])
                elif key == "requests" and resources.get("requests"):
                    kept["requests"] = dict(resources["requests"])
            container["resources"] = kept


def _apply_override(pod_spec: PodSpec, override: PodSpecOverride) -> None:
    if override.get("nodeSelector"):
        pod_spec["nodeSelector"] = {**(pod_spec.get("nodeSelector") or {}), **override["nodeSelector"]}
    if override.get("tolerations"):
        tolerations = list(pod_spec.get("tolerations") or [])
        tolerations.extend(copy.deepcopy(t) for t in override["tolerations"] if t not in tolerations)
        pod_spec["tolerations"] = tolerations
    if override.get("serviceAccountName"):
        pod_spec["serviceAccountName"] = override["serviceAccountName"]
