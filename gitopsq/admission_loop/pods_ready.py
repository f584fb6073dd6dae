"""Kueue's ``waitForPodsReady`` in the live loop (all-or-nothing for gangs such as GPU jobs). Pure: the callers
hand in the live objects and ``now``; they write what comes back.

- The job reconciler keeps each admitted Workload's ``PodsReady`` condition: False ``WaitForStart`` until every
  admitted pod is ready (or succeeded), True ``Started`` then (``Recovered`` after a recovery), False
  ``WaitForRecovery`` when a ready Workload loses a pod.
- The pass evicts an admitted Workload still not ready ``timeout`` seconds after its admission (or
  ``recoveryTimeout`` after it lost readiness): ``Evicted`` reason ``PodsReadyTimeout``, ``requeueState.count``
  one up and ``requeueState.requeueAt`` = now + min(base · 2^(count−1), max) seconds. Once its Job has stopped
  and the quota is back, it stays out of the queue (``Requeued=False``) until ``requeueAt``, then
  ``Requeued=True`` reason ``BackoffFinished`` puts it back, ordered by its eviction time (``timestamp:
  Eviction``) or creation. The timeout after ``backoffLimitCount`` requeues deactivates it instead
  (``DeactivatedDueToRequeuingLimitExceeded``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from gitopsq.admission_loop.decisions import Decisions, Eviction, PendingReason, QueuePosition
from gitopsq.admission_loop.lifecycle import REQUEUING_LIMIT_EXCEEDED, Deactivate, cause_words
from gitopsq.admission_loop.live_workload import ADMITTED, PENDING, LiveWorkload
from gitopsq.admission_loop.options import WaitForPodsReady
from gitopsq.admission_loop.workload_status import condition, is_true, iso, parse_time
from gitopsq.api.workload_object import WorkloadObject

PODS_READY: Final = "PodsReady"
TIMEOUT_REASON: Final = "PodsReadyTimeout"
WAIT_FOR_START: Final = ("False", "WaitForStart", "Not all pods are ready or succeeded")
WAIT_FOR_RECOVERY: Final = ("False", "WaitForRecovery", "At least one pod has failed, waiting for recovery")
STARTED: Final = ("True", "Started", "All pods reached readiness and the workload is running")
RECOVERED: Final = ("True", "Recovered", "All pods reached readiness and the workload is running")
BLOCKED: Final = PendingReason("WaitingForPodsReady", "waiting for all admitted workloads to be in PodsReady condition")


@dataclass(frozen=True, slots=True)
class Timeouts:
    """What the pass writes for Workloads that did not get ready in time."""

    evict: dict[str, Eviction]
    deactivate: dict[str, Deactivate]


def wanted_condition(wl: WorkloadObject, ready: bool) -> tuple[str, str, str]:
    """The ``PodsReady`` condition an admitted Workload should carry, given whether its job's pods are ready."""
    old = condition(wl, PODS_READY)
    if ready:
        was_recovering = old is not None and old.get("reason") == WAIT_FOR_RECOVERY[1]
        if old is not None and old.get("status") == "True":
            return str(old["status"]), str(old.get("reason")), str(old.get("message", ""))
        return RECOVERED if was_recovering else STARTED
    if old is not None and (old.get("status") == "True" or old.get("reason") == WAIT_FOR_RECOVERY[1]):
        return WAIT_FOR_RECOVERY
    return WAIT_FOR_START


def backoff_seconds(count: int, config: WaitForPodsReady) -> float:
    """The wait before the ``count``-th requeue: base · 2^(count−1), at most max (Kueue's, without its jitter)."""
    strategy = config.requeuing_strategy
    return float(min(strategy.backoff_base_seconds * 2 ** max(0, count - 1), strategy.backoff_max_seconds))


def timeouts(live: Mapping[str, LiveWorkload], now: float, config: WaitForPodsReady) -> Timeouts:
    """Admitted Workloads whose pods are not ready in time: evict and requeue, or deactivate past the limit."""
    out = Timeouts({}, {})
    if not config.enable:
        return out
    recovery = config.timeout if config.recovery_timeout is None else config.recovery_timeout
    for key, w in live.items():
        if w.state != ADMITTED or (w.raw.get("spec") or {}).get("active") is False:
            continue
        ready = condition(w.raw, PODS_READY)
        admitted = condition(w.raw, "Admitted")
        if admitted is None or admitted.get("status") != "True" or (ready and ready.get("status") == "True"):
            continue
        if ready is not None and ready.get("reason") == WAIT_FOR_RECOVERY[1]:
            if recovery <= 0 or now - parse_time(ready.get("lastTransitionTime")) < recovery:
                continue
        elif now - parse_time(admitted.get("lastTransitionTime")) < config.timeout:
            continue
        count = int(((w.raw.get("status") or {}).get("requeueState") or {}).get("count") or 0) + 1
        limit = config.requeuing_strategy.backoff_limit_count
        if limit is not None and count > limit:
            out.deactivate[key] = Deactivate(REQUEUING_LIMIT_EXCEEDED, cause_words(REQUEUING_LIMIT_EXCEEDED),
                                             f"Deactivated Workload {w.key} by reached re-queue backoffLimitCount")
            continue
        at = now + backoff_seconds(count, config)
        old_at = ((w.raw.get("status") or {}).get("requeueState") or {}).get("requeueAt")
        if old_at and parse_time(old_at) > at:
            at = parse_time(old_at)  # never earlier than already promised
        out.evict[key] = Eviction("Evicted", TIMEOUT_REASON, f"Exceeded the PodsReady timeout {w.key}", "",
                                  requeue_state={"count": count, "requeueAt": iso(at)})
    return out


def backing_off(w: LiveWorkload) -> bool:
    """A pending Workload evicted for not getting ready, not yet requeued (``Requeued=False``): out of the queue."""
    requeued = condition(w.raw, "Requeued")
    return w.state == PENDING and requeued is not None and requeued.get("status") == "False" \
        and requeued.get("reason") == TIMEOUT_REASON


def queue_view(live: Mapping[str, LiveWorkload], now: float, config: WaitForPodsReady
               ) -> tuple[dict[str, LiveWorkload], list[LiveWorkload]]:
    """(the Workloads the engine sees, the backing-off ones whose ``requeueAt`` has passed and are to be requeued).

    Backing-off Workloads are left out; with ``timestamp: Eviction`` a Workload evicted for not getting ready
    queues by its eviction time instead of its creation time."""
    seen: dict[str, LiveWorkload] = {}
    due: list[LiveWorkload] = []
    by_eviction = config.requeuing_strategy.timestamp == "Eviction"
    for key, w in live.items():
        if backing_off(w):
            at = ((w.raw.get("status") or {}).get("requeueState") or {}).get("requeueAt")
            if not at or parse_time(at) <= now:
                due.append(w)
            continue
        evicted = condition(w.raw, "Evicted")
        if by_eviction and w.state == PENDING and evicted is not None and evicted.get("reason") == TIMEOUT_REASON \
                and is_true(w.raw, "Requeued"):
            seen[key] = dataclasses.replace(w, created=parse_time(evicted.get("lastTransitionTime")))
            continue
        seen[key] = w
    return seen, due


def block_admissions(decisions: Decisions, live: Mapping[str, LiveWorkload], config: WaitForPodsReady) -> bool:
    """``blockAdmission``: while any admitted Workload is not ready, admit nothing; the Workloads that would have
    been admitted wait with reason ``WaitingForPodsReady`` (Kueue blocks its whole scheduling loop). True when
    it held admissions back."""
    if not (config.enable and config.block_admission and decisions.admit):
        return False
    if all(is_true(w.raw, PODS_READY) for w in live.values() if w.state == ADMITTED and is_true(w.raw, "Admitted")):
        return False
    for key, admission in decisions.admit.items():
        decisions.pending[key] = BLOCKED
        decisions.order[key] = QueuePosition(admission.cluster_queue, 0, live[key].created)
    decisions.deferred += len(decisions.admit)
    decisions.admit = {}
    return True
