"""A core/v1 Event as gitopsq sends it (the admission loop's Events on Workloads and jobs)."""

from __future__ import annotations

from typing import TypedDict

from gitopsq.api.raw_objects import ObjectMeta


class ObjectReference(TypedDict, total=False):
    """The object an Event is about; a field the object lacks is sent as null."""

    apiVersion: str
    kind: str
    name: str | None
    namespace: str | None
    uid: str | None


class EventSource(TypedDict, total=False):
    component: str


class EventObject(TypedDict, total=False):
    metadata: ObjectMeta
    involvedObject: ObjectReference
    reason: str
    message: str
    type: str  # Normal or Warning
    source: EventSource
    firstTimestamp: str
    lastTimestamp: str
    count: int
    reportingComponent: str
