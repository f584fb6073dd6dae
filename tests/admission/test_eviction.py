"""Preemption victims keep their quota through the cycle after their preemption (Kueue's asynchronous eviction)."""

from __future__ import annotations

import pytest

from gitopsq.admission import cycle

from .builders import Sim, cq, flavor, lq, one


def _one_queue() -> Sim:
    return Sim(flavor("default"), cq("cq", quotas={"default": {"cpu": "4"}},
                                     preemption={"withinClusterQueue": "LowerPriority"}), lq("ns", "q", "cq"))


def _cycle(sim: Sim, now: float = 5.0) -> tuple[bool, list[tuple[str, str]]]:
    """One scheduling cycle over the current heads: (progress, events as (type, workload))."""
    heads, _ = cycle._heads(sim.engine.state)
    progress = cycle.run_cycle(sim.engine.state, heads, now)
    return progress, [(e.type, e.workload) for e in sim.engine.take_events()]


def test_victim_holds_its_quota_in_the_cycle_after_its_preemption() -> None:
    """The cycle that preempts only marks the victim; the next one sees its quota in use and issues nothing new."""
    sim = _one_queue()
    sim.running("ns/victim", "q", one("4"), cq="cq", at=1.0)
    sim.submit("ns/urgent", "q", one("4"), priority=10)
    progress, events = _cycle(sim)
    assert progress and events == [("Preempted", "ns/victim")]
    assert sim.engine.usage("cq") == {("default", "cpu"): 4000}
    assert sim.state("ns/victim") == "Admitted"
    progress, events = _cycle(sim)
    assert (progress, events) == (False, [])
    assert sim.why("ns/urgent")[0] == "WaitingForPreemptedWorkloads"


def test_settling_releases_the_victim_after_one_more_cycle() -> None:
    """After the next cycle the victim releases its quota and is requeued; the preemptor is then admitted."""
    sim = _one_queue()
    sim.running("ns/victim", "q", one("4"), cq="cq", at=1.0)
    sim.submit("ns/urgent", "q", one("4"), priority=10)
    events = sim.schedule(5.0)
    assert events[:3] == [("Preempted", "ns/victim", "InClusterQueue"), ("Requeued", "ns/victim", "Preempted"),
                          ("QuotaReserved", "ns/urgent", "QuotaReserved")]
    assert sim.state("ns/urgent") == "Admitted" and sim.state("ns/victim") == "Pending"
    assert sim.engine.state.evicting == []


def test_release_does_not_wait_for_other_queues_to_settle() -> None:
    """Another queue admitting one workload per cycle does not keep the victim's quota held beyond one cycle."""
    sim = Sim(flavor("default"),
              cq("cq", quotas={"default": {"cpu": "4"}}, preemption={"withinClusterQueue": "LowerPriority"}),
              cq("busy", quotas={"default": {"cpu": "10"}}), lq("ns", "q", "cq"), lq("ns", "busy", "busy"))
    sim.running("ns/victim", "q", one("4"), cq="cq", at=1.0)
    sim.submit("ns/urgent", "q", one("4"), priority=10)
    for i in range(4):
        sim.submit(f"ns/small-{i}", "busy", one("1"))
    order = [(t, w) for t, w, _ in sim.schedule(5.0) if t in ("Preempted", "Requeued", "QuotaReserved")]
    assert order == [("QuotaReserved", "ns/small-0"), ("Preempted", "ns/victim"), ("QuotaReserved", "ns/small-1"),
                     ("Requeued", "ns/victim"), ("QuotaReserved", "ns/urgent"), ("QuotaReserved", "ns/small-2"),
                     ("QuotaReserved", "ns/small-3")]


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
