"""Health after apply: whether the queues a revision applied are what Kueue users call healthy (docs/sync.md).

A ClusterQueue or LocalQueue is healthy when its ``Active`` condition is ``True`` (an inactive one names why:
``FlavorNotFound``, ``AdmissionCheckNotFound``, ``ClusterQueueDoesNotExist``, …). Those conditions are written
by Kueue, or by gitopsq's own admission loop; with neither running they never appear, and the queue is reported
``Pending`` with a reason saying so. Other kinds (Namespaces, ResourceFlavors, Cohorts, priority classes) carry
no health of their own: their existence after the apply is enough.

`judge` is pure; `wait_healthy` polls the API server until every queue is healthy or the timeout passes.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Final, cast

from gitopsq.api.git_source import HealthField, QueueHealth
from gitopsq.api.model import ObjectKey
from gitopsq.api.raw_objects import Condition, JsonMapping, child, meta

KUEUE_GROUP: Final = "kueue.x-k8s.io"
QUEUE_KINDS: Final = frozenset({"ClusterQueue", "LocalQueue"})
NO_CONTROLLER: Final = ("NoStatusYet", "no Active condition yet: is Kueue or gitopsq's admission loop running?")


@dataclass(frozen=True, slots=True)
class ObjectHealth:
    """One queue's health: ``status`` ``Healthy`` | ``Unhealthy`` (Active=False) | ``Pending`` (no verdict yet)."""

    key: ObjectKey
    status: str
    reason: str
    message: str

    @property
    def healthy(self) -> bool:
        return self.status == "Healthy"

    def to_json(self) -> QueueHealth:
        return {"object": str(self.key), "status": self.status, "reason": self.reason, "message": self.message}


def checked(keys: Iterable[ObjectKey]) -> list[ObjectKey]:
    """The keys whose health is checked: Kueue's ClusterQueues and LocalQueues."""
    return sorted((k for k in keys if k.group == KUEUE_GROUP and k.kind in QUEUE_KINDS), key=str)


def judge(key: ObjectKey, live: JsonMapping | None) -> ObjectHealth:
    """The health of one queue from its live object (None: it is gone)."""
    if live is None:
        return ObjectHealth(key, "Unhealthy", "NotFound", "the object is not in the cluster")
    generation = meta(live).get("generation")
    # a queue's status conditions are metav1.Conditions (Kueue's and gitopsq's admission loop alike)
    for cond in cast("list[Condition]", child(live, "status").get("conditions") or []):
        if cond.get("type") != "Active":
            continue
        seen = cond.get("observedGeneration")
        if seen is not None and generation is not None and int(seen) < int(generation):
            return ObjectHealth(key, "Pending", "Progressing", f"status is for generation {seen}, not {generation}")
        if cond.get("status") == "True":
            return ObjectHealth(key, "Healthy", str(cond.get("reason") or "Ready"), str(cond.get("message") or ""))
        return ObjectHealth(key, "Unhealthy", str(cond.get("reason") or "Inactive"), str(cond.get("message") or ""))
    return ObjectHealth(key, "Pending", *NO_CONTROLLER)


def summary(health: Iterable[ObjectHealth]) -> str:
    """``2 of 5 queues not healthy: ClusterQueue/a FlavorNotFound (…); …`` or ``5 queues healthy``."""
    items = list(health)
    bad = [h for h in items if not h.healthy]
    if not bad:
        return f"{len(items)} queues healthy"
    shown = "; ".join(f"{h.key} {h.status} {h.reason} ({h.message})" for h in bad[:10])
    more = f"; and {len(bad) - 10} more" if len(bad) > 10 else ""
    return f"{len(bad)} of {len(items)} queues not healthy: {shown}{more}"


def status_field(health: Iterable[ObjectHealth], *, limit: int = 100) -> HealthField:
    """``status.health`` of the GitSource: counts and the queues not healthy (at most ``limit``)."""
    items = list(health)
    bad = [h.to_json() for h in items if not h.healthy]
    return {"checked": len(items), "healthy": len(items) - len(bad), "objects": bad[:limit]}


def wait_healthy(read: Callable[[list[ObjectKey]], Mapping[ObjectKey, JsonMapping | None]], keys: list[ObjectKey], *,
                 timeout: float, poll: float = 1.0, clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep) -> list[ObjectHealth]:
    """Read ``keys`` (``read`` returns key -> live object or None) until all are healthy or ``timeout`` seconds
    passed; the last verdicts. A timeout of 0 judges once without waiting."""
    deadline = clock() + timeout
    while True:
        live = read(keys)
        verdicts = [judge(k, live.get(k)) for k in keys]
        if all(v.healthy for v in verdicts) or clock() >= deadline:
            return verdicts
        sleep(min(poll, max(0.0, deadline - clock())))
