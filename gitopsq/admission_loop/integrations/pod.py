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

from typing import Final, cast

from gitopsq.admission_loop.integrations.base import PodSetPlacement, Rule
from gitopsq.admission_loop.integrations.pod_group import Unit, phase, ready, start_patch, started, terminal
from gitopsq.admission_loop.integrations.pod_reconciler import PassContext, PodPass, PodState
from gitopsq.api.pod_object import PodObject
from gitopsq.api.raw_objects import KubeObject, MergePatch
from gitopsq.api.workload_object import PodSet
from gitopsq.cluster.kinds import Kind
from gitopsq.manifests.pod_marks import MANAGED_LABEL, MANAGED_VALUE, gated


def _pod(job: KubeObject) -> PodObject:
    return cast(PodObject, job)  # the edge: an object of the pods resource


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

    def pod_sets(self, job: KubeObject) -> list[PodSet]:
        return Unit(str(job["metadata"]["namespace"]), "", [cast(PodObject, dict(job))]).pod_sets()

    def is_suspended(self, job: KubeObject) -> bool:
        return gated(job) or terminal(_pod(job))

    def active_pods(self, job: KubeObject) -> int:
        return int(started(_pod(job)))

    def pod_selector(self, name: str, uid: str) -> str:
        return f"{MANAGED_LABEL}={MANAGED_VALUE}"

    def pods_ready(self, job: KubeObject) -> bool:
        return ready(_pod(job)) or phase(_pod(job)) == "Succeeded"

    def finished(self, job: KubeObject) -> tuple[str, str] | None:
        return Unit(str(job["metadata"]["namespace"]), "", [cast(PodObject, dict(job))]).finished()

    def start_patch(self, job: KubeObject, placements: tuple[PodSetPlacement, ...]) -> MergePatch:
        return start_patch(_pod(job), placements[0] if placements else None)

    def suspend_patch(self, job: KubeObject) -> MergePatch:
        return {}  # a started pod cannot be gated again: it is deleted (pod_reconciler.py)

    def start_time_patch(self, job: KubeObject) -> MergePatch | None:
        return None

    def restore_patch(self, job: KubeObject, original: list[PodSet]) -> MergePatch | None:
        return None
