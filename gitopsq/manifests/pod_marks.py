"""Kueue's marks on plain Pods and pod groups, shared by the pod webhook (gitopsq/intake/pods.py) and the live
loop's pod integration (gitopsq/admission_loop/integrations/pod.py), which may not import each other.

A managed Pod carries the label ``kueue.x-k8s.io/managed=true``, the finalizer ``kueue.x-k8s.io/managed`` and the
scheduling gate ``kueue.x-k8s.io/admission`` (it stays Pending until admission removes the gate). A pod group is
the pods of one namespace naming the same ``kueue.x-k8s.io/pod-group-name`` (annotation, else label) with the
annotation ``kueue.x-k8s.io/pod-group-total-count``; its pods are grouped by role: a short hash of the parts of
the pod spec that matter to admission, written once as ``kueue.x-k8s.io/role-hash`` before admission adds a
node selector of its own (so a started pod keeps its role).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any, Final

MANAGED_LABEL: Final = "kueue.x-k8s.io/managed"
MANAGED_VALUE: Final = "true"
FINALIZER: Final = "kueue.x-k8s.io/managed"
GATE: Final = "kueue.x-k8s.io/admission"
GROUP_NAME: Final = "kueue.x-k8s.io/pod-group-name"
TOTAL_COUNT: Final = "kueue.x-k8s.io/pod-group-total-count"
ROLE_HASH: Final = "kueue.x-k8s.io/role-hash"
FAST_ADMISSION: Final = "kueue.x-k8s.io/pod-group-fast-admission"
RETRIABLE_IN_GROUP: Final = "kueue.x-k8s.io/retriable-in-group"
IS_GROUP_WORKLOAD: Final = "kueue.x-k8s.io/is-group-workload"
TERMINATION_TARGET: Final = "TerminationTarget"

_CONTAINER_SHAPE: Final = ("image", "resources", "ports")
_SPEC_SHAPE: Final = ("nodeSelector", "affinity", "tolerations", "runtimeClassName", "priorityClassName",
                      "topologySpreadConstraints", "overhead", "resourceClaims")


def _meta(pod: Mapping[str, Any], field: str) -> Mapping[str, str]:
    return ((pod.get("metadata") or {}).get(field)) or {}


def group_name(pod: Mapping[str, Any]) -> str:
    """The pod's group ('' for a single pod): the annotation wins over the label, as in Kueue."""
    return str(_meta(pod, "annotations").get(GROUP_NAME) or _meta(pod, "labels").get(GROUP_NAME) or "")


def total_count(pod: Mapping[str, Any]) -> int | None:
    """``pod-group-total-count`` as a positive integer, or None when absent or not one."""
    raw = _meta(pod, "annotations").get(TOTAL_COUNT)
    try:
        value = int(str(raw))
    except ValueError:
        return None
    return value if value > 0 else None


def role_hash(spec: Mapping[str, Any]) -> str:
    """8 hex digits of a SHA-256 over the role's shape: each container's image, resources and ports, and the
    scheduling fields of the pod spec (names and commands do not make another role)."""
    shape = {
        "containers": [{k: c.get(k) for k in _CONTAINER_SHAPE} for c in spec.get("containers") or ()],
        "initContainers": [{k: c.get(k) for k in _CONTAINER_SHAPE} for c in spec.get("initContainers") or ()],
        **{k: spec.get(k) for k in _SPEC_SHAPE},
    }
    return hashlib.sha256(json.dumps(shape, sort_keys=True).encode()).hexdigest()[:8]


def role_of(pod: Mapping[str, Any]) -> str:
    """The role-hash annotation, else the hash of the pod's spec now."""
    return str(_meta(pod, "annotations").get(ROLE_HASH) or role_hash(pod.get("spec") or {}))


def gated(pod: Mapping[str, Any]) -> bool:
    return any(g.get("name") == GATE for g in (pod.get("spec") or {}).get("schedulingGates") or ())
