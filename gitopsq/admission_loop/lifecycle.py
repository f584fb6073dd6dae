"""Stopping admitted work that the admission core does not decide about (Kueue's workload controller): a Workload
deactivated by a user (``spec.active: false``, what ``kueuectl stop workload`` sets) or by the loop when its
``spec.maximumExecutionTimeSeconds`` is used up. Pure: the pass hands in the live Workloads and ``now``.

Kueue deactivates in three steps, each one write, so a crash between them loses nothing: the
``DeactivationTarget`` condition names the cause, ``spec.active`` turns false, and the eviction follows with
reason ``DeactivatedDueTo<cause>``. A user's own ``spec.active: false`` is evicted with reason ``Deactivated``.
The job reconciler then stops the Job (it stays suspended) and clears the reservation once its pods are gone.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from gitopsq.admission_loop.decisions import Eviction
from gitopsq.admission_loop.live_workload import ADMITTED, PENDING, LiveWorkload
from gitopsq.admission_loop.workload_status import condition, parse_time

MAX_EXEC_LABEL: Final = "kueue.x-k8s.io/max-exec-time-seconds"
DEACTIVATION_TARGET: Final = "DeactivationTarget"
MAX_EXEC_EXCEEDED: Final = "MaximumExecutionTimeExceeded"
REQUEUING_LIMIT_EXCEEDED: Final = "RequeuingLimitExceeded"
# Kueue's words for each cause, as they appear after "due to".
_CAUSES: Final = {MAX_EXEC_EXCEEDED: "exceeding the maximum execution time",
                  REQUEUING_LIMIT_EXCEEDED: "exceeding the maximum number of re-queuing retries"}


def cause_words(cause: str) -> str:
    return _CAUSES[cause]


@dataclass(frozen=True, slots=True)
class Deactivate:
    """Mark an admitted Workload for deactivation: ``DeactivationTarget=True`` with ``reason``, then
    ``spec.active: false``."""

    reason: str
    message: str
    event: str  # the Warning event Kueue records on the Workload ("" when the mark is already written)


@dataclass(frozen=True, slots=True)
class Lifecycle:
    """What one pass writes besides the engine's decisions."""

    deactivate: dict[str, Deactivate]
    evict: dict[str, Eviction]


def max_execution_seconds(labels: Mapping[str, str]) -> int | None:
    """The Job label ``kueue.x-k8s.io/max-exec-time-seconds`` as a positive integer, else None."""
    text = labels.get(MAX_EXEC_LABEL)
    if text is None or not text.strip().isdigit():
        return None
    value = int(text)
    return value if value > 0 else None


def remaining_seconds(w: LiveWorkload, now: float) -> float | None:
    """Execution time left to an admitted Workload with a maximum: the maximum, less the time it ran in past
    admissions, less the time since it was last admitted. None without a maximum or while not admitted."""
    limit = (w.raw.get("spec") or {}).get("maximumExecutionTimeSeconds")
    admitted = condition(w.raw, "Admitted")
    if limit is None or admitted is None or admitted.get("status") != "True":
        return None
    past = int((w.raw.get("status") or {}).get("accumulatedPastExecutionTimeSeconds") or 0)
    return float(limit) - past - (now - parse_time(admitted.get("lastTransitionTime")))


def lifecycle(live: Mapping[str, LiveWorkload], now: float) -> Lifecycle:
    """Deactivations to start and evictions of deactivated Workloads that still hold quota."""
    out = Lifecycle({}, {})
    for key, w in live.items():
        if w.state != ADMITTED:
            continue
        if (w.raw.get("spec") or {}).get("active") is False:
            target = condition(w.raw, DEACTIVATION_TARGET)
            if target is not None and target.get("status") == "True":
                cause = str(target.get("reason", ""))
                words = _CAUSES.get(cause, str(target.get("message", "")))
                out.evict[key] = Eviction("Evicted", f"DeactivatedDueTo{cause}",
                                          f"The workload is deactivated due to {words}", "")
            else:
                out.evict[key] = Eviction("Evicted", "Deactivated", "The workload is deactivated", "")
            continue
        target = condition(w.raw, DEACTIVATION_TARGET)
        if target is not None and target.get("status") == "True":  # marked, spec.active not yet off: redo
            out.deactivate[key] = Deactivate(str(target.get("reason", "")), str(target.get("message", "")), "")
            continue
        left = remaining_seconds(w, now)
        if left is not None and left <= 0:
            limit = int((w.raw.get("spec") or {})["maximumExecutionTimeSeconds"])
            out.deactivate[key] = Deactivate(MAX_EXEC_EXCEEDED, _CAUSES[MAX_EXEC_EXCEEDED],
                                             f"The maximum execution time ({limit}s) exceeded")
    return out


def reactivated(live: Mapping[str, LiveWorkload]) -> list[LiveWorkload]:
    """Pending Workloads whose ``spec.active`` is true again after a deactivation (``Requeued=False`` with a
    ``Deactivated*`` reason): they get ``Requeued=True`` reason ``Reactivated`` before they compete again."""
    out = []
    for w in live.values():
        requeued = condition(w.raw, "Requeued")
        if w.state == PENDING and requeued is not None and requeued.get("status") == "False" \
                and str(requeued.get("reason", "")).startswith("Deactivated"):
            out.append(w)
    return out
