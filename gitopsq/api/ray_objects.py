"""KubeRay's RayCluster and RayJob (``ray.io/v1``): the fields gitopsq reads or writes, every key optional (the
server omits empty fields)."""

from __future__ import annotations

from typing import TypedDict

from gitopsq.api.pod_object import PodTemplateSpec, ResourceRequirements
from gitopsq.api.raw_objects import ObjectMeta


class HeadGroupSpec(TypedDict, total=False):
    template: PodTemplateSpec


class WorkerGroupSpec(TypedDict, total=False):
    groupName: str
    replicas: int
    minReplicas: int
    maxReplicas: int
    numOfHosts: int
    template: PodTemplateSpec


class AutoscalerOptions(TypedDict, total=False):
    resources: ResourceRequirements


class RayClusterSpec(TypedDict, total=False):
    headGroupSpec: HeadGroupSpec
    workerGroupSpecs: list[WorkerGroupSpec]
    enableInTreeAutoscaling: bool
    autoscalerOptions: AutoscalerOptions
    suspend: bool


class RayClusterStatus(TypedDict, total=False):
    state: str


class RayClusterObject(TypedDict, total=False):
    apiVersion: str
    kind: str
    metadata: ObjectMeta
    spec: RayClusterSpec
    status: RayClusterStatus


class RayJobSpec(TypedDict, total=False):
    rayClusterSpec: RayClusterSpec
    submissionMode: str
    submitterPodTemplate: PodTemplateSpec
    clusterSelector: dict[str, str]
    suspend: bool
    shutdownAfterJobFinishes: bool


class RayJobStatus(TypedDict, total=False):
    jobDeploymentStatus: str
    jobStatus: str
    message: str
    rayClusterStatus: RayClusterStatus


class RayJobObject(TypedDict, total=False):
    apiVersion: str
    kind: str
    metadata: ObjectMeta
    spec: RayJobSpec
    status: RayJobStatus
