"""How fair sharing compares dominant resource shares: Kueue's CompareDRS, weight 0 included (kueue.md §1.5)."""

from __future__ import annotations

import math

import pytest

from gitopsq.admission import quota
from gitopsq.admission.dominant_share import NEGATIVE_RANK, DominantShare, drs

from .builders import Sim, cohort, cq, flavor, lq, one


def _sign(a: DominantShare, b: DominantShare) -> int:
    return (a.rank > b.rank) - (a.rank < b.rank)


@pytest.mark.parametrize(("a", "b", "expected"), [
    pytest.param(DominantShare(500.0, 0), DominantShare(250.0, 0), 1,
                 id="weight-zero-borrowers-compare-unweighted-ratios"),
    pytest.param(DominantShare(250.0, 0), DominantShare(250.0, 0), 0, id="equal-weight-zero-ratios-tie"),
    pytest.param(DominantShare(1.0, 0), DominantShare(1e9, 1), 1, id="weight-zero-borrower-above-any-weighted-share"),
    pytest.param(DominantShare(0.0, 0), DominantShare(0.0, 1000), 0, id="weight-zero-not-borrowing-is-zero"),
    pytest.param(DominantShare(0.0, 0), DominantShare(1.0, 1000), -1, id="weight-zero-not-borrowing-below-a-borrower"),
    pytest.param(DominantShare(500.0, 2000), DominantShare(250.0, 1000), 0, id="weights-divide-the-ratio"),
    # 0.5 of 15 cpus at weight 0.1 and 5 of 15 at weight 1: Kueue divides the ratio by the weight as a float,
    # which gives exactly the second share; ratio × 1000 / milli-weight would round one ulp higher.
    pytest.param(DominantShare(500 * 1000 / 15000, 100), DominantShare(5000 * 1000 / 15000, 1000), 0,
                 id="ratio-divided-by-the-float-weight"),
])
def test_rank_orders_shares_as_kueue_compare_drs(a: DominantShare, b: DominantShare, expected: int) -> None:
    """``rank`` orders two shares as Kueue's CompareDRS: weight-0 borrowers above the rest, by unweighted ratio."""
    assert _sign(a, b) == expected
    assert _sign(b, a) == -expected


@pytest.mark.parametrize(("share", "weighted"), [
    pytest.param(DominantShare(0.0, 0), 0.0, id="not-borrowing-at-weight-zero-is-zero"),
    pytest.param(DominantShare(250.0, 0), math.inf, id="borrowing-at-weight-zero-is-infinite"),
    pytest.param(DominantShare(250.0, 500), 500.0, id="ratio-over-weight"),
])
def test_weighted_share_is_kueues_precise_weighted_share(share: DominantShare, weighted: float) -> None:
    """``weighted`` is Kueue's PreciseWeightedShare: 0 when not borrowing, infinite at weight 0, else ratio/weight."""
    assert share.weighted == weighted


def test_negative_rank_is_below_every_share() -> None:
    """The starting point of a highest-share search ranks below a node that borrows nothing (Kueue's NegativeDRS)."""
    assert DominantShare(0.0, 0).rank > NEGATIVE_RANK
    assert DominantShare(0.0, 1000).rank > NEGATIVE_RANK


def test_share_keeps_the_unweighted_ratio_at_weight_zero() -> None:
    """A weight-0 node's share still records what it borrows, so two such nodes can be told apart."""
    sim = Sim(flavor("default"),
              cq("lender", cohort="pool", quotas={"default": {"cpu": "8"}}),
              cq("a", cohort="pool", quotas={"default": {"cpu": "0"}}, weight="0"),
              lq("ns-a", "q", "a"), fair=True)
    node = sim.engine.state.tree.queues["a"]
    quota.add_usage(node, ("default", "cpu"), 2000)
    assert drs(node, sim.engine.topology) == DominantShare(250.0, 0)


def _zero_weight_pool(*, nested: bool) -> Sim:
    """A lender with 8 cpus and two weight-0 borrowers with no quota: the queues themselves, or (``nested``) the
    cohorts that hold them."""
    zero = {"default": {"cpu": "0"}}
    lender = cq("lender", cohort="org" if nested else "pool", quotas={"default": {"cpu": "8"}})
    if nested:
        objects = (cohort("org"), cohort("left", parent="org", weight="0"), cohort("right", parent="org", weight="0"),
                   cq("a", cohort="left", quotas=zero), cq("b", cohort="right", quotas=zero))
    else:
        objects = (cq("a", cohort="pool", quotas=zero, weight="0"), cq("b", cohort="pool", quotas=zero, weight="0"))
    return Sim(flavor("default"), lender, *objects, lq("ns-l", "q", "lender"), lq("ns-a", "q", "a"),
               lq("ns-b", "q", "b"), fair=True)


@pytest.mark.parametrize("nested", [
    pytest.param(False, id="weight-zero-queues"),
    pytest.param(True, id="weight-zero-cohorts"),
])
def test_tournament_prefers_the_lower_unweighted_share_at_weight_zero(nested: bool) -> None:
    """Of two weight-0 borrowers, the one that would borrow less (2 of 8 against 5 of 8) gets the last free cpu,
    although the other's head has the higher priority (Kueue's tournament through CompareDRS)."""
    sim = _zero_weight_pool(nested=nested)
    sim.running("ns-l/run", "q", one("1", 2), cq="lender")
    sim.running("ns-a/run", "q", one("1", 4), cq="a")
    sim.running("ns-b/run", "q", one("1", 1), cq="b")
    sim.submit("ns-a/next", "q", one("1"), priority=10)
    sim.submit("ns-b/next", "q", one("1"))
    sim.schedule(1.0)
    assert sim.state("ns-b/next") == "Admitted"
    assert sim.state("ns-a/next") == "Pending"


def test_fair_preemption_targets_the_higher_unweighted_share_at_weight_zero() -> None:
    """Reclaiming from two weight-0 borrowers takes from the one borrowing more (3 of 4), not from the one whose
    next candidate would come first (Kueue's target ordering through CompareDRS)."""
    zero = {"default": {"cpu": "0"}}
    sim = Sim(flavor("default"),
              cq("owner", cohort="pool", quotas={"default": {"cpu": "4"}}, preemption={"reclaimWithinCohort": "Any"}),
              cq("a", cohort="pool", quotas=zero, weight="0"), cq("b", cohort="pool", quotas=zero, weight="0"),
              lq("ns-o", "q", "owner"), lq("ns-a", "q", "a"), lq("ns-b", "q", "b"), fair=True)
    sim.running("ns-a/run", "q", one("1", 3), cq="a", priority=10, at=-60.0)
    sim.running("ns-b/run", "q", one("1"), cq="b", at=-30.0)
    sim.submit("ns-o/claim", "q", one("1"))
    events = sim.schedule(1.0)
    assert [e for e in events if e[0] == "Preempted"] == [("Preempted", "ns-a/run", "InCohortReclamation")]


@pytest.mark.parametrize(("cpus", "preempted"), [
    pytest.param("2", ["ns-a/a-3", "ns-a/a-2"], id="preemptor-ends-at-or-below-the-target-preempts"),
    pytest.param("3", [], id="preemptor-would-end-above-the-target-preempts-nothing"),
])
def test_strategies_compare_unweighted_shares_when_both_weights_are_zero(cpus: str, preempted: list[str]) -> None:
    """A weight-0 preemptor against a weight-0 target passes a strategy only on unweighted ratios: asking for 2 of
    4 lendable cpus it takes two 1-cpu workloads (500 ≤ 500); asking for 3 (750) it may take one but no second
    (the target would drop to 500) and nothing passes LessThanInitialShare, so nothing is preempted."""
    zero = {"default": {"cpu": "0"}}
    sim = Sim(flavor("default"),
              cq("lender", cohort="pool", quotas={"default": {"cpu": "4"}}),
              cq("a", cohort="pool", quotas=zero, weight="0"),
              cq("p", cohort="pool", quotas=zero, weight="0", preemption={"reclaimWithinCohort": "Any"}),
              lq("ns-a", "q", "a"), lq("ns-p", "q", "p"), fair=True,
              strategies=("LessThanOrEqualToFinalShare", "LessThanInitialShare"))
    for i in range(4):
        sim.running(f"ns-a/a-{i}", "q", one("1"), cq="a", at=float(i))
    sim.submit("ns-p/big", "q", one("1", int(cpus)), priority=10)
    events = sim.schedule(10.0)
    assert [e[1] for e in events if e[0] == "Preempted"] == preempted
