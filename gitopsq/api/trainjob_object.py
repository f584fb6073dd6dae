"""Kubeflow Trainer's TrainJob and (Cluster)TrainingRuntime (``trainer.kubeflow.org/v1alpha1``): the fields gitopsq
reads or writes, every key optional (the server omits empty fields)."""

from __future__ import annotations

from typing import TypedDict

from gitopsq.api.job_objects import JobSetObject, JobSetSpec, ReplicatedJobStatus
from gitopsq.api.pod_object import Container, ResourceRequirements, Toleration
from gitopsq.api.raw_objects import Condition, ObjectMeta


class RuntimeRef(TypedDict, total=False):
    apiGroup: str
    kind: str
    name: str


class Trainer(TypedDict, total=False):
    image: str
    command: list[str]
    args: list[str]
    numNodes: int
    resourcesPerNode: ResourceRequirements


class TargetJob(TypedDict, total=False):
    name: str


class PodSpecOverride(TypedDict, total=False):
    targetJobs: list[TargetJob]
    nodeSelector: dict[str, str]
    tolerations: list[Toleration]
    serviceAccountName: str
    containers: list[Container]


class TrainJobSpec(TypedDict, total=False):
    runtimeRef: RuntimeRef
    trainer: Trainer
    podSpecOverrides: list[PodSpecOverride]
    suspend: bool
    labels: dict[str, str]
    annotations: dict[str, str]


class TrainJobStatus(TypedDict, total=False):
    conditions: list[Condition]
    jobsStatus: list[ReplicatedJobStatus]


class JobSetTemplateSpec(TypedDict, total=False):
    metadata: ObjectMeta
    spec: JobSetSpec


class MLPolicy(TypedDict, total=False):
    numNodes: int


class TrainingRuntimeSpec(TypedDict, total=False):
    template: JobSetTemplateSpec
    mlPolicy: MLPolicy


class TrainingRuntimeObject(TypedDict, total=False):
    """A TrainingRuntime or a ClusterTrainingRuntime (the same spec)."""

    apiVersion: str
    kind: str
    metadata: ObjectMeta
    spec: TrainingRuntimeSpec


class Related(TypedDict):
    """What the admission loop reads beside a TrainJob: its runtime and the JobSet Trainer made (None: not there)."""

    runtime: TrainingRuntimeObject | None
    jobset: JobSetObject | None


# The related objects ride under a key no API object has (never sent to the API server): a key with a slash, so
# the shape is written in the functional form.
TrainJobObject = TypedDict("TrainJobObject", {
    "apiVersion": str,
    "kind": str,
    "metadata": ObjectMeta,
    "spec": TrainJobSpec,
    "status": TrainJobStatus,
    "gitopsq.dev/related": Related,
}, total=False)
