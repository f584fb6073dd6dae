"""The vocabulary for objects as the API server sends them: JSON values, object metadata, conditions, owner references.

Objects read from (or written to) a Kubernetes API server are plain JSON mappings. Rather than `Any`, code at the
edge names the shape it reads: `KubeObject` for an object of any kind, `ObjectMeta`, `Condition` and
`OwnerReference` for the parts every kind shares, and `JsonValue`/`JsonObject` for the parts no code here looks
into. The shapes are `TypedDict`s with every key optional (the server omits empty fields), so reading stays the
dict idiom the JSON already is, with no copy and no cost at run time; the accessors below read the common fields
without repeating the ``(obj.get("metadata") or {}).get(...)`` dance at every site.

A kind's own shape (a Workload, a Pod, a Job) lives next to the code that reads it and builds on these.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TypeAlias, TypedDict, cast

# A JSON document as decoded by json/orjson: the only values a Kubernetes object holds.
JsonScalar: TypeAlias = str | int | float | bool | None
JsonValue: TypeAlias = JsonScalar | list["JsonValue"] | dict[str, "JsonValue"]
JsonObject: TypeAlias = dict[str, JsonValue]
JsonMapping: TypeAlias = Mapping[str, JsonValue]


class OwnerReference(TypedDict, total=False):
    apiVersion: str
    kind: str
    name: str
    uid: str
    controller: bool
    blockOwnerDeletion: bool


class ObjectMeta(TypedDict, total=False):
    name: str
    generateName: str
    namespace: str
    uid: str
    resourceVersion: str
    generation: int
    creationTimestamp: str
    deletionTimestamp: str
    deletionGracePeriodSeconds: int
    labels: dict[str, str]
    annotations: dict[str, str]
    finalizers: list[str]
    ownerReferences: list[OwnerReference]
    managedFields: list[JsonObject]


class Condition(TypedDict, total=False):
    """metav1.Condition (and the older condition shapes, which have the same keys or a subset of them)."""

    type: str
    status: str
    reason: str
    message: str
    lastTransitionTime: str
    lastProbeTime: str
    lastUpdateTime: str
    observedGeneration: int


class KubeObject(TypedDict, total=False):
    """An object of any kind: the envelope every kind shares; spec, status and the rest stay plain JSON."""

    apiVersion: str
    kind: str
    metadata: ObjectMeta
    spec: JsonObject
    status: JsonObject
    data: dict[str, str]
    stringData: dict[str, str]


class ObjectList(TypedDict, total=False):
    """A list response (``GET /apis/…/<resource>``)."""

    apiVersion: str
    kind: str
    metadata: ListMeta
    items: list[KubeObject]


class ListMeta(TypedDict, total=False):
    resourceVersion: str
    # "continue" is a Python keyword: read it as ``meta.get("continue")`` (TypedDict keys are strings).
    remainingItemCount: int


class WatchEvent(TypedDict):
    """One line of a watch stream: ADDED, MODIFIED, DELETED, BOOKMARK or ERROR, and the object (a Status on ERROR)."""

    type: str
    object: KubeObject


class StatusDetails(TypedDict, total=False):
    name: str
    group: str
    kind: str
    causes: list[dict[str, str]]


class Status(TypedDict, total=False):
    """metav1.Status: what the server answers when it refuses a request."""

    apiVersion: str
    kind: str
    status: str
    message: str
    reason: str
    code: int
    details: StatusDetails


_NO_META: ObjectMeta = {}


def meta(obj: Mapping[str, object]) -> ObjectMeta:
    """The object's metadata, or an empty one (never None)."""
    found = obj.get("metadata")
    return cast(ObjectMeta, found) if isinstance(found, dict) else _NO_META


def name(obj: Mapping[str, object]) -> str:
    return meta(obj).get("name", "")


def namespace(obj: Mapping[str, object]) -> str:
    return meta(obj).get("namespace", "")


def uid(obj: Mapping[str, object]) -> str:
    return meta(obj).get("uid", "")


def resource_version(obj: Mapping[str, object]) -> str:
    return meta(obj).get("resourceVersion", "")


def labels_of(obj: Mapping[str, object]) -> Mapping[str, str]:
    return meta(obj).get("labels") or {}


def annotations_of(obj: Mapping[str, object]) -> Mapping[str, str]:
    return meta(obj).get("annotations") or {}


def owner_references(obj: Mapping[str, object]) -> Sequence[OwnerReference]:
    return meta(obj).get("ownerReferences") or ()


def controller_of(obj: Mapping[str, object]) -> OwnerReference | None:
    """The owner reference marked ``controller: true``, if any."""
    return next((ref for ref in owner_references(obj) if ref.get("controller")), None)


def condition(conditions: Sequence[Condition] | None, kind: str) -> Condition | None:
    """The condition of type `kind`, if present."""
    return next((c for c in conditions or () if c.get("type") == kind), None)


def condition_true(conditions: Sequence[Condition] | None, kind: str) -> bool:
    found = condition(conditions, kind)
    return found is not None and found.get("status") == "True"


def child(value: JsonValue | object, *path: str) -> JsonObject:
    """The mapping at `path` below `value`, or an empty one when any step is missing or not a mapping.

    For reading into the parts of an object no shape here names (a framework's pod templates, say)."""
    here: object = value
    for key in path:
        if not isinstance(here, dict):
            return {}
        here = here.get(key)
    return cast(JsonObject, here) if isinstance(here, dict) else {}


def children(value: JsonValue | object, *path: str) -> list[JsonObject]:
    """The mappings in the list at `path` below `value` (entries that are not mappings left out)."""
    *parents, last = path
    found = child(value, *parents).get(last)
    return [item for item in found if isinstance(item, dict)] if isinstance(found, list) else []


def text(value: JsonValue | object, *path: str, default: str = "") -> str:
    """The string at `path` below `value`, or `default`."""
    *parents, last = path
    found = child(value, *parents).get(last)
    return found if isinstance(found, str) else default


def number(value: JsonValue | object, *path: str, default: int = 0) -> int:
    """The integer at `path` below `value`, or `default` (a bool is not a number here)."""
    *parents, last = path
    found = child(value, *parents).get(last)
    return found if isinstance(found, int) and not isinstance(found, bool) else default


# A body gitopsq builds and sends (a merge patch, a status, a new object): any JSON, nulls included (a merge
# patch's "remove this key"), often holding parts of a typed shape; written, never read back, hence `object`.
MergePatch: TypeAlias = dict[str, object]
