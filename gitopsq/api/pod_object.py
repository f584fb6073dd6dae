"""The core/v1 Pod as the API server sends it, and the pod template every job kind embeds.

Only the fields gitopsq reads or writes are named; an object keeps every other field at run time (the shapes
are `TypedDict`s over the decoded JSON, every key optional, as the server omits empty fields).
"""

from __future__ import annotations

from typing import TypedDict

from gitopsq.api.raw_objects import Condition, JsonObject, ObjectMeta


class Toleration(TypedDict, total=False):
    key: str
    operator: str
    value: str
    effect: str
    tolerationSeconds: int


class PodSchedulingGate(TypedDict, total=False):
    name: str


class ResourceRequirements(TypedDict, total=False):
    """Quantities as the server writes them (strings: ``"500m"``, ``"1Gi"``)."""

    requests: dict[str, str]
    limits: dict[str, str]


class Container(TypedDict, total=False):
    name: str
    image: str
    command: list[str]
    args: list[str]
    resources: ResourceRequirements


class PodSpec(TypedDict, total=False):
    nodeSelector: dict[str, str]
    tolerations: list[Toleration]
    schedulingGates: list[PodSchedulingGate]
    containers: list[Container]
    initContainers: list[Container]
    nodeName: str
    priorityClassName: str
    priority: int
    serviceAccountName: str
    restartPolicy: str
    affinity: JsonObject


class PodTemplateSpec(TypedDict, total=False):
    metadata: ObjectMeta
    spec: PodSpec


class PodStatus(TypedDict, total=False):
    phase: str
    message: str
    reason: str
    conditions: list[Condition]


class PodObject(TypedDict, total=False):
    apiVersion: str
    kind: str
    metadata: ObjectMeta
    spec: PodSpec
    status: PodStatus
