"""The shapes of the objects the Kubernetes edge reads and writes for itself: a Lease (leader election), a
CustomResourceDefinition (installing gitopsq's CRDs) and a core/v1 Event (on a GitSource).

Only the fields gitopsq reads or writes are named, every key optional; the rest stays plain JSON.
"""

from __future__ import annotations

from typing import TypedDict

from gitopsq.api.raw_objects import Condition, JsonObject, ObjectMeta


class LeaseSpec(TypedDict, total=False):
    holderIdentity: str
    leaseDurationSeconds: int
    acquireTime: str
    renewTime: str
    leaseTransitions: int


class Lease(TypedDict, total=False):
    apiVersion: str
    kind: str
    metadata: ObjectMeta
    spec: LeaseSpec


class CrdVersion(TypedDict, total=False):
    name: str
    served: bool
    storage: bool
    schema: JsonObject
    subresources: JsonObject
    additionalPrinterColumns: list[JsonObject]


class CrdSpec(TypedDict, total=False):
    group: str
    scope: str
    names: JsonObject
    versions: list[CrdVersion]


class CrdStatus(TypedDict, total=False):
    conditions: list[Condition]


class CustomResourceDefinition(TypedDict, total=False):
    apiVersion: str
    kind: str
    metadata: ObjectMeta
    spec: CrdSpec
    status: CrdStatus


class ObjectReference(TypedDict, total=False):
    apiVersion: str
    kind: str
    name: str
    namespace: str
    uid: str


class EventSource(TypedDict, total=False):
    component: str


class Event(TypedDict, total=False):
    """A core/v1 Event, as `gitopsq.cluster.status.StatusStore` records one about a GitSource."""

    apiVersion: str
    kind: str
    metadata: ObjectMeta
    involvedObject: ObjectReference
    reason: str
    message: str
    type: str
    source: EventSource
    reportingComponent: str
    reportingInstance: str
    firstTimestamp: str
    lastTimestamp: str
    count: int


class EventList(TypedDict, total=False):
    apiVersion: str
    kind: str
    items: list[Event]
