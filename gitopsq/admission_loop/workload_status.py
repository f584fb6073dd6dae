"""Workload status as Kueue writes it: conditions (metav1 rules), timestamps and ``status.admission``.

Pure helpers shared by the pass, the job reconciler and the queue status writer; no I/O. A condition's
``lastTransitionTime`` moves only when its status flips.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime

from gitopsq.api import model as m
from gitopsq.api.quantity import Quantity
from gitopsq.api.raw_objects import Condition
from gitopsq.api.workload_object import Admission, WorkloadObject

Flavors = Mapping[str, Mapping[str, str]]  # pod set -> resource -> flavor


def iso(now: float) -> str:
    return datetime.fromtimestamp(now, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_time(text: str | None) -> float:
    if not text:
        return 0.0
    return datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC).timestamp()


def condition(obj: WorkloadObject, kind: str) -> Condition | None:
    for c in (obj.get("status") or {}).get("conditions") or ():
        if c.get("type") == kind:
            return c
    return None


def is_true(obj: WorkloadObject, kind: str) -> bool:
    c = condition(obj, kind)
    return c is not None and c.get("status") == "True"


def set_condition(conditions: list[Condition], kind: str, status: str, reason: str, message: str,  # noqa: PLR0917
                  now: float) -> None:
    """Set one condition in place; keep its transition time unless the status flips (metav1 semantics)."""
    for c in conditions:
        if c.get("type") == kind:
            if c.get("status") != status:
                c["lastTransitionTime"] = iso(now)
            c["status"], c["reason"], c["message"] = status, reason, message[:32768]
            return
    conditions.append({"type": kind, "status": status, "reason": reason, "message": message[:32768],
                       "lastTransitionTime": iso(now)})


def usage_of(pod_sets: tuple[m.PodSet, ...]) -> dict[str, dict[str, Quantity]]:
    """Per pod set: total quantity of each resource (per-pod request × count) — ``resourceUsage``."""
    return {ps.name: {r: Quantity(q.milli * ps.count, q.fmt) for r, q in ps.requests.items()} for ps in pod_sets}


def admission_status(cluster_queue: str, pod_sets: tuple[m.PodSet, ...], flavors: Flavors) -> Admission:
    """``status.admission`` as Kueue writes it."""
    usage = usage_of(pod_sets)
    return {"clusterQueue": cluster_queue, "podSetAssignments": [
        {"name": ps.name, "flavors": dict(flavors.get(ps.name, {})),
         "resourceUsage": {r: str(q) for r, q in sorted(usage[ps.name].items())}, "count": ps.count}
        for ps in pod_sets]}
