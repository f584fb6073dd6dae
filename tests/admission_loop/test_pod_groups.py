"""Pods and pod groups as units of admission (gitopsq/admission_loop/integrations/pod_group.py, pure): Kueue's
rules for when a group may get its Workload, its pod sets by role, surplus pods, the start patch and the end."""

from __future__ import annotations

from typing import Any

from gitopsq.admission_loop.integrations import BY_FRAMEWORK, PodSetPlacement
from gitopsq.admission_loop.integrations.pod_group import start_patch, units
from gitopsq.manifests.pod_marks import GATE, GROUP_NAME, RETRIABLE_IN_GROUP, ROLE_HASH, TOTAL_COUNT


def _pod(name: str, *, group: str = "", total: int = 0, cpu: str = "1", phase: str = "Pending",
         created: str = "2026-01-01T00:00:00Z", queue: str = "q", **annotations: str) -> dict[str, Any]:
    notes = dict(annotations)
    if group:
        notes[GROUP_NAME] = group
        notes[TOTAL_COUNT] = str(total)
    return {"metadata": {"name": name, "namespace": "ns", "uid": f"uid-{name}", "creationTimestamp": created,
                         "labels": {"kueue.x-k8s.io/queue-name": queue}, "annotations": notes},
            "spec": {"schedulingGates": [{"name": GATE}], "containers": [
                {"name": "c", "image": "i", "resources": {"requests": {"cpu": cpu}}}]},
            "status": {"phase": phase}}


def test_single_pods_are_units_of_one_and_groups_gather_their_members() -> None:
    """Each ungrouped pod is its own unit with pod set ``main`` of 1; pods naming one group in one namespace are
    one unit; a pod without a queue label is no unit."""
    unlabelled = _pod("x")
    unlabelled["metadata"]["labels"] = {}
    found = units([_pod("a"), _pod("g1", group="g", total=2), _pod("g2", group="g", total=2), unlabelled])
    assert sorted((u.group, len(u.pods)) for u in found) == [("", 1), ("g", 2)]
    single = next(u for u in found if not u.group)
    assert [(p["name"], p["count"]) for p in single.pod_sets()] == [("main", 1)]
    assert "schedulingGates" not in single.pod_sets()[0]["template"]["spec"]


def test_an_incomplete_or_inconsistent_group_has_a_problem() -> None:
    """Fewer runnable pods than the total, a failed member that leaves too few, different queues or totals:
    each is reported (Kueue's ErrWorkloadCompose); a complete group has none."""
    (short,) = units([_pod("a", group="g", total=3), _pod("b", group="g", total=3)])
    assert short.problem() == "'g' group has fewer runnable pods than expected"
    (failed,) = units([_pod("a", group="g", total=2), _pod("b", group="g", total=2, phase="Failed")])
    assert failed.problem() is not None
    (queues,) = units([_pod("a", group="g", total=2), _pod("b", group="g", total=2, queue="other")])
    assert "different queue names" in str(queues.problem())
    (totals,) = units([_pod("a", group="g", total=2), _pod("b", group="g", total=3)])
    assert "pod-group-total-count" in str(totals.problem())
    (whole,) = units([_pod("a", group="g", total=2), _pod("b", group="g", total=2)])
    assert whole.problem() is None


def test_group_pod_sets_are_per_role_sorted_and_surplus_pods_are_the_newest() -> None:
    """Members of two shapes make two pod sets named by role hash (sorted) with their counts; of four runnable
    pods in a group of three, the newest is the excess and is not counted."""
    pods = [_pod("w1", group="g", total=3, created="2026-01-01T00:00:01Z"),
            _pod("w2", group="g", total=3, created="2026-01-01T00:00:02Z"),
            _pod("d", group="g", total=3, cpu="2", created="2026-01-01T00:00:00Z"),
            _pod("late", group="g", total=3, created="2026-01-01T00:00:09Z")]
    (unit,) = units(pods)
    assert [p["metadata"]["name"] for p in unit.excess()] == ["late"]
    sets = unit.pod_sets()
    assert [s["name"] for s in sets] == sorted(s["name"] for s in sets)
    assert sorted(s["count"] for s in sets) == [1, 2]


def test_the_role_hash_annotation_wins_over_the_spec() -> None:
    """A started pod (its spec changed by the placement) keeps the role its annotation names."""
    (unit,) = units([_pod("a", group="g", total=1, **{ROLE_HASH: "abcdef12"})])
    assert [s["name"] for s in unit.pod_sets()] == ["abcdef12"]


def test_a_group_ends_when_total_pods_succeeded_or_an_unretriable_group_stops() -> None:
    """Succeeded ≥ total finishes the group ("Pods succeeded: 2/2."); all terminated with a member marked
    retriable-in-group false finishes it too; one failure of a retriable group does not."""
    (done,) = units([_pod("a", group="g", total=2, phase="Succeeded"), _pod("b", group="g", total=2,
                                                                           phase="Succeeded")])
    assert done.finished() == ("Succeeded", "Pods succeeded: 2/2.")
    (retry,) = units([_pod("a", group="g", total=2, phase="Succeeded"), _pod("b", group="g", total=2,
                                                                            phase="Failed")])
    assert retry.finished() is None
    (final,) = units([_pod("a", group="g", total=2, phase="Succeeded"),
                      _pod("b", group="g", total=2, phase="Failed", **{RETRIABLE_IN_GROUP: "false"})])
    assert final.finished() == ("Succeeded", "Pods succeeded: 1/2.")
    single = BY_FRAMEWORK["pod"]
    assert single.finished(_pod("s", phase="Failed")) == ("Failed", "Pod failed")


def test_start_patch_adds_the_placement_and_removes_only_the_admission_gate() -> None:
    """The start patch sets the flavor's node labels, appends its tolerations and keeps other gates."""
    pod = _pod("a")
    pod["spec"]["schedulingGates"].append({"name": "other"})
    pod["spec"]["tolerations"] = [{"key": "t", "operator": "Exists"}]
    spot = {"key": "spot", "operator": "Exists", "effect": "NoSchedule"}
    patch = start_patch(pod, PodSetPlacement("main", 1, {"pool": "p"}, (spot,)))
    assert patch == {"spec": {"schedulingGates": [{"name": "other"}], "nodeSelector": {"pool": "p"},
                              "tolerations": [{"key": "t", "operator": "Exists"}, spot]}}
    pod["spec"]["schedulingGates"] = [{"name": GATE}]
    assert start_patch(pod, None) == {"spec": {"schedulingGates": None}}


def test_members_beyond_an_existing_workloads_counts_are_excess_but_terminating_ones_do_not_count() -> None:
    """Against a Workload of two pods of one role, a third live member is excess (the newest); a member being
    deleted is not counted, so its replacement is not excess."""
    old = _pod("a", group="g", total=2, created="2026-01-01T00:00:00Z")
    pods = [old, _pod("b", group="g", total=2, created="2026-01-01T00:00:01Z"),
            _pod("c", group="g", total=2, created="2026-01-01T00:00:02Z")]
    (unit,) = units(pods)
    role = unit.pod_sets()[0]["name"]
    assert [p["metadata"]["name"] for p in unit.excess_over({role: 2})] == ["c"]
    old["metadata"]["deletionTimestamp"] = "2026-01-01T00:01:00Z"
    old["spec"]["nodeName"] = "n1"
    (unit,) = units(pods)
    assert unit.excess_over({role: 2}) == []


def test_absent_members_are_counted_per_role_of_the_workload() -> None:
    """A failed or deleted member leaves its role one short until a replacement exists; a complete group
    misses none."""
    pods = [_pod("a", group="g", total=2), _pod("b", group="g", total=2, phase="Failed")]
    (unit,) = units(pods)
    role = unit.pod_sets()[0]["name"]
    assert unit.absent({role: 2}) == 1
    (replaced,) = units([*pods, _pod("c", group="g", total=2)])
    assert replaced.absent({role: 2}) == 0
