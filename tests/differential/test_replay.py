"""The driver's reading of a scenario (no Kueue needed)."""

from __future__ import annotations

from typing import Any

import pytest

from differential.replay import queues_below_cohort_objects


def _cq(name: str, cohort: str | None) -> dict[str, Any]:
    return {"kind": "ClusterQueue", "metadata": {"name": name}, "spec": {"cohortName": cohort} if cohort else {}}


def _cohort(name: str, parent: str | None = None) -> dict[str, Any]:
    return {"kind": "Cohort", "metadata": {"name": name}, "spec": {"parentName": parent} if parent else {}}


@pytest.mark.parametrize(("objects", "watched"), [
    pytest.param([_cq("a", "pool"), _cq("b", "pool")], {}, id="cohort-only-named-no-object-to-reconcile"),
    pytest.param([_cq("a", None)], {}, id="queue-without-cohort"),
    pytest.param([_cohort("left", "org"), _cohort("right", "org"), _cq("a", "left"), _cq("b", "right")],
                 {"a": "cohort/org", "b": "cohort/org"}, id="cohort-objects-below-a-named-root-190041"),
    pytest.param([_cohort("pool"), _cq("a", "pool"), _cq("b", "other")], {"a": "cohort/pool"},
                 id="only-the-queue-below-the-object"),
])
def test_queues_below_cohort_objects(objects: list[dict[str, Any]], watched: dict[str, str]) -> None:
    """The driver waits for Kueue's status-triggered requeue only for ClusterQueues with a Cohort object among their
    ancestors, keyed by the root of their tree."""
    assert queues_below_cohort_objects({"objects": objects}) == watched
