"""Whether a job belongs to a managed parent (Kueue's ``FindAncestorJobManagedByKueue``): such a child — a
JobSet's Jobs, later a RayJob's RayCluster or a TrainJob's JobSet — never gets a Workload of its own.

The walk follows controller ownerReferences only, at most `MAX_HOPS` of them, checks each owner's UID against
the object found (a re-created owner with the same name is not the owner) and stops on a cycle. An ancestor is
managed when its kind is one of the running integrations and it carries the queue-name label. Pure: the shell
passes a lookup that reads its watch cache.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Final

from gitopsq.api.raw_objects import controller_of, labels_of, meta

MAX_HOPS: Final = 10

# (group, kind, namespace, name) -> the object, or None when it is not known (not cached, not a job kind)
Lookup = Callable[[str, str, str, str], Mapping[str, object] | None]


def managed_ancestor(obj: Mapping[str, object], lookup: Lookup, queue_label: str) -> Mapping[str, object] | None:
    """The nearest controller ancestor of ``obj`` that is a managed job, or None."""
    seen: set[str] = {str(meta(obj).get("uid"))}
    namespace = meta(obj).get("namespace") or ""
    current = obj
    for _ in range(MAX_HOPS):
        ref = controller_of(current)
        if ref is None or str(ref.get("uid")) in seen:
            return None
        seen.add(str(ref.get("uid")))
        group = str(ref.get("apiVersion") or "").rpartition("/")[0]
        parent = lookup(group, str(ref.get("kind")), namespace, str(ref.get("name")))
        if parent is None or meta(parent).get("uid") != ref.get("uid"):
            return None
        if queue_label in labels_of(parent):
            return parent
        current = parent
    return None
