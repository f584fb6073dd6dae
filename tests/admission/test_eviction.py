"""Preemption victims keep their quota until their cohort tree is quiet (Kueue's asynchronous eviction)."""

from __future__ import annotations

import pytest

from gitopsq.admission import cycle
from gitopsq.admission import messages as msg

from .builders import Sim, cq, flavor, lq, one


def _one_queue() -> Sim:
    return Sim(flavor("default"), cq("cq", quotas={"default": {"cpu": "4"}},
                                     preemption={"withinClusterQueue": "LowerPriority"}), lq("ns", "q", "cq"))


def _cycle(sim: Sim, now: float = 5.0) -> tuple[bool, list[tuple[str, str]]]:
    """One scheduling cycle over the current heads: (whether it changed anything, events as (type, workload))."""
    heads, _ = cycle._heads(sim.engine.state)
    changed = cycle.run_cycle(sim.engine.state, heads, now)
    return bool(changed), [(e.type, e.workload) for e in sim.engine.take_events()]


def test_victim_holds_its_quota_in_the_cycles_after_its_preemption() -> None:
    """The cycle that preempts only marks the victim; the next ones see its quota in use and issue nothing new."""
    sim = _one_queue()
    sim.running("ns/victim", "q", one("4"), cq="cq", at=1.0)
    sim.submit("ns/urgent", "q", one("4"), priority=10)
    progress, events = _cycle(sim)
    assert progress and events == [("Preempted", "ns/victim")]
    assert sim.engine.usage("cq") == {("default", "cpu"): 4000}
    assert sim.state("ns/victim") == "Admitted"
    for _ in range(2):
        progress, events = _cycle(sim)
        assert (progress, events) == (False, [])
        assert sim.why("ns/urgent")[0] == "WaitingForPreemptedWorkloads"
        assert sim.engine.usage("cq") == {("default", "cpu"): 4000}


def test_settling_releases_the_victim_once_nothing_else_moves() -> None:
    """After the quiet cycle the victim releases its quota and is requeued; the preemptor is then admitted."""
    sim = _one_queue()
    sim.running("ns/victim", "q", one("4"), cq="cq", at=1.0)
    sim.submit("ns/urgent", "q", one("4"), priority=10)
    events = sim.schedule(5.0)
    assert events[:3] == [("Preempted", "ns/victim", "InClusterQueue"), ("Requeued", "ns/victim", "Preempted"),
                          ("QuotaReserved", "ns/urgent", "QuotaReserved")]
    assert sim.state("ns/urgent") == "Admitted" and sim.state("ns/victim") == "Pending"
    assert sim.engine.state.evicting == []


@pytest.mark.parametrize(("cohort", "expected"), [
    pytest.param("pool", [("QuotaReserved", "ns/small-0"), ("Preempted", "ns/victim"),
                          ("QuotaReserved", "ns/small-1"), ("QuotaReserved", "ns/small-2"),
                          ("QuotaReserved", "ns/small-3"), ("Requeued", "ns/victim"), ("QuotaReserved", "ns/urgent")],
                 id="a-busy-queue-of-the-same-cohort-holds-the-victim-until-it-has-admitted-all"),
    pytest.param(None, [("QuotaReserved", "ns/small-0"), ("Preempted", "ns/victim"),
                        ("QuotaReserved", "ns/small-1"), ("Requeued", "ns/victim"), ("QuotaReserved", "ns/urgent"),
                        ("QuotaReserved", "ns/small-2"), ("QuotaReserved", "ns/small-3")],
                 id="a-busy-queue-of-another-tree-does-not-hold-it"),
])
def test_release_waits_for_the_victims_cohort_tree_to_settle(cohort: str | None,
                                                               expected: list[tuple[str, str]]) -> None:
    """Another queue admitting one workload per cycle keeps the victim's quota held while it is in the victim's
    cohort tree; in another tree it does not, and the victim is released after the first cycle its tree is quiet."""
    big = {"default": {"cpu": ("10", "0", None)}}
    sim = Sim(flavor("default"),
              cq("cq", cohort=cohort, quotas={"default": {"cpu": ("4", "0", None)}},
                 preemption={"withinClusterQueue": "LowerPriority"}),
              cq("busy", cohort=cohort, quotas=big), lq("ns", "q", "cq"), lq("ns", "busy", "busy"))
    sim.running("ns/victim", "q", one("4"), cq="cq", at=1.0)
    sim.submit("ns/urgent", "q", one("4"), priority=10)
    for i in range(4):
        sim.submit(f"ns/small-{i}", "busy", one("1"))
    order = [(t, w) for t, w, _ in sim.schedule(5.0) if t in ("Preempted", "Requeued", "QuotaReserved")]
    assert order == expected


def test_cohort_heads_of_later_cycles_see_the_victims_borrowed_quota_in_use() -> None:
    """Random 150006 in small: two cycles after a borrowing victim's preemption, another queue's head still finds
    the victim's flavor full and takes its second flavor, as Kueue's cache still counts the victim."""
    quotas_a = {"flavor-a": {"cpu": "4"}, "flavor-b": {"cpu": ("0", "0", None)}}
    quotas_b = {"flavor-a": {"cpu": "2"}, "flavor-b": {"cpu": ("6", "4", None)}}
    sim = Sim(flavor("flavor-a"), flavor("flavor-b"),
              cq("cq-a", cohort="pool", quotas=quotas_a, preemption={"withinClusterQueue": "LowerPriority"}),
              cq("cq-b", cohort="pool", quotas=quotas_b, fungibility={"whenCanBorrow": "MayStopSearch"}),
              lq("team-a", "lq-a", "cq-a"), lq("team-b", "lq-b", "cq-b"))
    sim.running("team-a/victim", "lq-a", one("3", count=2), cq="cq-a", flavor="flavor-a", at=1.0)
    sim.submit("team-a/preemptor", "lq-a", one("2", count=2), priority=3)
    for i, priority in enumerate((36, 33, 5)):
        sim.submit(f"team-b/job-{i}", "lq-b", one("1"), priority=priority)
    sim.schedule(5.0)
    assert [sim.flavors(f"team-b/job-{i}") for i in range(3)] == [{"main": {"cpu": "flavor-b"}}] * 3
    assert sim.flavors("team-a/preemptor") == {"main": {"cpu": "flavor-a"}}
    assert sim.state("team-a/victim") == "Pending"


@pytest.mark.parametrize(("evicting", "expected"), [
    pytest.param(None, "ns/newer", id="most-recently-reserved-first-otherwise"),
    pytest.param("ns/older", "ns/older", id="a-victim-still-being-evicted-comes-first"),
])
def test_candidates_still_being_evicted_come_first(evicting: str | None, expected: str) -> None:
    """Kueue's CandidatesOrdering puts workloads already marked Evicted before every other candidate."""
    sim = _one_queue()
    sim.running("ns/older", "q", one("2"), cq="cq", at=1.0)
    sim.running("ns/newer", "q", one("2"), cq="cq", at=9.0)
    sim.submit("ns/urgent", "q", one("2"), priority=10)
    state = sim.engine.state
    if evicting is not None:
        state.workloads[evicting].evicting = True
    entry = cycle.nominate(state, state.workloads["ns/urgent"], sim.engine.topology.queues["cq"])
    assert [t.workload.key for t in entry.targets] == [expected]


@pytest.mark.parametrize(("flavors_left", "busy"), [
    pytest.param(True, True, id="flavors-left-its-tree-stays-busy"),
    pytest.param(False, False, id="scan-at-its-last-flavor-the-cycle-is-quiet"),
])
def test_head_skipped_for_overlapping_targets_keeps_its_tree_busy(flavors_left: bool, busy: bool) -> None:
    """Random 202612070032 in small. Kueue's ``markSkipped`` requeues a head whose preemption targets another
    entry of the cycle already took, keeping its scan progress; popped again in the next cycle, it resumes at its
    next flavor. That cycle is not quiet: the victim still holds its quota, so the head, resuming on flavor-b,
    reclaims what team-a borrows there instead of waiting for flavor-a."""
    cq_c_quotas = {"flavor-a": {"cpu": ("4", None, "1")}, "flavor-b": {"cpu": ("2", None, "1")}}
    if not flavors_left:
        del cq_c_quotas["flavor-b"]
    sim = Sim(flavor("flavor-a"), flavor("flavor-b"),
              cq("cq-a", cohort="pool", quotas={"flavor-a": {"cpu": "1"}, "flavor-b": {"cpu": "3"}},
                 preemption={"withinClusterQueue": "Never", "reclaimWithinCohort": "Any"},
                 fungibility={"whenCanBorrow": "TryNextFlavor", "whenCanPreempt": "TryNextFlavor"}),
              cq("cq-b", cohort="pool", quotas={"flavor-a": {"cpu": "1"}, "flavor-b": {"cpu": "2"}}),
              cq("cq-c", cohort="pool", quotas=cq_c_quotas,
                 preemption={"reclaimWithinCohort": "Any",
                             "borrowWithinCohort": {"policy": "LowerPriority", "maxPriorityThreshold": 15}},
                 fungibility={"whenCanBorrow": "MayStopSearch", "whenCanPreempt": "MayStopSearch"}),
              lq("team-a", "lq-a", "cq-a"), lq("team-b", "lq-b", "cq-b"), lq("team-c", "lq-c", "cq-c"))
    sim.running("team-a/borrower", "lq-a", one("3", count=2), cq="cq-a", flavor="flavor-b", at=1.0)
    sim.running("team-b/victim", "lq-b", one("3"), cq="cq-b", flavor="flavor-a", at=2.0)
    sim.running("team-c/running", "lq-c", one("1", count=2), cq="cq-c", flavor="flavor-a", at=3.0)
    sim.submit("team-a/reclaimer", "lq-a", one("1"), priority=16)
    sim.submit("team-c/first", "lq-c", one("1"), priority=22)
    sim.submit("team-c/second", "lq-c", one("2"), priority=21)
    # Cycle 1: team-c/first fits on flavor-a; team-a/reclaimer reclaims flavor-a from the victim.
    assert _cycle(sim) == (True, [("QuotaReserved", "team-c/first"), ("Admitted", "team-c/first"),
                                  ("Preempted", "team-b/victim")])
    # Cycle 2: team-c/second stops its scan at flavor-a, where its only target is the reclaimer's victim.
    changed, events = _cycle(sim)
    assert events == []
    assert sim.why("team-c/second") == ("WaitingForQuota", msg.OVERLAPPING_TARGETS)
    assert changed is busy
    assert sim.engine.usage("cq-b") == {("flavor-a", "cpu"): 3000}
    if flavors_left:
        # Cycle 3: the victim still holds flavor-a; team-c/second resumes at flavor-b and reclaims it there.
        assert _cycle(sim) == (True, [("Preempted", "team-a/borrower")])
    rest = sim.schedule(5.0)
    assert sim.flavors("team-c/second") == {"main": {"cpu": "flavor-a"}}  # once the victims are gone
    if not flavors_left:
        assert ("Preempted", "team-a/borrower", "InCohortReclamation") not in rest
