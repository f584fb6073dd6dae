"""Admission checks as Kueue's workload and AdmissionCheck controllers run them, past ``Ready`` (pure; the pass
hands in live Workloads, AdmissionChecks and ``now``).

- A reserving Workload with a check in ``Retry`` is evicted (reason ``AdmissionCheck``), its checks reset to
  ``Pending``, and it waits out the check's ``requeueAfterSeconds`` before it queues again.
- A check in ``Rejected`` deactivates it: ``DeactivationTarget`` reason ``AdmissionCheck`` and a Warning event
  ``AdmissionCheckRejected``; lifecycle.py then evicts it with ``DeactivatedDueToAdmissionCheck``.
- An AdmissionCheck whose own ``Active`` condition is not True makes every ClusterQueue that uses it inactive
  (``AdmissionCheckInactive``): nothing new is admitted there, admitted work keeps running.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final, cast

from gitopsq.admission.topology import Topology
from gitopsq.admission_loop.decisions import Eviction
from gitopsq.admission_loop.lifecycle import Deactivate
from gitopsq.admission_loop.live_workload import ADMITTED, PENDING, LiveWorkload
from gitopsq.admission_loop.workload_status import condition, iso, parse_time
from gitopsq.api.queue_objects import AdmissionCheckObject
from gitopsq.api.raw_objects import KubeObject
from gitopsq.api.workload_object import AdmissionCheckState, RequeueState, WorkloadObject

REASON: Final = "AdmissionCheck"  # Kueue's WorkloadEvictedByAdmissionCheck
INACTIVE: Final = "AdmissionCheckInactive"
_PREFIX: Final = "Can't admit new workloads: "


@dataclass(frozen=True, slots=True)
class CheckOutcome:
    """What the checks of one pass ask for: evictions (Retry), deactivations (Rejected) and, with the event's
    reason, the Warning each deactivation records."""

    evict: dict[str, Eviction]
    deactivate: dict[str, Deactivate]


def states(raw: WorkloadObject) -> list[AdmissionCheckState]:
    return list((raw.get("status") or {}).get("admissionChecks") or ())


def all_ready(raw: WorkloadObject) -> bool:
    """Whether the Workload has admission checks and every one is Ready."""
    checks = states(raw)
    return bool(checks) and all(c.get("state") == "Ready" for c in checks)


def message(checks: Sequence[AdmissionCheckState], state: str) -> str:
    """Kueue's words for the checks in ``state``: ``AdmissionCheck(s) in <state> state: "a" (msg); "b"``."""
    parts = [f'"{c.get("name", "")}" ({c["message"]})' if c.get("message") else f'"{c.get("name", "")}"'
             for c in sorted(checks, key=lambda c: str(c.get("name", "")))]
    noun = "AdmissionChecks" if len(checks) > 1 else "AdmissionCheck"
    return f"{noun} in {state} state: {'; '.join(parts)}"


def _evicted(w: LiveWorkload) -> bool:
    c = condition(w.raw, "Evicted")
    return c is not None and c.get("status") == "True"


def outcomes(live: Mapping[str, LiveWorkload], now: float) -> CheckOutcome:
    """Evictions for reserving Workloads with a ``Retry`` check, deactivations for those with a ``Rejected`` one
    (Rejected wins, as in Kueue); already evicted or deactivated Workloads are left alone."""
    out = CheckOutcome({}, {})
    for key, w in live.items():
        if w.state != ADMITTED or _evicted(w):
            continue
        checks = states(w.raw)
        rejected = [c for c in checks if c.get("state") == "Rejected"]
        retry = [c for c in checks if c.get("state") == "Retry"]
        if rejected:
            if (w.raw.get("spec") or {}).get("active") is False:
                continue  # lifecycle.py evicts it
            target = condition(w.raw, "DeactivationTarget")
            if target is not None and target.get("status") == "True":
                continue  # marked: lifecycle.py finishes the deactivation
            words = message(rejected, "Rejected")
            out.deactivate[key] = Deactivate(REASON, words, f"Deactivated due to {words}")
        elif retry:
            state: RequeueState = {**((w.raw.get("status") or {}).get("requeueState") or {})}
            at = requeue_at(retry, state.get("requeueAt"))
            if at is not None:
                state["requeueAt"] = iso(at)
            out.evict[key] = Eviction("Evicted", REASON, f"Evicted due to {message(retry, 'Retry')}", "",
                                      requeue_state=state or None)
    return out


def requeue_at(retry: Iterable[AdmissionCheckState], current: str | None) -> float | None:
    """When a Workload evicted by ``Retry`` checks may queue again: the latest of each check's transition time
    plus its ``requeueAfterSeconds``, never earlier than a time already written (None: at once)."""
    times = [parse_time(c.get("lastTransitionTime")) + float(c["requeueAfterSeconds"])
             for c in retry if c.get("requeueAfterSeconds")]
    if current:
        times.append(parse_time(current))
    return max(times) if times else None


def reset(checks: Sequence[AdmissionCheckState], now: float) -> list[AdmissionCheckState]:
    """Every check back to ``Pending`` on eviction (Kueue ``resetChecksOnEviction``); a ``Retry`` one counts the
    retry."""
    out = []
    for c in checks:
        item = c.copy()
        if c.get("state") != "Pending":
            item["state"], item["lastTransitionTime"] = "Pending", iso(now)
            item["message"] = f"Reset to Pending after eviction. Previously: {c.get('state')}"
            if c.get("state") == "Retry":
                item["retryCount"] = int(c.get("retryCount") or 0) + 1
        out.append(item)
    return out


def backing_off(w: LiveWorkload, now: float) -> bool | None:
    """For a pending Workload evicted by a ``Retry`` check and not yet requeued (``Requeued=False``): True while
    its ``requeueAt`` is ahead, False once it is due; None for any other Workload."""
    requeued = condition(w.raw, "Requeued")
    if w.state != PENDING or requeued is None or requeued.get("status") != "False" or requeued.get("reason") != REASON:
        return None
    at = ((w.raw.get("status") or {}).get("requeueState") or {}).get("requeueAt")
    return bool(at) and parse_time(at) > now


def queue_view(live: Mapping[str, LiveWorkload], now: float) -> tuple[dict[str, LiveWorkload], list[LiveWorkload]]:
    """(the Workloads the engine sees, those whose Retry backoff is over and are to be requeued): Workloads
    evicted by a Retry check stay out of the queue until their ``requeueAt``."""
    seen: dict[str, LiveWorkload] = {}
    due: list[LiveWorkload] = []
    for key, w in live.items():
        waiting = backing_off(w, now)
        if waiting is None:
            seen[key] = w
        elif not waiting:
            due.append(w)
    return seen, due


def inactive_checks(objects: Iterable[KubeObject]) -> set[str]:
    """The AdmissionChecks whose controller has not set ``Active=True`` (Kueue treats them as unusable)."""
    out = set()
    for ac in cast(Iterable[AdmissionCheckObject], objects):  # the edge: objects of the admissionchecks resource
        if not any(c.get("type") == "Active" and c.get("status") == "True"
                   for c in (ac.get("status") or {}).get("conditions") or ()):
            out.add(str((ac.get("metadata") or {}).get("name", "")))
    return out


def with_inactive_checks(topology: Topology, inactive: set[str]) -> Topology:
    """ClusterQueues using an inactive AdmissionCheck turn inactive with reason ``AdmissionCheckInactive`` and
    Kueue's message ``... references inactive AdmissionCheck(s): a,b.`` (after a missing one's)."""
    if not inactive:
        return topology
    queues = dict(topology.queues)
    for name, spec in topology.queues.items():
        names = [c.name for c in spec.checks if c.name in inactive]
        if not names:
            continue
        reasons = [r for r in spec.inactive_reason.split(",") if r]
        parts = spec.inactive_message.removeprefix(_PREFIX).removesuffix(".").split(", ") \
            if spec.inactive_message else []
        at = reasons.index("AdmissionCheckNotFound") + 1 if "AdmissionCheckNotFound" in reasons else \
            sum(1 for r in reasons if r in ("Stopped", "FlavorNotFound"))
        reasons.insert(at, INACTIVE)
        parts.insert(at, f"references inactive AdmissionCheck(s): {','.join(names)}")
        queues[name] = dataclasses.replace(spec, inactive_reason=",".join(reasons),
                                           inactive_message=f"{_PREFIX}{', '.join(parts)}.")
    return dataclasses.replace(topology, queues=queues)
