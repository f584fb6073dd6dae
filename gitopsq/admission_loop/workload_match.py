"""Whether a job still matches its Workload (Kueue's ``EquivalentToWorkload``): when it does not — a suspended
job edited, a running Job's parallelism changed, a prebuilt Workload made for another shape — the reconciler
updates, deletes or finishes the Workload (job_reconciler.py, prebuilt.py).

What is compared is what Kueue compares: ``maximumExecutionTimeSeconds``, then the pod sets in order — count,
minCount, the containers and init containers, and the tolerations unless the Workload is admitted (admission
adds the flavors' tolerations to a started job). Node selectors, labels and names are not compared. While the
Workload holds a reservation the job is compared with the pod sets as admission shapes them (the flavors'
tolerations added, a partially admitted pod set's admitted count); a suspended job may also match the Workload's
own pod sets (it has not been started yet, or has been restored). Values compare as the API server's semantic
equality does: a missing field equals an empty one, and quantities by value (``1000m`` is ``1``). Pure.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from gitopsq.admission_loop.integrations import PodSetPlacement
from gitopsq.admission_loop.workload_status import is_true
from gitopsq.api.pod_object import PodSpec, PodTemplateSpec
from gitopsq.api.quantity import QuantityError, parse_quantity
from gitopsq.api.workload_object import PodSet, WorkloadObject

_QUANTITY_MAPS = frozenset({"requests", "limits"})


def _normal(value: object, *, quantities: bool = False) -> object:
    """``value`` with empty fields dropped and (inside requests/limits) quantities replaced by their value."""
    if isinstance(value, Mapping):
        out: dict[object, object] = {}
        for key, item in value.items():
            norm = _normal(item, quantities=key in _QUANTITY_MAPS) if not quantities else _quantity(item)
            if norm not in (None, "", [], {}, False):
                out[key] = norm
        return out
    if isinstance(value, list):
        return [_normal(item) for item in value]
    return value


def _quantity(value: object) -> object:
    try:
        return parse_quantity(value)  # equal when the amounts are
    except QuantityError:
        return value


def _same(a: object, b: object) -> bool:
    return bool(_normal({"v": a}) == _normal({"v": b}))


def _pod_spec(pod_set: PodSet) -> PodSpec:
    return (pod_set.get("template") or {}).get("spec") or {}


def same_pod_sets(job_sets: Sequence[PodSet], wl_sets: Sequence[PodSet], *,
                  ignore_tolerations: bool = False) -> bool:
    """Kueue's ``ComparePodSetSlices``."""
    if len(job_sets) != len(wl_sets):
        return False
    for a, b in zip(job_sets, wl_sets, strict=True):
        if int(a.get("count") or 0) != int(b.get("count") or 0) or a.get("minCount") != b.get("minCount"):
            return False
        spec_a, spec_b = _pod_spec(a), _pod_spec(b)
        fields = ("initContainers", "containers") if ignore_tolerations else \
            ("tolerations", "initContainers", "containers")
        if any(not _same(spec_a.get(f), spec_b.get(f)) for f in fields):
            return False
    return True


def running_pod_sets(workload: WorkloadObject,
                     placements: tuple[PodSetPlacement, ...]) -> list[PodSet] | None:
    """The Workload's pod sets as its admission starts them (Kueue's ``expectedRunningPodSets``), or None when it
    holds no reservation or its admission does not name every pod set."""
    if not is_true(workload, "QuotaReserved"):
        return None
    by_name = {p.name: p for p in placements}
    sets = list((workload.get("spec") or {}).get("podSets") or ())
    partial = any(ps.get("minCount") is not None for ps in sets)
    out: list[PodSet] = []
    for ps in sets:
        placement = by_name.get(str(ps.get("name", "main")))
        if placement is None:
            return None
        tolerations = list(_pod_spec(ps).get("tolerations") or ())
        tolerations.extend(t for t in placement.tolerations if t not in tolerations)
        template: PodTemplateSpec = {**(ps.get("template") or {})}
        template["spec"] = {**_pod_spec(ps), "tolerations": tolerations}
        count = placement.count if partial and ps.get("minCount") is not None else ps.get("count") or 0
        out.append({**ps, "count": count, "template": template})
    return out


def equivalent(job_sets: Sequence[PodSet], workload: WorkloadObject, *, suspended: bool,
               max_execution: int | None, placements: tuple[PodSetPlacement, ...]) -> bool:
    """Whether the job (its pod sets, its suspension, its ``max-exec-time-seconds``) matches ``workload``."""
    spec = workload.get("spec") or {}
    if spec.get("maximumExecutionTimeSeconds") != max_execution:
        return False
    ignore = is_true(workload, "Admitted")
    running = running_pod_sets(workload, placements)
    if running is not None:
        if same_pod_sets(job_sets, running, ignore_tolerations=ignore):
            return True
        return suspended and same_pod_sets(job_sets, spec.get("podSets") or (), ignore_tolerations=ignore)
    return same_pod_sets(job_sets, spec.get("podSets") or (), ignore_tolerations=ignore)
