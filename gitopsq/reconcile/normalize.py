"""Make desired and live objects comparable, and recognise objects another GitOps tool manages.

Live objects carry what the API server adds (uid, resourceVersion, managedFields, status, ...); desired
documents may carry markers of another tool copied from elsewhere. Both are cleaned here, once, so that the
diff only sees what a user wrote.

Foreign managers (an object carrying any of these is never taken over, never pruned, only reported):
1. Argo CD annotation tracking: annotation ``argocd.argoproj.io/tracking-id``;
2. Argo CD label tracking (and ``annotation+label``): label ``app.kubernetes.io/instance``;
3. Flux: any label under ``kustomize.toolkit.fluxcd.io/`` or ``helm.toolkit.fluxcd.io/``.
The same markers are dropped from desired documents before they are applied: copying them from Git would
make Argo CD or Flux treat our objects as theirs (and prune them).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Final, cast

from gitopsq.api.quantity import QuantityError, parse_quantity
from gitopsq.api.raw_objects import JsonMapping, JsonObject, meta
from gitopsq.reconcile.field_diff import ByName, FieldChange, FieldPath, Value

FIELD_MANAGER: Final = "gitopsq"

SERVER_METADATA: Final = frozenset({
    "uid", "resourceVersion", "generation", "creationTimestamp", "managedFields", "selfLink", "deletionTimestamp",
    "deletionGracePeriodSeconds", "finalizers", "ownerReferences", "generateName"})
SERVER_ANNOTATIONS: Final = frozenset({"kubectl.kubernetes.io/last-applied-configuration"})

ARGO_TRACKING_ANNOTATION: Final = "argocd.argoproj.io/tracking-id"
ARGO_INSTANCE_LABEL: Final = "app.kubernetes.io/instance"
FLUX_LABEL_PREFIXES: Final = ("kustomize.toolkit.fluxcd.io/", "helm.toolkit.fluxcd.io/")

# Quantity-valued fields in the kinds we manage: "1000m" and "1" are the same value there.
QUANTITY_FIELDS: Final = frozenset({"nominalQuota", "borrowingLimit", "lendingLimit", "weight"})


def normalize_live(obj: JsonMapping) -> JsonObject:
    """A live object as a user would have written it: no status, no server-populated metadata."""
    out = {k: v for k, v in obj.items() if k != "status"}
    # metadata, annotations and labels are JSON objects in any object the API server or validation let through
    metadata = dict(cast(JsonMapping, obj.get("metadata") or {}))
    for key in SERVER_METADATA:
        metadata.pop(key, None)
    annotations: JsonObject = {k: v for k, v in cast(JsonMapping, metadata.get("annotations") or {}).items()
                               if k not in SERVER_ANNOTATIONS}
    if annotations:
        metadata["annotations"] = annotations
    else:
        metadata.pop("annotations", None)
    if not metadata.get("labels"):
        metadata.pop("labels", None)
    out["metadata"] = metadata
    return out


def _is_foreign_label(key: str) -> bool:
    return key == ARGO_INSTANCE_LABEL or key.startswith(FLUX_LABEL_PREFIXES)


def foreign_manager(obj: Mapping[str, object]) -> str | None:
    """Which other tool tracks this object, as a sentence naming the marker, or None."""
    about = meta(obj)
    annotations = about.get("annotations") or {}
    labels = about.get("labels") or {}
    if ARGO_TRACKING_ANNOTATION in annotations:
        return f"Argo CD tracks it ({ARGO_TRACKING_ANNOTATION}={annotations[ARGO_TRACKING_ANNOTATION]})"
    if ARGO_INSTANCE_LABEL in labels:
        return f"Argo CD label tracking claims it ({ARGO_INSTANCE_LABEL}={labels[ARGO_INSTANCE_LABEL]})"
    for key in sorted(labels):
        if key.startswith(FLUX_LABEL_PREFIXES):
            return f"Flux manages it ({key}={labels[key]})"
    return None


def strip_foreign_markers(doc: JsonMapping) -> tuple[JsonObject, tuple[str, ...]]:
    """``doc`` without another tool's tracking markers, and the markers dropped (sorted)."""
    out = dict(doc)
    metadata = dict(cast(JsonMapping, doc.get("metadata") or {}))
    dropped: list[str] = []
    annotations = dict(cast(JsonMapping, metadata.get("annotations") or {}))
    if ARGO_TRACKING_ANNOTATION in annotations:
        del annotations[ARGO_TRACKING_ANNOTATION]
        dropped.append(f"annotation {ARGO_TRACKING_ANNOTATION}")
    labels = dict(cast(JsonMapping, metadata.get("labels") or {}))
    for key in sorted(labels):
        if _is_foreign_label(key):
            del labels[key]
            dropped.append(f"label {key}")
    if not dropped:
        return out, ()
    for field, values in (("annotations", annotations), ("labels", labels)):
        if values:
            metadata[field] = values
        else:
            metadata.pop(field, None)
    out["metadata"] = metadata
    return out, tuple(sorted(dropped))


def quantity_equal(path: FieldPath, a: Value, b: Value) -> bool:
    """Scalar equality for diffs: quantity fields compare by value, everything else by ``==`` (bools strictly)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if a == b:
        return True
    if path and isinstance(path[-1], str) and path[-1] in QUANTITY_FIELDS:
        try:
            return parse_quantity(a) == parse_quantity(b)
        except QuantityError:
            return False
    return False


@dataclass(frozen=True, slots=True)
class OwnedFields:
    """The fields one field manager owns on a live object, from its ``managedFields`` (``FieldsV1``).

    ``leaves`` are owned whole (a scalar, an atomic list, a set-valued list); ``all`` holds every path that
    appears, including the parents of leaves. Name-keyed list items (``k:{"name":"cpu"}``) become `ByName`
    steps, matching the diff's paths.
    """

    leaves: frozenset[FieldPath]
    all: frozenset[FieldPath]
    applied: bool = False  # the manager has an Apply entry at all (even one owning no fields, as a bare Namespace)

    def owns(self, path: FieldPath) -> bool:
        """True when the manager owns the field at ``path`` or a whole ancestor of it."""
        if path in self.all:
            return True
        return any(path[:i] in self.leaves for i in range(1, len(path)))


NO_FIELDS: Final = OwnedFields(frozenset(), frozenset())


def owned_fields(obj: Mapping[str, object], manager: str = FIELD_MANAGER) -> OwnedFields:
    """The fields ``manager`` owns through server-side apply on ``obj`` (status subresource excluded)."""
    leaves: set[FieldPath] = set()
    every: set[FieldPath] = set()
    applied = False
    for entry in meta(obj).get("managedFields") or ():
        if entry.get("manager") != manager or entry.get("operation") != "Apply" or entry.get("subresource"):
            continue
        applied = True
        _walk_fields((), cast(JsonMapping, entry.get("fieldsV1") or {}), leaves, every)
    return OwnedFields(frozenset(leaves), frozenset(every), applied)


def _walk_fields(path: FieldPath, node: JsonMapping, leaves: set[FieldPath], every: set[FieldPath]) -> None:
    for raw, value in node.items():
        if raw == ".":
            continue
        prefix, _, rest = raw.partition(":")
        if prefix == "f":
            step: FieldPath = (*path, rest)
        elif prefix == "k":
            step = (*path, _key_step(rest))
        elif prefix == "v":  # an element of a set-valued list: the list is owned as a value
            if path:
                leaves.add(path)
            continue
        else:
            continue
        every.add(step)
        child = cast(JsonMapping, value)  # FieldsV1 nests only objects: ``f:``/``k:``/``v:`` steps down to ``{}``
        if not child or set(child) == {"."}:
            leaves.add(step)
        else:
            _walk_fields(step, child, leaves, every)


def _key_step(raw: str) -> ByName | str:
    try:
        key = json.loads(raw)
    except ValueError:
        return raw
    if isinstance(key, dict) and set(key) == {"name"} and isinstance(key["name"], str):
        return ByName(key["name"])
    return raw


# -- who made a drift ----------------------------------------------------------------------------------------
# Read from managedFields *before* the corrective apply: a forced apply takes the fields over, and the other
# manager's entry then loses them (or disappears). kubectl edit shows as kubectl-edit, kubectl patch as
# kubectl-patch, a controller under its own name.

def drift_managers(live: Mapping[str, object], changes: Iterable[FieldChange]) -> tuple[str, ...]:
    """The field managers of ``live``, other than gitopsq's apply, owning any of the changed fields: most recent
    first, each once; () when none can be named."""
    paths = [c.path for c in changes]
    found: list[tuple[str, str]] = []
    for entry in meta(live).get("managedFields") or ():
        name = str(entry.get("manager") or "")
        if not name or entry.get("subresource") or (name == FIELD_MANAGER and entry.get("operation") == "Apply"):
            continue
        leaves: set[FieldPath] = set()
        every: set[FieldPath] = set()
        _walk_fields((), cast(JsonMapping, entry.get("fieldsV1") or {}), leaves, every)
        owned = OwnedFields(frozenset(leaves), frozenset(every))
        if any(owned.owns(p) for p in paths):
            found.append((str(entry.get("time") or ""), name))
    out: list[str] = []
    for _, name in sorted(found, reverse=True):
        if name not in out:
            out.append(name)
    return tuple(out)
