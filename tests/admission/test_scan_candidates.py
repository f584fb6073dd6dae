"""The flavor scan's preemption check versus gitopsq's once-per-instant preemption rule (random 170098)."""

from __future__ import annotations

import pytest

from gitopsq.admission import cycle
from gitopsq.admission.preemption import Preemptor
from gitopsq.admission.quota import FlavorResource

from .builders import Sim, cq, flavor, lq, one, pod_sets

FUNGIBLE = {"whenCanBorrow": "MayStopSearch", "whenCanPreempt": "MayStopSearch"}


def _random_170098() -> Sim:
    """job-3 preempts running-0 off flavor-b; running-0 comes back on flavor-a at the same instant."""
    sim = Sim(flavor("flavor-a"), flavor("flavor-b"),
              cq("cq-a", quotas={"flavor-a": {"cpu": "3"}, "flavor-b": {"cpu": "4"}}, fungibility=FUNGIBLE,
                 preemption={"withinClusterQueue": "LowerOrNewerEqualPriority"}),
              lq("team-a", "lq-a", "cq-a"))
    sim.running("team-a/running-0", "lq-a", one("1"), cq="cq-a", flavor="flavor-b", priority=10, at=-90.0)
    sim.submit("team-a/job-0", "lq-a", pod_sets(("main", 1, {"cpu": "1"}), ("worker", 2, {"cpu": "2"})),
               priority=16)
    sim.submit("team-a/job-1", "lq-a", one("3", 2), priority=12)
    sim.submit("team-a/job-2", "lq-a", one("1"), priority=28)
    sim.submit("team-a/job-3", "lq-a", one("2", 2), priority=22)
    sim.submit("team-a/job-4", "lq-a", one("1"), priority=26)
    return sim


def test_a_workload_preempted_at_this_instant_still_stops_the_flavor_scan() -> None:
    """A victim back on flavor-a is a preemption candidate for the scan, which stops there (MayStopSearch) and
    resumes at flavor-b, where the other pod set exceeds every flavor's maximum capacity: ExceedsMaxQuota."""
    sim = _random_170098()
    events = sim.schedule(0.0)
    assert sim.flavors("team-a/running-0") == {"main": {"cpu": "flavor-a"}}
    reason, message = sim.why("team-a/job-0")
    assert reason == "ExceedsMaxQuota"
    assert message.startswith("couldn't assign flavors to pod set main: insufficient unused quota for cpu in "
                              "flavor flavor-b, 1 more needed; ")
    assert [e for e in events if e[0] == "Preempted"] == [("Preempted", "team-a/running-0", "InClusterQueue")]


@pytest.mark.parametrize(("protect", "victims"), [
    pytest.param(True, [], id="victim-search-leaves-out-the-preempted-workload"),
    pytest.param(False, ["team-a/running-0"], id="scan-check-counts-the-preempted-workload"),
])
def test_only_the_victim_search_protects_a_workload_preempted_at_this_instant(protect: bool,
                                                                               victims: list[str]) -> None:
    """After the instant, running-0 (preempted in it) is found as a victim only by the unprotected search."""
    sim = _random_170098()
    sim.schedule(0.0)
    state = sim.engine.state
    assert "team-a/running-0" in state.preempted_now
    job0 = state.workloads["team-a/job-0"]
    spec = state.topology.queues["cq-a"]
    fr: FlavorResource = ("flavor-a", "cpu")
    found = cycle.preemption_engine(state, protect=protect).targets(
        Preemptor(job0, spec, {fr: 1000}, frozenset({fr})))
    assert [t.workload.key for t in found] == victims
