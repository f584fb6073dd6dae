"""The GitSource object (``gitsources.gitopsq.dev``) as the API server sends it: spec, status and their parts.

The shapes follow the CRD in gitopsq/data/crds/gitopsq.dev_gitsources.yaml, every key optional (the server
omits what is unset, and a status may predate a field). The sync writes the status (gitopsq.cluster.status), the
controller's fleet view and the push webhook read it.
"""

from __future__ import annotations

from typing import TypedDict

from gitopsq.api.raw_objects import Condition, JsonValue, ObjectMeta


class GitSourceSpec(TypedDict, total=False):
    url: str
    ref: str
    paths: list[str]
    interval: str
    prune: bool
    suspend: bool


class InventoryItem(TypedDict):
    """One applied object: Flux's id ``<namespace>_<name>_<group>_<kind>`` and the API version it was applied with."""

    id: str
    v: str


class InventoryField(TypedDict, total=False):
    """``status.inventory``: the objects the last applied revision put in the cluster (gitopsq.reconcile.inventory)."""

    entries: list[InventoryItem]


class Rejection(TypedDict, total=False):
    """``status.lastRejection``: the refused revision, when it was first refused, and why (findings as JSON)."""

    revision: str
    time: str | None
    findings: list[dict[str, JsonValue]]


class QueueHealth(TypedDict):
    object: str
    status: str
    reason: str
    message: str


class HealthField(TypedDict, total=False):
    """``status.health``: how many applied queues were checked and found healthy, and those that were not."""

    checked: int
    healthy: int
    objects: list[QueueHealth]


class GitSourceStatus(TypedDict, total=False):
    observedGeneration: int
    conditions: list[Condition]
    lastAttemptedRevision: str
    lastAppliedRevision: str
    lastRejection: Rejection
    health: HealthField
    conflicts: list[str]
    inventory: InventoryField


class GitSource(TypedDict, total=False):
    apiVersion: str
    kind: str
    metadata: ObjectMeta
    spec: GitSourceSpec
    status: GitSourceStatus


class GitSourceList(TypedDict, total=False):
    """A LIST of GitSources (the fleet view reads every GitSource of a cluster)."""

    apiVersion: str
    kind: str
    items: list[GitSource]
