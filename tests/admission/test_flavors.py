"""Flavor assignment: order, structural checks, quota checks, fungibility, multiple pod sets (kueue.md §1.2)."""

from __future__ import annotations

from typing import Any

import pytest

from gitopsq.admission import cycle
from gitopsq.admission.resources import in_kueue_order
from gitopsq.api import model as m

from .builders import Sim, cq, flavor, lq, one, pod_sets

TWO_FLAVORS = {"on-demand": {"cpu": "4"}, "spot": {"cpu": "8"}}


def _sim(*flavors: m.QueueObject, quotas: dict[str, Any] | None = None, preserve_flavor_scan_progress: bool = True,
         **cq_args: Any) -> Sim:
    return Sim(*flavors, cq("cq", quotas=quotas or TWO_FLAVORS, **cq_args), lq("ns", "q", "cq"),
               preserve_flavor_scan_progress=preserve_flavor_scan_progress)


@pytest.mark.parametrize(("cpu", "expected"), [
    pytest.param("3", "on-demand", id="first-flavor-when-it-fits"),
    pytest.param("6", "spot", id="falls-back-to-the-next-flavor"),
])
def test_flavors_tried_in_order(cpu: str, expected: str) -> None:
    """Flavors are scanned in the ClusterQueue's order; the first that fits wins."""
    sim = _sim(flavor("on-demand"), flavor("spot"))
    sim.submit("ns/w", "q", one(cpu))
    sim.schedule()
    assert sim.flavors("ns/w") == {"main": {"cpu": expected}}


@pytest.mark.parametrize(("pods", "rf", "message", "reason"), [
    pytest.param(one("1"), flavor("spot", taints=[{"key": "spot", "value": "true", "effect": "NoSchedule"}]),
                 "untolerated taint {spot true NoSchedule <nil>} in flavor spot", "NoMatchingFlavor",
                 id="untolerated-taint"),
    pytest.param(pod_sets(("main", 1, {"cpu": "1"}), selector={"zone": "b"}), flavor("spot", labels={"zone": "a"}),
                 "flavor spot doesn't match node affinity", "NoMatchingFlavor", id="node-selector-mismatch"),
    pytest.param(one("1", memory="1Gi"), flavor("spot"), "resource memory unavailable in ClusterQueue",
                 "NoMatchingFlavor", id="resource-not-covered"),
    pytest.param(one("9"), flavor("spot"), "insufficient quota for cpu in flavor spot, previously considered "
                 "podsets requests (0) + current podset request (9) > maximum capacity (8)", "ExceedsMaxQuota",
                 id="exceeds-maximum-capacity"),
])
def test_structural_and_capacity_failures(pods: tuple[m.PodSet, ...], rf: m.QueueObject, message: str,
                                          reason: str) -> None:
    """A pod set no flavor can take waits with Kueue's reason and message."""
    sim = _sim(rf, quotas={"spot": {"cpu": "8"}})
    sim.submit("ns/w", "q", pods)
    sim.schedule()
    assert sim.why("ns/w") == (reason, f"couldn't assign flavors to pod set main: {message}")


def test_toleration_admits_on_tainted_flavor_and_selector_ignores_unknown_keys() -> None:
    """A tolerated taint passes, and selector keys the flavor does not define are not considered."""
    rf = flavor("spot", labels={"zone": "a"}, taints=[{"key": "spot", "value": "true", "effect": "NoSchedule"}])
    tol = (m.Toleration(key="spot", operator="Equal", value="true", effect="NoSchedule"),)
    sim = _sim(rf, quotas={"spot": {"cpu": "8"}})
    sim.submit("ns/w", "q", pod_sets(("main", 1, {"cpu": "1"}), selector={"zone": "a", "gpu": "x"}, tolerations=tol))
    sim.schedule()
    assert sim.state("ns/w") == "Admitted"


def test_multiple_pod_sets_count_previous_usage() -> None:
    """The second pod set sees what the first already put on a flavor ("previously considered" requests)."""
    sim = _sim(flavor("on-demand"), flavor("spot"))
    sim.submit("ns/w", "q", pod_sets(("driver", 1, {"cpu": "3"}), ("workers", 2, {"cpu": "2"})))
    sim.schedule()
    assert sim.flavors("ns/w") == {"driver": {"cpu": "on-demand"}, "workers": {"cpu": "spot"}}


def test_multiple_pod_sets_failure_message_names_previous_requests() -> None:
    """When no flavor holds the second pod set, the message carries the earlier pod set's request."""
    sim = _sim(flavor("spot"), quotas={"spot": {"cpu": "8"}})
    sim.submit("ns/w", "q", pod_sets(("driver", 1, {"cpu": "5"}), ("workers", 2, {"cpu": "2"})))
    sim.schedule()
    assert sim.why("ns/w")[1] == ("couldn't assign flavors to pod set workers: insufficient quota for cpu in flavor "
                                  "spot, previously considered podsets requests (5) + current podset request (4) > "
                                  "maximum capacity (8)")


@pytest.mark.parametrize(("fungibility", "expected"), [
    pytest.param(None, "on-demand", id="default-stops-at-first-flavor-even-when-borrowing"),
    pytest.param({"whenCanBorrow": "TryNextFlavor"}, "spot", id="try-next-flavor-prefers-a-flavor-without-borrowing"),
])
def test_when_can_borrow(fungibility: dict[str, str] | None, expected: str) -> None:
    """whenCanBorrow decides whether a flavor that fits only by borrowing ends the scan."""
    sim = Sim(flavor("on-demand"), flavor("spot"),
              cq("cq", cohort="co", quotas={"on-demand": {"cpu": "2"}, "spot": {"cpu": "8"}},
                 fungibility=fungibility),
              cq("lender", cohort="co", quotas={"on-demand": {"cpu": "8"}, "spot": {"cpu": "0"}}),
              lq("ns", "q", "cq"))
    sim.submit("ns/w", "q", one("4"))
    sim.schedule()
    assert sim.flavors("ns/w") == {"main": {"cpu": expected}}


@pytest.mark.parametrize(("fungibility", "expected_state"), [
    pytest.param(None, "Admitted", id="default-tries-next-flavor-instead-of-preempting"),
    pytest.param({"whenCanPreempt": "MayStopSearch"}, "Admitted", id="may-stop-search-preempts-in-first-flavor"),
])
def test_when_can_preempt(fungibility: dict[str, str] | None, expected_state: str) -> None:
    """With a lower-priority workload in flavor 1, the default moves on to flavor 2; MayStopSearch preempts."""
    sim = _sim(flavor("on-demand"), flavor("spot"), fungibility=fungibility,
               preemption={"withinClusterQueue": "LowerPriority"})
    sim.running("ns/low", "q", one("4"), cq="cq", flavor="on-demand", priority=0)
    sim.submit("ns/high", "q", one("4"), priority=10)
    events = sim.schedule()
    assert sim.state("ns/high") == expected_state
    preempted = [e for e in events if e[0] == "Preempted"]
    if fungibility:
        assert sim.flavors("ns/high") == {"main": {"cpu": "on-demand"}}
        assert preempted == [("Preempted", "ns/low", "InClusterQueue")]
    else:
        assert sim.flavors("ns/high") == {"main": {"cpu": "spot"}}
        assert preempted == []


def test_try_next_flavor_on_borrow_prefers_preemption_without_borrowing() -> None:
    """Without a preference, whenCanBorrow=TryNextFlavor ranks a no-borrowing flavor that needs preemption first."""
    sim = Sim(flavor("on-demand"), flavor("spot"),
              cq("cq", cohort="co", quotas={"on-demand": {"cpu": "0"}, "spot": {"cpu": "2"}},
                 fungibility={"whenCanBorrow": "TryNextFlavor", "whenCanPreempt": "MayStopSearch"},
                 preemption={"withinClusterQueue": "LowerPriority"}),
              cq("lender", cohort="co", quotas={"on-demand": {"cpu": "8"}, "spot": {"cpu": "0"}}),
              lq("ns", "q", "cq"))
    sim.running("ns/low", "q", one("2"), cq="cq", flavor="spot", priority=0)
    sim.submit("ns/high", "q", one("2"), priority=10)
    events = sim.schedule()
    assert ("Preempted", "ns/low", "InClusterQueue") in events
    assert sim.flavors("ns/high") == {"main": {"cpu": "spot"}}


def test_assignment_stops_at_the_first_pod_set_that_cannot_be_assigned() -> None:
    """The message names pod sets only up to the first that cannot be assigned, as Kueue's does."""
    sim = _sim(flavor("spot"), quotas={"spot": {"cpu": "8"}})
    sim.submit("ns/w", "q", pod_sets(("driver", 1, {"cpu": "9"}), ("workers", 1, {"cpu": "9"})))
    sim.schedule()
    message = sim.why("ns/w")[1]
    assert message.startswith("couldn't assign flavors to pod set driver:") and "workers" not in message


@pytest.mark.parametrize(("generation_moved", "previous_cycle", "preserve", "expected"), [
    pytest.param(False, False, True, "spot", id="resumes-after-the-last-tried-flavor"),
    pytest.param(True, False, True, "on-demand", id="starts-over-once-a-workload-left-the-queue"),
    pytest.param(True, True, True, "spot", id="resumes-when-tried-in-the-previous-cycle-anyway"),
    pytest.param(False, False, False, "on-demand", id="starts-over-with-scan-progress-gate-off"),
])
def test_flavor_scan_resumes_after_the_flavor_of_the_failed_attempt(generation_moved: bool, previous_cycle: bool,
                                                                    preserve: bool, expected: str) -> None:
    """A retried workload scans from the flavor after the one its last attempt stopped at, unless that attempt is
    outdated (Kueue: a workload left the ClusterQueue since, and it was not the previous cycle) or Kueue's
    FlavorFungibilityPreserveScanProgress gate is off."""
    sim = _sim(flavor("on-demand"), flavor("spot"), preserve_flavor_scan_progress=preserve)
    sim.submit("ns/w", "q", one("1"))
    state = sim.engine.state
    w = state.workloads["ns/w"]
    w.last_tried = {(0, "cpu"): 0}
    state.cycle = 10
    w.last_cycle = 9 if previous_cycle else 5
    w.last_generation = -1 if generation_moved else 0
    entry = cycle.nominate(state, w, sim.engine.topology.queues["cq"])
    assert entry.nomination is not None
    assert dict(entry.nomination.flavors)["main"] == {"cpu": expected}


def test_pod_set_status_is_the_first_failing_resource_group_alone() -> None:
    """Once a resource group has no usable flavor, later groups are not examined or named in the message. Groups
    are tried in Kueue's resource order (FNV-1a hash of the name: memory before cpu), not in spec order."""
    quotas = {"cpu-pool": {"cpu": "2"}, "mem-pool": {"memory": "1Gi"}}
    sim = _sim(flavor("cpu-pool"), flavor("mem-pool"), quotas=quotas)
    sim.submit("ns/big", "q", one("3", memory="4Gi"))
    sim.schedule()
    assert sim.why("ns/big") == ("ExceedsMaxQuota", "couldn't assign flavors to pod set main: insufficient quota for "
                                 "memory in flavor mem-pool, previously considered podsets requests (0) + current "
                                 "podset request (4Gi) > maximum capacity (1Gi)")


@pytest.mark.parametrize(("names", "order"), [
    pytest.param(["cpu", "memory"], ["memory", "cpu"], id="memory-before-cpu"),
    pytest.param(["cpu", "pods", "nvidia.com/gpu"], ["nvidia.com/gpu", "pods", "cpu"], id="gpu-pods-cpu"),
])
def test_resources_are_visited_in_kueues_hash_order(names: list[str], order: list[str]) -> None:
    """Kueue v0.19 keeps requests in a slice sorted by the FNV-1a hash of the name; gitopsq visits them alike."""
    assert in_kueue_order(names) == order


def test_try_next_flavor_on_borrow_also_applies_to_a_flavor_that_needs_preemption() -> None:
    """whenCanBorrow=TryNextFlavor moves past a flavor that needs preemption and would still borrow afterwards."""
    preemption = {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any",
                  "borrowWithinCohort": {"policy": "LowerPriority"}}
    sim = Sim(flavor("on-demand"), flavor("spot"),
              cq("cq", cohort="pool", quotas={"on-demand": {"cpu": "0"}, "spot": {"cpu": "4"}}, preemption=preemption,
                 fungibility={"whenCanBorrow": "TryNextFlavor", "whenCanPreempt": "MayStopSearch"}),
              cq("lender", cohort="pool", quotas={"on-demand": {"cpu": "4"}, "spot": {"cpu": "0"}}),
              lq("ns", "q", "cq"))
    sim.running("ns/low", "q", one("4"), cq="cq", flavor="on-demand")
    sim.submit("ns/high", "q", one("2"), priority=10)
    events = sim.schedule()
    assert [e for e in events if e[0] == "Preempted"] == []
    assert sim.flavors("ns/high") == {"main": {"cpu": "spot"}}


def test_a_flavor_is_represented_by_its_worst_resource_mode_first() -> None:
    """A resource that only borrows does not lend its borrowing to one that needs preemption (MayStopSearch stops)."""
    sim = Sim(flavor("on-demand"), flavor("spot"),
              cq("cq", cohort="pool", quotas={"on-demand": {"cpu": "2", "memory": "1Gi"},
                                              "spot": {"cpu": "2", "memory": "4Gi"}},
                 preemption={"withinClusterQueue": "LowerPriority"},
                 fungibility={"whenCanBorrow": "TryNextFlavor", "whenCanPreempt": "MayStopSearch"}),
              cq("lender", cohort="pool", quotas={"on-demand": {"cpu": "0", "memory": "4Gi"},
                                                  "spot": {"cpu": "0", "memory": "0"}}),
              lq("ns", "q", "cq"))
    sim.running("ns/low", "q", one("2"), cq="cq", flavor="on-demand")
    sim.submit("ns/high", "q", one("1", memory="2Gi"), priority=10)
    events = sim.schedule()
    assert ("Preempted", "ns/low", "InClusterQueue") in events
