"""Scheduling cycles within one instant: Kueue's ordering, settling, and the guards against ping-pong."""

from __future__ import annotations

import pytest

from .builders import Sim, cq, flavor, lq, one


def _borrowers(priority_a: int, priority_b: int, quota_b: str = "0") -> Sim:
    sim = Sim(flavor("default"),
              cq("a", cohort="co", quotas={"default": {"cpu": "0"}}),
              cq("b", cohort="co", quotas={"default": {"cpu": quota_b}}),
              cq("lender", cohort="co", quotas={"default": {"cpu": "4" if quota_b == "0" else "0"}}),
              lq("ns-a", "q", "a"), lq("ns-b", "q", "b"))
    sim.submit("ns-a/w", "q", one("4"), priority=priority_a, created=1.0)
    sim.submit("ns-b/w", "q", one("4"), priority=priority_b, created=2.0)
    return sim


@pytest.mark.parametrize(("priority_a", "priority_b", "quota_b", "winner"), [
    pytest.param(0, 0, "0", "ns-a/w", id="equal-borrowers-first-come-first-served"),
    pytest.param(0, 5, "0", "ns-b/w", id="higher-priority-borrower-first"),
    pytest.param(5, 0, "4", "ns-b/w", id="no-borrowing-beats-priority"),
])
def test_cycle_order_borrowing_level_then_priority_then_fifo(priority_a: int, priority_b: int, quota_b: str,
                                                              winner: str) -> None:
    """Heads of one cycle are processed by borrowing level, then priority, then creation time."""
    sim = _borrowers(priority_a, priority_b, quota_b)
    sim.schedule(10.0)
    admitted = [k for k in ("ns-a/w", "ns-b/w") if sim.state(k) == "Admitted"]
    assert admitted == [winner]
    loser = "ns-b/w" if winner == "ns-a/w" else "ns-a/w"
    assert sim.why(loser)[0] == "WaitingForQuota"


def test_deep_queue_drains_in_one_instant() -> None:
    """Many workloads of one queue are admitted at the same instant (no one-per-cycle ceiling in time)."""
    sim = Sim(flavor("default"), cq("cq", quotas={"default": {"cpu": "100"}}), lq("ns", "q", "cq"))
    for i in range(60):
        sim.submit(f"ns/w-{i}", "q", one("1"))
    sim.schedule(0.0)
    assert sum(sim.state(f"ns/w-{i}") == "Admitted" for i in range(60)) == 60


def test_reclaim_cycles_end_with_each_workload_preempted_at_most_once() -> None:
    """Policies that could preempt back and forth settle: a workload is preempted at most once per instant."""
    objects = [flavor("default")]
    for i in range(4):
        objects += [cq(f"cq{i}", cohort="co", quotas={"default": {"cpu": ("4", "8", None)}},
                       preemption={"reclaimWithinCohort": "Any", "withinClusterQueue": "LowerPriority"}),
                    lq("ns", f"q{i}", f"cq{i}")]
    sim = Sim(*objects)
    for i in range(4):
        sim.running(f"ns/run-{i}", f"q{i}", one("3", 2), cq=f"cq{i}" if i < 2 else "cq0", at=float(i))
    for j in range(16):
        sim.submit(f"ns/w-{j}", f"q{j % 4}", one(str(1 + j % 3)), priority=j % 4)
    before = sim.engine.state.cycle
    events = sim.schedule(5.0)
    preempted = [e[1] for e in events if e[0] == "Preempted"]
    assert len(preempted) == len(set(preempted))
    cycles = sim.engine.state.cycle - before  # the engine's own count of the cycles it ran
    assert 0 < cycles < 200


def test_an_instant_settled_until_enough_admissions_stops_after_that_cycle() -> None:
    """``enough``: the cycles stop once that many reserved quota (the live loop writes no more than that many a
    pass); here, where no later cycle reclaims anything, those are the first of a full settle, in its order."""
    def sim() -> Sim:
        s = Sim(flavor("default"), *(cq(f"cq{i}", quotas={"default": {"cpu": "6"}}, cohort="all") for i in range(4)),
                *(lq("ns", f"q{i}", f"cq{i}") for i in range(4)))
        for j in range(40):
            s.submit(f"ns/w-{j:02d}", f"q{j % 4}", one(str(1 + j % 3)), priority=j % 5)
        return s

    full, early = sim(), sim()
    full.engine.schedule(5.0)
    early.engine.schedule(5.0, enough=6)
    reserved = [e.workload for e in full.engine.take_events() if e.type == "QuotaReserved"]
    first = [e.workload for e in early.engine.take_events() if e.type == "QuotaReserved"]
    assert 6 <= len(first) < len(reserved)
    assert first == reserved[:len(first)]
    assert early.engine.state.cycle < full.engine.state.cycle
    assert early.engine.state.unsettled == []
