"""Plain Pods and pod groups (Kueue's framework ``pod``): a Pod labelled ``kueue.x-k8s.io/queue-name`` is created
gated by the pod webhook and released by admission; a group (``kueue.x-k8s.io/pod-group-name`` and
``pod-group-total-count``) is one Workload admitted all or nothing.

A group's pods are many objects behind one Workload, so this integration does not go through the generic
reconciler's per-object steps: it brings its own pass (`reconcile_pass`, pod_reconciler.py), which the generic
reconciler runs instead, and the per-object methods below describe a single pod (used for its pod set and by
anything that reads one pod). Only pods labelled ``kueue.x-k8s.io/managed=true`` are cached (the informer's label
selector), so the loop does not hold every pod of the cluster in memory.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from gitopsq.admission_loop.integrations.base import PodSetPlacement, Rule
from gitopsq.admission_loop.integrations.pod_group import Unit, phase, ready, start_patch, started, terminal
from gitopsq.admission_loop.integrations.pod_reconciler import PassContext, PodPass, PodState
from gitopsq.cluster.kinds import Kind
from gitopsq.manifests.pod_marks import MANAGED_LABEL, MANAGED_VALUE, gated

POD_KIND: Final = Kind("Pod", "", "v1", "pods", True, synced=False,
                       label_selector=f"{MANAGED_LABEL}={MANAGED_VALUE}")


class Pod:
    framework = "pod"
    kind = POD_KIND.kind
    group = POD_KIND.group
    version = POD_KIND.version
    resource = POD_KIND.plural
    crd: str | None = None
    # managed pods watched; ungated with the flavors' placement; finalizer removed; deleted on a stop (excess
    # pods too), each marked TerminationTarget through the status subresource first
    rules: tuple[Rule, ...] = (Rule("", ("pods",), ("delete", "get", "list", "patch", "watch")),
                               Rule("", ("pods/status",), ("patch",)))
    webhook: bool = True

    def __init__(self) -> None:
        self._state = PodState()

    @property
    def kind_info(self) -> Kind:
        return POD_KIND

    def collection_path(self, namespace: str) -> str:
        return POD_KIND.collection_path(namespace)

    def reconcile_pass(self, ctx: PassContext) -> None:
        """The whole pass for pods and pod groups (pod_reconciler.py), run by the generic reconciler."""
        PodPass(ctx, self._state).run()

    def pod_sets(self, job: Mapping[str, Any]) -> list[dict[str, Any]]:
        return Unit(str(job["metadata"]["namespace"]), "", [dict(job)]).pod_sets()

    def is_suspended(self, job: Mapping[str, Any]) -> bool:
        return gated(job) or terminal(job)

    def active_pods(self, job: Mapping[str, Any]) -> int:
        return int(started(job))

    def pod_selector(self, name: str, uid: str) -> str:
        return f"{MANAGED_LABEL}={MANAGED_VALUE}"

    def pods_ready(self, job: Mapping[str, Any]) -> bool:
        return ready(job) or phase(job) == "Succeeded"

    def finished(self, job: Mapping[str, Any]) -> tuple[str, str] | None:
        return Unit(str(job["metadata"]["namespace"]), "", [dict(job)]).finished()

    def start_patch(self, job: Mapping[str, Any], placements: tuple[PodSetPlacement, ...]) -> dict[str, Any]:
        return start_patch(job, placements[0] if placements else None)

    def suspend_patch(self, job: Mapping[str, Any]) -> dict[str, Any]:
        return {}  # a started pod cannot be gated again: it is deleted (pod_reconciler.py)

    def start_time_patch(self, job: Mapping[str, Any]) -> dict[str, Any] | None:
        return None

    def restore_patch(self, job: Mapping[str, Any], original: list[Mapping[str, Any]]) -> dict[str, Any] | None:
        return None
