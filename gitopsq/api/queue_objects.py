"""Kueue's ClusterQueue, LocalQueue, ResourceFlavor and AdmissionCheck (``kueue.x-k8s.io/v1beta2``) and the
priority classes, as the API server sends them: the fields the admission loop reads beside the codec, and the
queue status it writes. Every key optional (the server omits empty fields)."""

from __future__ import annotations

from typing import TypedDict

from gitopsq.api.pod_object import Toleration
from gitopsq.api.raw_objects import Condition, JsonObject, ObjectMeta


class ResourceUsage(TypedDict, total=False):
    name: str
    total: str
    borrowed: str


class FlavorUsage(TypedDict, total=False):
    name: str
    resources: list[ResourceUsage]


class QueueStatus(TypedDict, total=False):
    """The status both queue kinds share (a ClusterQueue's and a LocalQueue's, as the loop writes them)."""

    conditions: list[Condition]
    pendingWorkloads: int
    reservingWorkloads: int
    admittedWorkloads: int
    flavorsReservation: list[FlavorUsage]
    flavorsUsage: list[FlavorUsage]


class ClusterQueueObject(TypedDict, total=False):
    apiVersion: str
    kind: str
    metadata: ObjectMeta
    spec: JsonObject  # read through the codec (gitopsq.api.codec), not here
    status: QueueStatus


class LocalQueueSpec(TypedDict, total=False):
    clusterQueue: str
    stopPolicy: str


class LocalQueueObject(TypedDict, total=False):
    apiVersion: str
    kind: str
    metadata: ObjectMeta
    spec: LocalQueueSpec
    status: QueueStatus


class ResourceFlavorSpec(TypedDict, total=False):
    nodeLabels: dict[str, str]
    nodeTaints: list[JsonObject]
    tolerations: list[Toleration]


class ResourceFlavorObject(TypedDict, total=False):
    apiVersion: str
    kind: str
    metadata: ObjectMeta
    spec: ResourceFlavorSpec


class PriorityClassObject(TypedDict, total=False):
    """A WorkloadPriorityClass (kueue.x-k8s.io) or a PriorityClass (scheduling.k8s.io): the value sits at the top."""

    apiVersion: str
    kind: str
    metadata: ObjectMeta
    value: int
    globalDefault: bool
    description: str


class AdmissionCheckStatus(TypedDict, total=False):
    conditions: list[Condition]


class AdmissionCheckObject(TypedDict, total=False):
    apiVersion: str
    kind: str
    metadata: ObjectMeta
    spec: JsonObject  # controllerName, parameters: read through the codec
    status: AdmissionCheckStatus
