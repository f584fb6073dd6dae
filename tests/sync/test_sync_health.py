"""Health after apply, the pure part: what makes a queue Healthy, Unhealthy or Pending, and the status summary."""

from __future__ import annotations

from typing import Any

from gitopsq.api.model import ObjectKey
from gitopsq.cluster.status import parse_interval
from gitopsq.sync.health import checked, judge, status_field, summary, wait_healthy

CQ = ObjectKey(group="kueue.x-k8s.io", kind="ClusterQueue", namespace="", name="team-a")


def queue(status: str | None, reason: str = "Ready", *, generation: int = 1, seen: int | None = 1) -> dict[str, Any]:
    conds = [] if status is None else [{"type": "Active", "status": status, "reason": reason, "message": "m",
                                        **({"observedGeneration": seen} if seen is not None else {})}]
    return {"metadata": {"generation": generation}, "status": {"conditions": conds}}


def test_active_true_is_healthy_and_inactive_names_its_reason() -> None:
    """Active=True is Healthy; Active=False with FlavorNotFound is Unhealthy with that reason."""
    assert judge(CQ, queue("True")).healthy
    bad = judge(CQ, queue("False", "FlavorNotFound"))
    assert (bad.status, bad.reason) == ("Unhealthy", "FlavorNotFound")


def test_no_condition_or_an_old_generation_is_pending_and_a_missing_object_unhealthy() -> None:
    """No Active condition (nothing writes queue status) and a condition for an older generation are Pending; a
    queue gone from the cluster is Unhealthy NotFound."""
    assert (judge(CQ, queue(None)).status, judge(CQ, queue(None)).reason) == ("Pending", "NoStatusYet")
    assert judge(CQ, queue("True", generation=2, seen=1)).status == "Pending"
    assert (judge(CQ, None).status, judge(CQ, None).reason) == ("Unhealthy", "NotFound")


def test_only_queues_are_checked_and_the_summary_lists_the_bad_ones() -> None:
    """Namespaces and flavors carry no health; the summary and status field count and list the queues not
    healthy."""
    flavor = ObjectKey(group="kueue.x-k8s.io", kind="ResourceFlavor", namespace="", name="f")
    assert checked([flavor, CQ]) == [CQ]
    verdicts = [judge(CQ, queue("False", "FlavorNotFound")), judge(CQ, queue("True"))]
    assert summary(verdicts).startswith("1 of 2 queues not healthy: ClusterQueue/team-a Unhealthy FlavorNotFound")
    assert status_field(verdicts)["healthy"] == 1 and len(status_field(verdicts)["objects"]) == 1


def test_waiting_stops_when_healthy_or_at_the_timeout() -> None:
    """wait_healthy reads again until every queue is healthy, and returns the last verdicts at the timeout."""
    answers = iter([queue(None), queue("True")])
    now = [0.0]
    got = wait_healthy(lambda keys: {CQ: next(answers)}, [CQ], timeout=10, clock=lambda: now[0],
                       sleep=lambda s: now.__setitem__(0, now[0] + s))
    assert got[0].healthy and now[0] == 1.0
    never = wait_healthy(lambda keys: {CQ: queue(None)}, [CQ], timeout=3, clock=lambda: now[0],
                         sleep=lambda s: now.__setitem__(0, now[0] + s))
    assert never[0].status == "Pending" and now[0] == 4.0


def test_interval_text_as_the_crd_allows() -> None:
    """spec.interval: 1m30s is 90 s, 500ms half a second; text the CRD pattern refuses, or zero, is None."""
    assert parse_interval("1m30s") == 90.0 and parse_interval("500ms") == 0.5
    assert parse_interval("90") is None and parse_interval("0s") is None and parse_interval("1m 30s") is None
