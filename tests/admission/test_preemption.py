"""Classical preemption: policies, candidate order, minimal victim set, reclaim and borrowing (kueue.md §1.4)."""

from __future__ import annotations

from typing import Any

import pytest

from .builders import Sim, cohort, cq, flavor, lq, one

DEFAULT = {"default": {"cpu": "4"}}


def _one_queue(policy: str) -> Sim:
    return Sim(flavor("default"), cq("cq", quotas=DEFAULT, preemption={"withinClusterQueue": policy}),
               lq("ns", "q", "cq"))


@pytest.mark.parametrize(("policy", "victim_priority", "victim_created", "preempts"), [
    pytest.param("Never", 0, 0.0, False, id="never-preempts-nothing"),
    pytest.param("LowerPriority", 0, 0.0, True, id="lower-priority-victim"),
    pytest.param("LowerPriority", 10, 0.0, False, id="equal-priority-is-not-lower"),
    pytest.param("LowerOrNewerEqualPriority", 10, 50.0, True, id="newer-equal-priority-victim"),
    pytest.param("LowerOrNewerEqualPriority", 10, -50.0, False, id="older-equal-priority-is-kept"),
])
def test_within_cluster_queue_policies(policy: str, victim_priority: int, victim_created: float,
                                       preempts: bool) -> None:
    """withinClusterQueue picks which workloads of the same queue may be evicted."""
    sim = _one_queue(policy)
    sim.engine.submit(key="ns/victim", namespace="ns", queue="q", priority=victim_priority, created=victim_created,
                      pod_sets=one("4"))
    sim.engine.restore("ns/victim", cluster_queue="cq", flavors={"main": {"cpu": "default"}}, at=0.0)
    sim.engine.submit(key="ns/new", namespace="ns", queue="q", priority=10, created=0.0, pod_sets=one("4"))
    events = sim.schedule()
    assert (("Preempted", "ns/victim", "InClusterQueue") in events) is preempts
    assert sim.state("ns/new") == ("Admitted" if preempts else "Pending")


def test_minimal_victim_set_fills_back_unneeded_victims() -> None:
    """Victims are removed in order until the preemptor fits, then those not needed are put back."""
    sim = Sim(flavor("default"), cq("cq", quotas={"default": {"cpu": "6"}},
                                    preemption={"withinClusterQueue": "LowerPriority"}), lq("ns", "q", "cq"))
    sim.running("ns/small-old", "q", one("1"), cq="cq", at=1.0)
    sim.running("ns/small-new", "q", one("1"), cq="cq", at=5.0)
    sim.running("ns/big", "q", one("4"), cq="cq", at=3.0)
    sim.submit("ns/urgent", "q", one("4"), priority=10)
    events = sim.schedule()
    victims = sorted(e[1] for e in events if e[0] == "Preempted")
    assert victims == ["ns/big"]
    assert sim.state("ns/small-old") == "Admitted" and sim.state("ns/small-new") == "Admitted"


def test_candidates_ordered_most_recently_admitted_first() -> None:
    """Among equal-priority candidates the one that reserved quota last goes first."""
    sim = Sim(flavor("default"), cq("cq", quotas={"default": {"cpu": "2"}},
                                    preemption={"withinClusterQueue": "LowerPriority"}), lq("ns", "q", "cq"))
    sim.running("ns/old", "q", one("1"), cq="cq", at=1.0)
    sim.running("ns/new", "q", one("1"), cq="cq", at=9.0)
    sim.submit("ns/urgent", "q", one("1"), priority=5)
    events = sim.schedule()
    assert [e[1] for e in events if e[0] == "Preempted"] == ["ns/new"]


def _cohort_pair(preemption: dict[str, Any], *, lender_quota: str = "4") -> Sim:
    return Sim(flavor("default"),
               cq("a", cohort="co", quotas={"default": {"cpu": "4"}}, preemption=preemption),
               cq("b", cohort="co", quotas={"default": {"cpu": lender_quota}}),
               lq("ns-a", "q", "a"), lq("ns-b", "q", "b"))


@pytest.mark.parametrize(("preemption", "reason"), [
    pytest.param({"reclaimWithinCohort": "Any"}, "InCohortReclamation", id="reclaim-any"),
    pytest.param({"reclaimWithinCohort": "LowerPriority"}, "InCohortReclamation", id="reclaim-lower-priority"),
    pytest.param({"reclaimWithinCohort": "Never"}, None, id="reclaim-never-waits"),
])
def test_reclaim_within_cohort(preemption: dict[str, Any], reason: str | None) -> None:
    """A queue under its nominal quota takes back what a borrower holds, per reclaimWithinCohort."""
    sim = _cohort_pair(preemption)
    sim.running("ns-b/borrower", "q", one("6"), cq="b", priority=5)
    sim.submit("ns-a/owner", "q", one("4"), priority=10)
    events = sim.schedule()
    preempted = [(e[1], e[2]) for e in events if e[0] == "Preempted"]
    assert preempted == ([("ns-b/borrower", reason)] if reason else [])
    if reason is None:
        assert sim.why("ns-a/owner")[0] == "WaitingForQuota"


def test_borrowing_workloads_are_not_reclaimed_from_a_queue_within_nominal() -> None:
    """A queue within its nominal quota gives no reclaim candidates."""
    sim = _cohort_pair({"reclaimWithinCohort": "Any"}, lender_quota="6")
    sim.running("ns-b/owner", "q", one("6"), cq="b")
    sim.submit("ns-a/wants-more", "q", one("6"), priority=10)
    sim.schedule()
    assert sim.state("ns-b/owner") == "Admitted"
    assert sim.why("ns-a/wants-more")[0] == "WaitingForQuota"


@pytest.mark.parametrize(("threshold", "victim_priority", "expected"), [
    pytest.param(None, 0, "InCohortReclaimWhileBorrowing", id="lower-priority-victim-while-borrowing"),
    pytest.param(5, 0, "InCohortReclaimWhileBorrowing", id="victim-at-or-below-threshold"),
    pytest.param(5, 6, None, id="victim-above-threshold-is-protected"),
])
def test_borrow_within_cohort(threshold: int | None, victim_priority: int, expected: str | None) -> None:
    """borrowWithinCohort lets a borrowing preemptor evict lower-priority borrowers up to maxPriorityThreshold."""
    bwc: dict[str, Any] = {"policy": "LowerPriority"}
    if threshold is not None:
        bwc["maxPriorityThreshold"] = threshold
    sim = Sim(flavor("default"),
              cq("a", cohort="co", quotas={"default": {"cpu": "2"}},
                 preemption={"reclaimWithinCohort": "Any", "borrowWithinCohort": bwc}),
              cq("b", cohort="co", quotas={"default": {"cpu": "2"}}),
              cq("lender", cohort="co", quotas={"default": {"cpu": "4"}}),
              lq("ns-a", "q", "a"), lq("ns-b", "q", "b"))
    sim.running("ns-b/borrower", "q", one("6"), cq="b", priority=victim_priority)
    sim.submit("ns-a/needs-to-borrow", "q", one("4"), priority=10)
    events = sim.schedule()
    preempted = [e[2] for e in events if e[0] == "Preempted"]
    assert preempted == ([expected] if expected else [])


@pytest.mark.parametrize(("policy", "reclaims"), [
    pytest.param("Any", True, id="any-reclaims-across-subtrees"),
    pytest.param("LowerPriority", False, id="policy-still-protects-higher-priority"),
])
def test_hierarchical_reclaim_across_subtrees(policy: str, reclaims: bool) -> None:
    """A preemptor whose request fits its own quota reclaims what another subtree borrowed, within its policy."""
    sim = Sim(flavor("default"), cohort("root"), cohort("left", parent="root"), cohort("right", parent="root"),
              cq("a", cohort="left", quotas={"default": {"cpu": "4"}}, preemption={"reclaimWithinCohort": policy}),
              cq("b", cohort="right", quotas={"default": {"cpu": "0"}}),
              lq("ns-a", "q", "a"), lq("ns-b", "q", "b"))
    sim.running("ns-b/high-borrower", "q", one("4"), cq="b", priority=100)
    sim.submit("ns-a/owner", "q", one("4"), priority=0)
    events = sim.schedule()
    assert (("Preempted", "ns-b/high-borrower", "InCohortReclamation") in events) is reclaims
    assert sim.state("ns-a/owner") == ("Admitted" if reclaims else "Pending")


def test_preemption_message_names_paths() -> None:
    """The eviction message follows Kueue: preemptor UID, human reason, preemptor and preemptee paths."""
    sim = _cohort_pair({"reclaimWithinCohort": "Any"})
    sim.running("ns-b/borrower", "q", one("6"), cq="b")
    sim.submit("ns-a/owner", "q", one("4"))
    sim.engine.schedule(1.0)
    [event] = [e for e in sim.engine.take_events() if e.type == "Preempted"]
    assert event.message == ("Preempted to accommodate a workload (UID: ns-a/owner, JobUID: UNKNOWN) due to "
                             "reclamation within the cohort; preemptor path: /co/a; preemptee path: /co/b")
