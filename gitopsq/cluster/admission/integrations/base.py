"""The contract between the generic job reconciler and one job kind (batch/v1 Job, JobSet, RayJob, ...).

An integration only reads and shapes its own objects; it never calls the API. Adding a kind means one
module implementing this protocol plus one line in ``INTEGRATIONS``: the reconciler creates the Workload,
starts the job when it is admitted, stops it (and restores its pod templates) when it is evicted, and marks
the Workload Finished when the job ends.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol


@dataclass(frozen=True, slots=True)
class PodSetPlacement:
    """What admission adds to one pod set's template: the flavors' node labels and tolerations."""

    name: str
    count: int
    node_selector: Mapping[str, str]
    tolerations: tuple[Mapping[str, Any], ...]


class Integration(Protocol):
    kind: str  # e.g. "Job"
    group: str  # e.g. "batch"
    version: str  # e.g. "v1"
    resource: str  # the cache resource name, e.g. "jobs"

    def collection_path(self, namespace: str) -> str:
        """REST path of the kind's collection in ``namespace``."""
        ...

    def pod_sets(self, job: Mapping[str, Any]) -> list[dict[str, Any]]:
        """The Workload ``spec.podSets`` for this job (name, count, template)."""
        ...

    def is_suspended(self, job: Mapping[str, Any]) -> bool: ...

    def active_pods(self, job: Mapping[str, Any]) -> int:
        """Pods still running or terminating: quota is released only when none are left."""
        ...

    def pod_selector(self, uid: str) -> str:
        """A label selector for the pods of the job with this UID (to see them go after the job is gone)."""
        ...

    def pods_ready(self, job: Mapping[str, Any]) -> bool:
        """Whether every pod the job runs now is ready or has succeeded (waitForPodsReady)."""
        ...

    def finished(self, job: Mapping[str, Any]) -> tuple[str, str] | None:
        """(``Succeeded`` | ``Failed``, message) once the job has ended; None while it may still run."""
        ...

    def start_patch(self, job: Mapping[str, Any], placements: tuple[PodSetPlacement, ...]) -> dict[str, Any]:
        """A merge patch that injects placements and unsuspends (sent while the job is suspended)."""
        ...

    def suspend_patch(self, job: Mapping[str, Any]) -> dict[str, Any]:
        """A merge patch that suspends the job (and marks it as being stopped, if the kind has such a mark)."""
        ...

    def start_time_patch(self, job: Mapping[str, Any]) -> dict[str, Any] | None:
        """A merge patch of the job's status subresource that lets its pod templates be restored (batch/v1:
        unset ``startTime``), or None when none is needed. Sent after the suspend, before the restore."""
        ...

    def restore_patch(self, job: Mapping[str, Any], original: list[Mapping[str, Any]]) -> dict[str, Any] | None:
        """A merge patch putting back the original pod templates and counts (Workload ``spec.podSets``) and
        clearing the stop mark, or None when the job already matches them."""
        ...
