"""The watch-maintained Workload index: quota holders, oldest-first pending groups, owners; kept exact under
updates, state changes and deletions."""

from __future__ import annotations

from typing import Any

import pytest

from gitopsq.admission_loop.live_workload import read_workload
from gitopsq.admission_loop.workload_index import WorkloadIndex


def raw(name: str, second: int, *, cpu: str = "1", priority: int = 0, admitted: bool = False,
        finished: bool = False, owner: str | None = None) -> dict[str, Any]:
    conditions = []
    status: dict[str, Any] = {}
    if admitted or finished:
        status["admission"] = {"clusterQueue": "cq", "podSetAssignments": [{"name": "main", "flavors": {"cpu": "f"}}]}
        conditions.append({"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved", "message": "",
                           "lastTransitionTime": "2026-11-21T10:00:00Z"})
    if finished:
        conditions.append({"type": "Finished", "status": "True", "reason": "Succeeded", "message": "",
                           "lastTransitionTime": "2026-11-21T10:00:01Z"})
    status["conditions"] = conditions
    meta: dict[str, Any] = {"name": name, "namespace": "team", "uid": f"uid-{name}", "generation": 1,
                            "creationTimestamp": f"2026-11-21T09:00:{second:02d}Z"}
    if owner:
        meta["ownerReferences"] = [{"kind": "Job", "uid": owner, "controller": True, "name": "j",
                                    "apiVersion": "batch/v1"}]
    return {"metadata": meta, "spec": {"queueName": "q", "priority": priority, "podSets": [{
        "name": "main", "count": 1, "template": {"spec": {"containers": [{"name": "c", "resources": {
            "requests": {"cpu": cpu}}}]}}}]}, "status": status}


def put(index: WorkloadIndex, obj: dict[str, Any]) -> None:
    index.update(f"team/{obj['metadata']['name']}", obj, read_workload(obj))


def test_the_window_is_the_oldest_of_each_group_plus_every_holder() -> None:
    """Per queue, priority and pod sets the oldest ``size`` waiting Workloads, whatever the arrival order."""
    index = WorkloadIndex()
    for name, second in (("c", 3), ("a", 1), ("d", 4), ("b", 2)):
        put(index, raw(name, second))
    put(index, raw("big", 0, cpu="5"))  # another shape: its own group
    put(index, raw("urgent", 9, priority=100))  # another priority: its own group
    put(index, raw("running", 0, admitted=True))
    assert sorted(index.window(2)) == ["team/a", "team/b", "team/big", "team/running", "team/urgent"]
    holders, counts = index.tally()
    assert [w.name for w in holders] == ["running"]
    assert counts == {("team", "q"): 6}


@pytest.mark.parametrize(("change", "pending", "holding"), [
    pytest.param(raw("a", 1, admitted=True), ["team/b"], ["team/a"], id="admitted: leaves its group, holds"),
    pytest.param(raw("a", 1, finished=True), ["team/b"], [], id="finished: in neither"),
    pytest.param(None, ["team/b"], [], id="deleted: in neither"),
])
def test_a_state_change_moves_the_workload(change: dict[str, Any] | None, pending: list[str],
                                           holding: list[str]) -> None:
    """A Workload sits in exactly the set its latest version belongs to."""
    index = WorkloadIndex()
    put(index, raw("a", 1))
    put(index, raw("b", 2))
    if change is None:
        index.update("team/a", None, None)
    else:
        put(index, change)
    assert sorted(index.pending_views) == pending
    assert sorted(index.holding) == holding
    assert sorted(index.window(10)) == sorted(pending + holding)


def test_owners_follow_updates_and_deletions() -> None:
    """The owner index lists each controller's Workloads and forgets them when they go."""
    index = WorkloadIndex()
    put(index, raw("a", 1, owner="job-1"))
    put(index, raw("b", 2, owner="job-1"))
    put(index, raw("c", 3))
    assert index.owners() == {"team/job-1": ["team/a", "team/b"]}
    index.update("team/a", None, None)
    put(index, raw("b", 2, owner="job-2"))
    assert index.owners() == {"team/job-2": ["team/b"]}


def test_finished_counts_follow_finishing_and_deletion() -> None:
    """Finished Workloads are counted per LocalQueue and per the ClusterQueue that admitted them, and leave the
    counts when they are deleted: Kueue's finished gauges without walking them."""
    index = WorkloadIndex()
    put(index, raw("a", 1, admitted=True))
    put(index, raw("b", 2, finished=True))
    assert index.finished_counts() == ({("team", "q"): 1}, {"cq": 1})
    put(index, raw("a", 1, finished=True))
    assert index.finished_counts() == ({("team", "q"): 2}, {"cq": 2})
    index.update("team/b", None, None)
    assert index.finished_counts() == ({("team", "q"): 1}, {"cq": 1})
    index.update("team/a", None, None)
    assert index.finished_counts() == ({}, {})


def test_beyond_counts_what_the_window_leaves_out_per_group() -> None:
    """``beyond(size)``: per group, the waiting Workloads after its oldest ``size``; groups within it are absent."""
    index = WorkloadIndex()
    for second in range(5):
        put(index, raw(f"w{second}", second))
    put(index, raw("big", 0, cpu="5"))
    (group, n), = index.beyond(2).items()
    assert n == 3 and group[:2] == ("team", "q")
    assert index.beyond(5) == {}


def test_counts_say_what_the_watch_has_shown_so_far() -> None:
    """Waiting, holding and finished Workloads as the index holds them (the progress line's ``seen``): a state
    change moves one between them, a deletion takes it out."""
    index = WorkloadIndex()
    for i in range(3):
        put(index, raw(f"p{i}", i))
    put(index, raw("h", 5, admitted=True))
    assert index.counts() == {"pending": 3, "holding": 1, "finished": 0}
    put(index, raw("h", 5, finished=True))
    put(index, raw("p0", 0, admitted=True))
    assert index.counts() == {"pending": 2, "holding": 1, "finished": 1}
    index.update("team/h", None, None)
    index.update("team/p1", None, None)
    assert index.counts() == {"pending": 1, "holding": 1, "finished": 0}
