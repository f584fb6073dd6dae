"""workload_match.py: which job edits make a job stop matching its Workload (Kueue's EquivalentToWorkload)."""

from __future__ import annotations

import copy
from typing import Any

from gitopsq.admission_loop.integrations import PodSetPlacement
from gitopsq.admission_loop.workload_match import equivalent, running_pod_sets

SPOT = {"key": "spot", "operator": "Exists", "effect": "NoSchedule"}


def _pod_set(count: int = 2, cpu: str = "1", tolerations: list[dict[str, Any]] | None = None,
             min_count: int | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "main", "image": "i", "resources": {"requests": {"cpu": cpu}}}]}
    if tolerations is not None:
        spec["tolerations"] = tolerations
    out: dict[str, Any] = {"name": "main", "count": count, "template": {"spec": spec}}
    if min_count is not None:
        out["minCount"] = min_count
    return out


def _workload(*pod_sets: dict[str, Any], reserved: bool = False, admitted: bool = False,
              admitted_count: int | None = None) -> dict[str, Any]:
    conds = [{"type": "QuotaReserved", "status": str(reserved)}, {"type": "Admitted", "status": str(admitted)}]
    status: dict[str, Any] = {"conditions": conds}
    if reserved:
        status["admission"] = {"podSetAssignments": [
            {"name": "main", "count": admitted_count or pod_sets[0]["count"], "flavors": {"cpu": "spot"}}]}
    return {"spec": {"podSets": list(pod_sets)}, "status": status}


PLACED = (PodSetPlacement("main", 2, {"pool": "spot"}, (SPOT,)),)


def test_same_shape_matches_and_quantities_compare_by_value() -> None:
    """A job with the Workload's pod sets matches, also when a request is written 1000m instead of 1 or an empty
    list stands for a missing field."""
    wl = _workload(_pod_set(cpu="1"))
    job = [_pod_set(cpu="1000m", tolerations=[])]
    assert equivalent(job, wl, suspended=True, max_execution=None, placements=())


def test_count_request_and_max_execution_changes_do_not_match() -> None:
    """A changed count, a changed request or a different max-exec-time-seconds is a mismatch."""
    wl = _workload(_pod_set())
    assert not equivalent([_pod_set(count=3)], wl, suspended=True, max_execution=None, placements=())
    assert not equivalent([_pod_set(cpu="2")], wl, suspended=True, max_execution=None, placements=())
    assert not equivalent([_pod_set()], wl, suspended=True, max_execution=60, placements=())


def test_tolerations_count_until_admitted() -> None:
    """A toleration added to a pending job is a mismatch; a running admitted job carrying the flavor's toleration
    matches (admission put it there)."""
    assert not equivalent([_pod_set(tolerations=[SPOT])], _workload(_pod_set()), suspended=True,
                          max_execution=None, placements=())
    admitted = _workload(_pod_set(), reserved=True, admitted=True)
    assert equivalent([_pod_set(tolerations=[SPOT])], admitted, suspended=False, max_execution=None,
                      placements=PLACED)


def test_reserved_not_admitted_job_matches_before_and_after_start() -> None:
    """With quota reserved but not admitted (checks pending), the suspended job with its original template
    matches, and so does the started shape (flavor tolerations added); another toleration does not."""
    wl = _workload(_pod_set(), reserved=True)
    assert equivalent([_pod_set()], wl, suspended=True, max_execution=None, placements=PLACED)
    assert equivalent([_pod_set(tolerations=[SPOT])], wl, suspended=False, max_execution=None, placements=PLACED)
    other = {"key": "other", "operator": "Exists"}
    assert not equivalent([_pod_set(tolerations=[other])], wl, suspended=True, max_execution=None,
                          placements=PLACED)


def test_partial_admission_counts_the_admitted_pods() -> None:
    """A partially admitted pod set (minCount) runs the admitted count: the running job with that parallelism
    matches, and its pod set as admission shapes it has that count."""
    wl = _workload(_pod_set(count=4, min_count=2), reserved=True, admitted=True, admitted_count=3)
    placed = (PodSetPlacement("main", 3, {}, ()),)
    (shaped,) = running_pod_sets(wl, placed) or [{}]
    assert shaped["count"] == 3
    assert equivalent([_pod_set(count=3, min_count=2)], wl, suspended=False, max_execution=None, placements=placed)
    assert not equivalent([_pod_set(count=4, min_count=2)], wl, suspended=False, max_execution=None,
                          placements=placed)


def test_running_pod_sets_need_a_reservation_naming_every_pod_set() -> None:
    """No reservation, or an admission that does not name a pod set, gives no running shape."""
    assert running_pod_sets(_workload(_pod_set()), PLACED) is None
    wl = _workload(_pod_set(), reserved=True)
    assert running_pod_sets(wl, ()) is None
    assert running_pod_sets(copy.deepcopy(wl), PLACED) is not None
