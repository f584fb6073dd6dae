"""The ``admission.k8s.io/v1`` AdmissionReview the Job and Pod webhooks answer, and the JSON patch they return.

Only the fields the webhooks read or write are named, every key optional; the object under review stays a
`KubeObject` (its kind's spec is read with the raw_objects accessors).
"""

from __future__ import annotations

from typing import TypedDict

from gitopsq.api.raw_objects import JsonValue, KubeObject


class GroupVersionKind(TypedDict, total=False):
    group: str
    version: str
    kind: str


class GroupVersionResource(TypedDict, total=False):
    group: str
    version: str
    resource: str


class AdmissionRequest(TypedDict, total=False):
    uid: str
    kind: GroupVersionKind
    resource: GroupVersionResource
    name: str
    namespace: str
    operation: str  # CREATE | UPDATE | DELETE | CONNECT
    object: KubeObject
    oldObject: KubeObject | None


class AdmissionStatus(TypedDict):
    code: int
    reason: str
    message: str


class AdmissionResponse(TypedDict, total=False):
    uid: str
    allowed: bool
    status: AdmissionStatus
    patchType: str
    patch: str  # base64 of the JSON patch
    warnings: list[str]


class AdmissionReview(TypedDict, total=False):
    apiVersion: str
    kind: str
    request: AdmissionRequest
    response: AdmissionResponse


class PatchOperation(TypedDict):
    """One JSON patch (RFC 6902) operation; the webhooks only ever add."""

    op: str
    path: str
    value: JsonValue
