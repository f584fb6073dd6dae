"""Fair sharing: dominant resource share, admission tournament, fair preemption strategies (kueue.md §1.5)."""

from __future__ import annotations

import math

import pytest

from gitopsq.admission import dominant_share, quota

from .builders import Sim, cohort, cq, flavor, lq, one


def _pool(weight_a: str = "1", weight_b: str = "1", *, preemption: dict[str, str] | None = None,
          strategies: tuple[str, ...] | None = None, look_ahead: bool = False) -> Sim:
    pre = preemption or {}
    return Sim(flavor("default"),
               cq("lender", cohort="pool", quotas={"default": {"cpu": "6"}}),
               cq("a", cohort="pool", quotas={"default": {"cpu": "0"}}, weight=weight_a, preemption=pre),
               cq("b", cohort="pool", quotas={"default": {"cpu": "0"}}, weight=weight_b, preemption=pre),
               lq("ns-a", "q", "a"), lq("ns-b", "q", "b"), fair=True, strategies=strategies,
               fair_sharing_look_ahead=look_ahead)


@pytest.mark.parametrize(("borrowed", "weight", "expected"), [
    pytest.param(0, "1", 0.0, id="not-borrowing-is-zero"),
    pytest.param(3000, "1", 500.0, id="half-of-lendable"),
    pytest.param(3000, "2", 250.0, id="weight-divides-the-share"),
    pytest.param(3000, "0", math.inf, id="weight-zero-while-borrowing-is-infinite"),
])
def test_dominant_resource_share(borrowed: int, weight: str, expected: float) -> None:
    """DRS = borrowed × 1000 / what the parent could lend, divided by the weight."""
    sim = _pool(weight_a=weight)
    tree = sim.engine.state.tree
    quota.add_usage(tree.queues["a"], ("default", "cpu"), borrowed)
    assert dominant_share.drs(tree.queues["a"], sim.engine.topology).weighted == expected


@pytest.mark.parametrize(("weight_a", "look_ahead", "admitted_a"), [
    pytest.param("1", True, 3, id="look-ahead-equal-weights-split-evenly"),
    pytest.param("2", True, 4, id="look-ahead-double-weight-gets-two-thirds"),
    pytest.param("1", False, 3, id="kueue-equal-weights-split-evenly"),
    pytest.param("2", False, 3, id="kueue-one-head-per-queue-per-cycle-splits-evenly"),
])
def test_tournament_splits_borrowed_capacity_by_weight(weight_a: str, look_ahead: bool, admitted_a: int) -> None:
    """With six free cpus and six 1-cpu jobs per queue, admissions follow the weighted shares with look-ahead;
    as in Kueue (one head per queue per cycle, both heads fit every cycle) the queues alternate."""
    sim = _pool(weight_a, look_ahead=look_ahead)
    for i in range(6):
        sim.submit(f"ns-a/a-{i}", "q", one("1"))
        sim.submit(f"ns-b/b-{i}", "q", one("1"))
    sim.schedule(0.0)
    admitted = sum(sim.state(f"ns-a/a-{i}") == "Admitted" for i in range(6))
    assert admitted == admitted_a
    assert admitted + sum(sim.state(f"ns-b/b-{i}") == "Admitted" for i in range(6)) == 6


def test_fair_preemption_takes_from_the_queue_over_its_share() -> None:
    """A queue below its fair share preempts from the one above it (InCohortFairSharing)."""
    sim = _pool(preemption={"reclaimWithinCohort": "Any"})
    for i in range(6):
        sim.running(f"ns-b/b-{i}", "q", one("1"), cq="b", at=float(i))
    sim.submit("ns-a/a-0", "q", one("1"))
    sim.submit("ns-a/a-1", "q", one("1"))
    events = sim.schedule(10.0)
    reasons = {e[2] for e in events if e[0] == "Preempted"}
    assert reasons == {"InCohortFairSharing"}
    assert sim.state("ns-a/a-0") == "Admitted" and sim.state("ns-a/a-1") == "Admitted"


def test_fair_preemption_stops_at_equal_shares() -> None:
    """Preemption stops once shares are balanced: a queue never preempts to get above the other."""
    sim = _pool(preemption={"reclaimWithinCohort": "Any"})
    for i in range(3):
        sim.running(f"ns-b/b-{i}", "q", one("1"), cq="b", at=float(i))
        sim.running(f"ns-a/a-{i}", "q", one("1"), cq="a", at=float(i))
    sim.submit("ns-a/a-extra", "q", one("1"))
    events = sim.schedule(10.0)
    assert [e for e in events if e[0] == "Preempted"] == []
    assert sim.why("ns-a/a-extra")[0] == "WaitingForQuota"


def test_within_nominal_preemptor_reclaims_unconditionally() -> None:
    """A preemptor that stays within its nominal quota reclaims without consulting shares."""
    sim = Sim(flavor("default"),
              cq("owner", cohort="pool", quotas={"default": {"cpu": "4"}}, preemption={"reclaimWithinCohort": "Any"}),
              cq("borrower", cohort="pool", quotas={"default": {"cpu": "0"}}, weight="0"),
              lq("ns-a", "q", "owner"), lq("ns-b", "q", "borrower"), fair=True)
    sim.running("ns-b/w", "q", one("4"), cq="borrower")
    sim.submit("ns-a/w", "q", one("4"))
    events = sim.schedule(1.0)
    assert ("Preempted", "ns-b/w", "InCohortReclamation") in events


def test_within_nominal_counts_only_the_contested_resources() -> None:
    """Borrowing an uncontested resource does not forfeit the nominal claim on the contested one (reclaim wins)."""
    sim = Sim(flavor("default"),
              cq("lender", cohort="pool", quotas={"default": {"cpu": "8", "memory": "0"}}),
              cq("owner", cohort="pool", quotas={"default": {"cpu": "0", "memory": "4Gi"}},
                 preemption={"reclaimWithinCohort": "Any"}),
              cq("borrower", cohort="pool", quotas={"default": {"cpu": "0", "memory": "0"}}),
              lq("ns-a", "q", "owner"), lq("ns-b", "q", "borrower"), fair=True,
              strategies=("LessThanOrEqualToFinalShare",))
    sim.running("ns-b/w", "q", one("1", memory="4Gi"), cq="borrower")
    sim.submit("ns-a/w", "q", one("4", memory="4Gi"))
    events = sim.schedule(1.0)
    assert ("Preempted", "ns-b/w", "InCohortReclamation") in events


def test_fair_preemption_compares_the_shares_just_below_the_common_ancestor() -> None:
    """Queues in different cohorts compete as their cohorts: a small queue of a borrowing cohort cannot preempt."""
    zero = {"default": {"cpu": "0"}}
    sim = Sim(flavor("default"), cohort("org"), cohort("left", parent="org"), cohort("right", parent="org"),
              cq("lender", cohort="org", quotas={"default": {"cpu": "10"}}),
              cq("a", cohort="left", quotas=zero, preemption={"reclaimWithinCohort": "LowerPriority"}),
              cq("a2", cohort="left", quotas=zero), cq("b", cohort="right", quotas=zero),
              lq("ns-a", "q", "a"), lq("ns-a2", "q", "a2"), lq("ns-b", "q", "b"), fair=True,
              strategies=("LessThanOrEqualToFinalShare",))
    sim.running("ns-a2/w", "q", one("3"), cq="a2", priority=10)
    for i in range(6):
        sim.running(f"ns-b/b-{i}", "q", one("1"), cq="b", at=float(i))
    sim.submit("ns-a/w", "q", one("3"), priority=5)
    events = sim.schedule(20.0)
    assert [e for e in events if e[0] == "Preempted"] == []
    assert sim.state("ns-a/w") != "Admitted"


def test_lendable_capacity_counts_flavors_the_queue_lacks() -> None:
    """The share divides by what the cohort could lend of the resource in every flavor of the tree, including
    flavors the queue has no quota for (Kueue's calculateLendable): 3 borrowed of 12 lendable is 250."""
    sim = Sim(flavor("x"), flavor("y"),
              cq("lender", cohort="pool", quotas={"x": {"cpu": "6"}, "y": {"cpu": "6"}}),
              cq("a", cohort="pool", quotas={"x": {"cpu": "0"}}),
              lq("ns-a", "q", "a"), fair=True)
    tree = sim.engine.state.tree
    quota.add_usage(tree.queues["a"], ("x", "cpu"), 3000)
    assert dominant_share.drs(tree.queues["a"], sim.engine.topology).weighted == 250.0


@pytest.mark.parametrize("strategies", [
    pytest.param(("LessThanOrEqualToFinalShare",), id="first-strategy-only"),
    pytest.param(("LessThanOrEqualToFinalShare", "LessThanInitialShare"), id="with-second-strategy"),
])
def test_rejected_candidate_does_not_end_the_target_queues_turn(strategies: tuple[str, ...]) -> None:
    """A candidate whose removal would leave the target below the preemptor is skipped and the target queue's next
    candidate is tried (Kueue's runFirstFsStrategy), so the small workload goes rather than the big one."""
    sim = _pool(preemption={"reclaimWithinCohort": "Any"}, strategies=strategies)
    sim.running("ns-b/big", "q", one("4"), cq="b", priority=0, at=0.0)
    sim.running("ns-b/small", "q", one("1"), cq="b", priority=5, at=1.0)
    sim.submit("ns-a/w", "q", one("2"), priority=10)
    events = sim.schedule(10.0)
    assert [e[:3] for e in events if e[0] == "Preempted"] == [("Preempted", "ns-b/small", "InCohortFairSharing")]
    assert sim.state("ns-b/big") == "Admitted" and sim.state("ns-a/w") == "Admitted"
