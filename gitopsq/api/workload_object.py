"""Kueue's Workload (``kueue.x-k8s.io/v1beta2``) as the API server sends it: the fields of its CRD that gitopsq
reads or writes, every key optional (the server omits empty fields). The admission loop reads tens of thousands
of these a minute, so the shape is a `TypedDict` over the decoded JSON: no copy, no cost at run time.
"""

from __future__ import annotations

from typing import TypedDict

from gitopsq.api.pod_object import PodTemplateSpec, Toleration
from gitopsq.api.raw_objects import Condition, JsonObject, ObjectMeta


class PodSet(TypedDict, total=False):
    name: str
    count: int
    minCount: int
    template: PodTemplateSpec
    topologyRequest: JsonObject


class PriorityClassRef(TypedDict, total=False):
    group: str
    kind: str
    name: str


class WorkloadSpec(TypedDict, total=False):
    podSets: list[PodSet]
    queueName: str
    priority: int
    priorityClassRef: PriorityClassRef
    active: bool
    maximumExecutionTimeSeconds: int
    preemptionGates: list[JsonObject]


class PodSetAssignment(TypedDict, total=False):
    name: str
    flavors: dict[str, str]  # resource -> flavor
    resourceUsage: dict[str, str]  # resource -> quantity
    count: int
    topologyAssignment: JsonObject
    delayedTopologyRequest: str


class Admission(TypedDict, total=False):
    clusterQueue: str
    podSetAssignments: list[PodSetAssignment]


class PodSetUpdate(TypedDict, total=False):
    name: str
    labels: dict[str, str]
    annotations: dict[str, str]
    nodeSelector: dict[str, str]
    tolerations: list[Toleration]


class AdmissionCheckState(TypedDict, total=False):
    name: str
    state: str  # Pending, Ready, Retry, Rejected
    lastTransitionTime: str
    message: str
    podSetUpdates: list[PodSetUpdate]
    requeueAfterSeconds: int
    retryCount: int


class RequeueState(TypedDict, total=False):
    count: int
    requeueAt: str


class ReclaimablePod(TypedDict, total=False):
    name: str
    count: int


class WorkloadStatus(TypedDict, total=False):
    conditions: list[Condition]
    admission: Admission
    admissionChecks: list[AdmissionCheckState]
    requeueState: RequeueState
    reclaimablePods: list[ReclaimablePod]
    accumulatedPastExecutionTimeSeconds: int
    resourceRequests: list[JsonObject]
    schedulingStats: JsonObject
    clusterName: str
    nominatedClusterNames: list[str]
    unhealthyNodes: list[JsonObject]


class WorkloadObject(TypedDict, total=False):
    apiVersion: str
    kind: str
    metadata: ObjectMeta
    spec: WorkloadSpec
    status: WorkloadStatus
