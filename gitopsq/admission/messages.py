"""Kueue's condition reasons and message formats, in one place (shared/research/kueue.md §2).

Users' runbooks and alerts match on these strings, so they follow Kueue's wording to the character.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Final

from gitopsq.api.quantity import QuantityFormat, format_milli


@dataclass(frozen=True, slots=True)
class Status:
    """Why a pending workload waits: the reason and message of its ``QuotaReserved=False`` condition. Immutable, so
    the workloads parked behind one attempt of their equivalence class share its status."""

    reason: str
    message: str


# QuotaReserved=False reasons (UnadmittedWorkloadsObservability), most severe first among the fit reasons.
NO_MATCHING_FLAVOR: Final = "NoMatchingFlavor"
EXCEEDS_MAX_QUOTA: Final = "ExceedsMaxQuota"
WAITING_FOR_QUOTA: Final = "WaitingForQuota"
WAITING_FOR_PREEMPTED: Final = "WaitingForPreemptedWorkloads"
MISCONFIGURED: Final = "Misconfigured"
SUSPENDED: Final = "Suspended"
PENDING_EVALUATION: Final = "PendingEvaluation"
DEACTIVATED: Final = "Deactivated"

# Severity used to resolve one reason out of many (NoMatchingFlavor > ExceedsMaxQuota > WaitingForQuota).
SEVERITY: Final = {WAITING_FOR_QUOTA: 1, EXCEEDS_MAX_QUOTA: 2, NO_MATCHING_FLAVOR: 3}

# Preemption reasons (the Preempted condition) and their human-readable form in the eviction message.
IN_CLUSTER_QUEUE: Final = "InClusterQueue"
IN_COHORT_RECLAMATION: Final = "InCohortReclamation"
IN_COHORT_FAIR_SHARING: Final = "InCohortFairSharing"
IN_COHORT_RECLAIM_WHILE_BORROWING: Final = "InCohortReclaimWhileBorrowing"
HUMAN_PREEMPTION_REASON: Final = {
    IN_CLUSTER_QUEUE: "prioritization in the ClusterQueue",
    IN_COHORT_RECLAMATION: "reclamation within the cohort",
    IN_COHORT_FAIR_SHARING: "Fair Sharing within the cohort",
    IN_COHORT_RECLAIM_WHILE_BORROWING: "reclamation within the cohort while borrowing",
}

NO_LONGER_FITS: Final = "Workload no longer fits after processing another workload"
OVERLAPPING_TARGETS: Final = "Workload has overlapping preemption targets with another workload"
NAMESPACE_MISMATCH: Final = "workload namespace doesn't match ClusterQueue selector"
FAILED_CHECKS: Final = "The workload has failed admission checks"
PENDING_EVALUATION_MESSAGE: Final = "Workload is pending evaluation in the scheduling queue"
CQ_STOPPED_EVICTION: Final = "The ClusterQueue is stopped"
LQ_STOPPED_EVICTION: Final = "The LocalQueue is stopped"

_BINARY_RESOURCES = ("memory", "ephemeral-storage", "hugepages-")


@lru_cache(maxsize=4096)
def amount(resource: str, milli: int) -> str:
    """A milli-unit amount printed the way Kueue prints it for ``resource`` in messages (memoised: every failed
    quota check of every nomination prints one)."""
    binary = resource.startswith(_BINARY_RESOURCES) or resource.endswith("memory")
    return format_milli(milli, QuantityFormat.BINARY_SI if binary else QuantityFormat.DECIMAL_SI)


def insufficient_unused(resource: str, flavor: str, missing: int) -> str:
    return f"insufficient unused quota for {resource} in flavor {flavor}, {amount(resource, missing)} more needed"


def exceeds_max(resource: str, flavor: str, previous: int, request: int, maximum: int) -> str:
    return (f"insufficient quota for {resource} in flavor {flavor}, previously considered podsets requests "
            f"({amount(resource, previous)}) + current podset request ({amount(resource, request)}) > maximum "
            f"capacity ({amount(resource, maximum)})")


def pod_set_failure(pod_set: str, reasons: list[str]) -> str:
    return f"couldn't assign flavors to pod set {pod_set}: {', '.join(sorted(reasons))}"


def pending_preemption(message: str, victims: int) -> str:
    return f"{message}. Pending the preemption of {victims} workload(s)"


def preempted(reason: str, preemptor: str, preemptor_path: str, preemptee_path: str) -> str:
    return (f"Preempted to accommodate a workload (UID: {preemptor}, JobUID: UNKNOWN) due to "
            f"{HUMAN_PREEMPTION_REASON[reason]}; preemptor path: {preemptor_path}; preemptee path: {preemptee_path}")


def quota_reserved(cluster_queue: str) -> str:
    return f"Quota reserved in ClusterQueue {cluster_queue}"


def cq_inactive(cluster_queue: str) -> str:
    return f"ClusterQueue {cluster_queue} is inactive"


def lq_inactive(local_queue: str) -> str:
    return f"LocalQueue {local_queue} is inactive"


def lq_missing(local_queue: str) -> str:
    return f"LocalQueue {local_queue} doesn't exist"


def cq_missing(cluster_queue: str) -> str:
    return f"ClusterQueue {cluster_queue} doesn't exist"

# Kueue v0.19's eviction message when an admission check answers Retry (workload_controller.go); the check's name
# goes to the AdmissionCheck state, not to this message.
ADMISSION_CHECK_EVICTION = "At least one admission check is false"
