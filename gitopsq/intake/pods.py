"""The pod webhook's decision (pure; served at ``POST /mutate--v1-pod`` by gitopsq.webhook.server).

A Pod created with ``kueue.x-k8s.io/queue-name`` in a namespace the webhook configuration selects (never
kube-system nor the controller's own) is held for the admission loop, as Kueue's pod webhook does: it gets the
label ``kueue.x-k8s.io/managed=true`` (the loop watches only such pods), the finalizer ``kueue.x-k8s.io/managed``
(its end is seen before it goes), the scheduling gate ``kueue.x-k8s.io/admission`` (the scheduler leaves it
Pending until admission removes the gate) and its role hash (gitopsq.manifests.pod_marks). A pod whose controller is
a job of a running integration (a batch Job's pods, a JobSet's) is left alone: its parent is the one queued.
"""

from __future__ import annotations

from collections.abc import Mapping

from gitopsq.api.raw_objects import JsonValue, KubeObject, children
from gitopsq.intake.admission_review import PatchOperation
from gitopsq.manifests.object_rules import QUEUE_NAME_LABEL as QUEUE_LABEL
from gitopsq.manifests.pod_marks import FINALIZER, GATE, MANAGED_LABEL, MANAGED_VALUE, ROLE_HASH, role_hash


def _escape(key: str) -> str:
    return key.replace("~", "~0").replace("/", "~1")


def _add_key(ops: list[PatchOperation], parent: Mapping[str, object], path: str, key: str, value: JsonValue) -> None:
    if path.rsplit("/", 1)[-1] not in parent or parent.get(path.rsplit("/", 1)[-1]) is None:
        ops.append({"op": "add", "path": path, "value": {key: value}})
    else:
        ops.append({"op": "add", "path": f"{path}/{_escape(key)}", "value": value})


def _append(ops: list[PatchOperation], parent: Mapping[str, object], path: str, value: JsonValue) -> None:
    if not parent.get(path.rsplit("/", 1)[-1]):
        ops.append({"op": "add", "path": path, "value": [value]})
    else:
        ops.append({"op": "add", "path": f"{path}/-", "value": value})


def pod_patch(pod: KubeObject, owner_kinds: frozenset[tuple[str, str]]) -> list[PatchOperation]:
    """The JSON patch that makes ``pod`` a managed, gated pod; [] when it is not queued or is a managed job's
    pod, or already carries every mark."""
    meta = pod.get("metadata") or {}
    labels = meta.get("labels") or {}
    if not labels.get(QUEUE_LABEL):
        return []
    for ref in meta.get("ownerReferences") or ():
        if ref.get("controller") and \
                (str(ref.get("apiVersion") or "").rpartition("/")[0], str(ref.get("kind"))) in owner_kinds:
            return []
    spec = pod.get("spec") or {}
    ops: list[PatchOperation] = []
    if labels.get(MANAGED_LABEL) != MANAGED_VALUE:
        _add_key(ops, meta, "/metadata/labels", MANAGED_LABEL, MANAGED_VALUE)
    if FINALIZER not in (meta.get("finalizers") or ()):
        _append(ops, meta, "/metadata/finalizers", FINALIZER)
    if not any(g.get("name") == GATE for g in children(spec, "schedulingGates")):
        _append(ops, spec, "/spec/schedulingGates", {"name": GATE})
    if ROLE_HASH not in (meta.get("annotations") or {}):
        _add_key(ops, meta, "/metadata/annotations", ROLE_HASH, role_hash(spec))
    return ops
