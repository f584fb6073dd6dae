"""The contract between the generic job reconciler and one job kind (batch/v1 Job, JobSet, RayJob, ...).

An integration only reads and shapes its own objects; it never calls the API. It declares what the shell
needs to know about its kind — Kueue's framework name, where the kind lives (a `Kind`), the CustomResource
that must be installed for it (None for built-in kinds), the RBAC rules its reconciliation needs, whether the
job webhook serves it — and how its objects become pod sets and are started, stopped and restored. Adding a
kind means one module implementing this protocol plus one line in ``registry.REGISTRY`` (see
docs/admission-loop.md, "Writing a new integration"): the reconciler creates the Workload, starts the job when
it is admitted, stops it (and restores its pod templates) when it is evicted, and marks the Workload Finished
when the job ends; the watch cache, the chart's RBAC, the webhook configurations and the events follow from
the declaration.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from gitopsq.api.pod_object import PodSpec, Toleration
from gitopsq.api.raw_objects import KubeObject, MergePatch
from gitopsq.api.workload_object import PodSet
from gitopsq.cluster.kinds import Kind


@dataclass(frozen=True, slots=True)
class Rule:
    """One ClusterRole rule an integration needs (group, resources, verbs)."""

    group: str
    resources: tuple[str, ...]
    verbs: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class PodSetPlacement:
    """What admission adds to one pod set's template: the flavors' node labels and tolerations."""

    name: str
    count: int
    node_selector: Mapping[str, str]
    tolerations: tuple[Toleration, ...]


def place_pod_spec(pod_spec: PodSpec, placement: PodSetPlacement) -> None:
    """Add a pod set's flavor node labels and tolerations to ``pod_spec`` in place, as Kueue merges them into a
    template: the flavors' labels win over the template's, a toleration already there is not added twice."""
    selector = {**(pod_spec.get("nodeSelector") or {}), **placement.node_selector}
    tolerations = list(pod_spec.get("tolerations") or [])
    tolerations.extend(t for t in placement.tolerations if t not in tolerations)
    if selector:
        pod_spec["nodeSelector"] = selector
    if tolerations:
        pod_spec["tolerations"] = tolerations


class Integration(Protocol):
    framework: str  # Kueue's framework name (``integrations.frameworks``), e.g. "batch/job"
    kind: str  # e.g. "Job"
    group: str  # e.g. "batch"
    version: str  # e.g. "v1"
    resource: str  # the REST plural, also the cache resource name, e.g. "jobs"
    crd: str | None  # the CustomResourceDefinition that must be installed ("jobsets.jobset.x-k8s.io"), or None
    rules: tuple[Rule, ...]  # what reconciling this kind needs beyond Workloads and events
    webhook: bool  # whether the job webhook (gitopsq/intake/jobs.py) defaults and validates this kind

    @property
    def kind_info(self) -> Kind:
        """Where the kind lives on the API server (the watch cache's informer is built from it)."""
        ...

    def collection_path(self, namespace: str) -> str:
        """REST path of the kind's collection in ``namespace``."""
        ...

    def pod_sets(self, job: KubeObject) -> list[PodSet]:
        """The Workload ``spec.podSets`` for this job (name, count, template)."""
        ...

    def is_suspended(self, job: KubeObject) -> bool: ...

    def active_pods(self, job: KubeObject) -> int:
        """Pods still running or terminating: quota is released only when none are left."""
        ...

    def pod_selector(self, name: str, uid: str) -> str:
        """A label selector for the pods of the job with this name and UID (to see them go after the job is
        gone)."""
        ...

    def pods_ready(self, job: KubeObject) -> bool:
        """Whether every pod the job runs now is ready or has succeeded (waitForPodsReady)."""
        ...

    def finished(self, job: KubeObject) -> tuple[str, str] | None:
        """(``Succeeded`` | ``Failed``, message) once the job has ended; None while it may still run."""
        ...

    def start_patch(self, job: KubeObject, placements: tuple[PodSetPlacement, ...]) -> MergePatch:
        """A merge patch that injects placements and unsuspends (sent while the job is suspended)."""
        ...

    def suspend_patch(self, job: KubeObject) -> MergePatch:
        """A merge patch that suspends the job (and marks it as being stopped, if the kind has such a mark)."""
        ...

    def start_time_patch(self, job: KubeObject) -> MergePatch | None:
        """A merge patch of the job's status subresource that lets its pod templates be restored (batch/v1:
        unset ``startTime``), or None when none is needed. Sent after the suspend, before the restore."""
        ...

    def restore_patch(self, job: KubeObject, original: list[PodSet]) -> MergePatch | None:
        """A merge patch putting back the original pod templates and counts (Workload ``spec.podSets``) and
        clearing the stop mark, or None when the job already matches them."""
        ...


# (cache resource name, key: "namespace/name", or the name of a cluster-scoped object) -> the cached object or None
CacheGet = Callable[[str, str], KubeObject | None]


@runtime_checkable
class WithRelated(Protocol):
    """An integration whose jobs are read together with other objects (a TrainJob with its training runtime and
    the JobSet made from it). Optional: the shell watches ``related`` beside the kind (the integration counts as
    served only when they are served too) and hands every other method the job `with_related` returns."""

    related: tuple[Kind, ...]  # the kinds the watch cache must hold for this integration

    def with_related(self, job: KubeObject, get: CacheGet) -> KubeObject:
        """The job as the other methods read it: a copy carrying what they need from the cache."""
        ...


def related_kinds(integration: Integration) -> tuple[Kind, ...]:
    """The extra kinds an integration needs watched (none for most)."""
    return integration.related if isinstance(integration, WithRelated) else ()


def with_related(integration: Integration, job: KubeObject, get: CacheGet) -> KubeObject:
    """``job`` as ``integration`` reads it (itself, unless the integration declares related objects)."""
    return integration.with_related(job, get) if isinstance(integration, WithRelated) else job


def child_suspend_patch(integration: Integration, job: KubeObject) -> MergePatch:
    """The patch that suspends a managed parent's running child (Kueue's plain ``Suspend``): the integration's
    optional ``suspend_child_patch(job)`` when it has one (a kind whose ``suspend_patch`` also sets a stop mark
    that only its own reconciliation clears), else its ``suspend_patch``. Optional, so an integration without it
    needs no change."""
    own = getattr(integration, "suspend_child_patch", None)
    patch: MergePatch = own(job) if callable(own) else integration.suspend_patch(job)
    return patch

