"""The raw-object vocabulary reads what the API server sends, and reads absent or mistyped fields as empty."""

from __future__ import annotations

from gitopsq.api import raw_objects as ro

POD: ro.KubeObject = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {
        "name": "p",
        "namespace": "team-a",
        "uid": "u1",
        "resourceVersion": "7",
        "labels": {"kueue.x-k8s.io/queue-name": "q"},
        "ownerReferences": [
            {"apiVersion": "batch/v1", "kind": "Job", "name": "j", "uid": "u0"},
            {"apiVersion": "batch/v1", "kind": "Job", "name": "k", "uid": "u2", "controller": True},
        ],
    },
    "spec": {"containers": [{"name": "c", "image": "x"}, "not-a-mapping"], "priority": 3, "flag": True},
    "status": {"conditions": [{"type": "Ready", "status": "True"}]},
}


def test_metadata_accessors() -> None:
    assert (ro.name(POD), ro.namespace(POD), ro.uid(POD), ro.resource_version(POD)) == ("p", "team-a", "u1", "7")
    assert ro.labels_of(POD) == {"kueue.x-k8s.io/queue-name": "q"}
    assert ro.annotations_of(POD) == {}
    owner = ro.controller_of(POD)
    assert owner is not None and owner["name"] == "k"


def test_absent_or_mistyped_metadata_reads_empty() -> None:
    broken = {"metadata": "oops"}
    assert (ro.name(broken), ro.labels_of(broken), ro.owner_references(broken), ro.controller_of(broken)) == (
        "", {}, (), None)
    assert ro.name({}) == ""


def test_paths_into_unmodelled_parts() -> None:
    assert ro.children(POD, "spec", "containers") == [{"name": "c", "image": "x"}]
    assert ro.text(POD, "spec", "missing", "deeper", default="-") == "-"
    assert ro.number(POD, "spec", "priority") == 3
    assert ro.number(POD, "spec", "flag", default=-1) == -1
    assert ro.child(POD, "spec", "priority") == {}


def test_conditions() -> None:
    conditions: list[ro.Condition] = [{"type": "Ready", "status": "True"}, {"type": "Failed", "status": "False"}]
    assert ro.condition_true(conditions, "Ready")
    assert not ro.condition_true(conditions, "Failed")
    assert not ro.condition_true(None, "Ready")
    assert ro.condition(conditions, "Failed") == {"type": "Failed", "status": "False"}
