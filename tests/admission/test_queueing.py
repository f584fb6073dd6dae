"""Queues: strategies, priorities, stop policies, namespace selectors, inactive queues, checks (kueue.md §1.6)."""

from __future__ import annotations

import pytest

from .builders import Sim, check, cohort, cq, flavor, lq, namespace, one, workload_priority_class

QUOTA = {"default": {"cpu": "4"}}


@pytest.mark.parametrize(("strategy", "small_state"), [
    pytest.param("StrictFIFO", "Pending", id="strict-fifo-head-blocks-the-queue"),
    pytest.param("BestEffortFIFO", "Admitted", id="best-effort-fifo-admits-behind-a-blocked-head"),
])
def test_queueing_strategies(strategy: str, small_state: str) -> None:
    """A head that does not fit blocks StrictFIFO but not BestEffortFIFO."""
    sim = Sim(flavor("default"), cq("cq", quotas=QUOTA, strategy=strategy), lq("ns", "q", "cq"))
    sim.running("ns/running", "q", one("3"), cq="cq")
    sim.submit("ns/big", "q", one("2"), priority=10)
    sim.submit("ns/small", "q", one("1"))
    sim.schedule()
    assert sim.state("ns/small") == small_state
    assert sim.why("ns/big")[0] == "WaitingForQuota"


def test_strict_fifo_waiting_workload_explains_itself() -> None:
    """A workload never attempted behind a StrictFIFO head still gets a non-empty reason."""
    sim = Sim(flavor("default"), cq("cq", quotas=QUOTA, strategy="StrictFIFO"), lq("ns", "q", "cq"))
    sim.running("ns/running", "q", one("4"), cq="cq")
    sim.submit("ns/a", "q", one("2"), priority=10)
    sim.submit("ns/b", "q", one("1"))
    sim.schedule()
    assert sim.why("ns/b")[0] == "WaitingForQuota" and sim.why("ns/b")[1]


def test_priority_orders_admission_and_workload_priority_class_resolves() -> None:
    """Higher priority is admitted first; a WorkloadPriorityClass name resolves to its value."""
    sim = Sim(flavor("default"), cq("cq", quotas=QUOTA), lq("ns", "q", "cq"), workload_priority_class("urgent", 1000))
    assert sim.engine.priority_of(None, "urgent") == 1000
    sim.submit("ns/early-low", "q", one("4"), priority=0)
    sim.submit("ns/late-high", "q", one("4"), priority=sim.engine.priority_of(None, "urgent"))
    sim.schedule()
    assert sim.state("ns/late-high") == "Admitted" and sim.state("ns/early-low") == "Pending"


@pytest.mark.parametrize(("labels", "admitted"), [
    pytest.param({"team": "a"}, True, id="matching-namespace"),
    pytest.param({"team": "b"}, False, id="other-namespace-is-misconfigured"),
])
def test_namespace_selector(labels: dict[str, str], admitted: bool) -> None:
    """namespaceSelector gates which namespaces' workloads the ClusterQueue admits."""
    sim = Sim(flavor("default"), cq("cq", quotas=QUOTA, selector={"matchLabels": {"team": "a"}}),
              lq("ns", "q", "cq"), namespace("ns", labels))
    sim.submit("ns/w", "q", one("1"))
    sim.schedule()
    assert sim.state("ns/w") == ("Admitted" if admitted else "Pending")
    if not admitted:
        assert sim.why("ns/w") == ("Misconfigured", "workload namespace doesn't match ClusterQueue selector")


@pytest.mark.parametrize(("objects_extra", "cq_args", "reason", "message"), [
    pytest.param([], {"quotas": {"missing": {"cpu": "1"}}}, "FlavorNotFound",
                 "Can't admit new workloads: references missing ResourceFlavor(s): missing.", id="missing-flavor"),
    pytest.param([], {"quotas": QUOTA, "checks": ["prov"]}, "AdmissionCheckNotFound",
                 "Can't admit new workloads: references missing AdmissionCheck(s): prov.", id="missing-check"),
    pytest.param([], {"quotas": QUOTA, "stop": "Hold"}, "Stopped", "Can't admit new workloads: is stopped.",
                 id="stopped"),
])
def test_inactive_cluster_queue(objects_extra: list[object], cq_args: dict[str, object], reason: str,
                                message: str) -> None:
    """An inactive ClusterQueue carries Kueue's Active=False reason and its workloads wait as Suspended."""
    sim = Sim(flavor("default"), cq("cq", **cq_args), lq("ns", "q", "cq"))  # type: ignore[arg-type]
    spec = sim.engine.topology.queues["cq"]
    assert (spec.inactive_reason, spec.inactive_message) == (reason, message)
    sim.submit("ns/w", "q", one("1"))
    sim.schedule()
    expected = "ClusterQueue cq is inactive"
    assert sim.why("ns/w") == ("Suspended", expected)


@pytest.mark.parametrize(("policy", "running_state"), [
    pytest.param("Hold", "Admitted", id="hold-keeps-running-work"),
    pytest.param("HoldAndDrain", "Pending", id="hold-and-drain-evicts-running-work"),
])
def test_cluster_queue_stop_policies(policy: str, running_state: str) -> None:
    """Hold keeps admitted workloads; HoldAndDrain evicts them with reason ClusterQueueStopped."""
    sim = Sim(flavor("default"), cq("cq", quotas=QUOTA, stop=policy), lq("ns", "q", "cq"))
    sim.running("ns/running", "q", one("1"), cq="cq")
    events = sim.schedule()
    assert sim.state("ns/running") == running_state
    assert (("Evicted", "ns/running", "ClusterQueueStopped") in events) is (policy == "HoldAndDrain")


def test_local_queue_stop_policy_suspends_its_workloads() -> None:
    """A stopped LocalQueue keeps its new workloads out with reason Suspended."""
    sim = Sim(flavor("default"), cq("cq", quotas=QUOTA), lq("ns", "q", "cq", stop="Hold"))
    sim.submit("ns/w", "q", one("1"))
    sim.schedule()
    assert sim.why("ns/w") == ("Suspended", "LocalQueue q is inactive")


def test_missing_local_queue_is_misconfigured() -> None:
    """A workload naming a LocalQueue that does not exist waits as Misconfigured."""
    sim = Sim(flavor("default"), cq("cq", quotas=QUOTA))
    sim.submit("ns/w", "nowhere", one("1"))
    sim.schedule()
    assert sim.why("ns/w") == ("Misconfigured", "LocalQueue nowhere doesn't exist")


@pytest.mark.parametrize(("answer", "state", "event"), [
    pytest.param("Ready", "Admitted", "Admitted", id="ready-admits"),
    pytest.param("Retry", "Pending", "Evicted", id="retry-evicts-and-requeues"),
    pytest.param("Rejected", "Pending", "Evicted", id="rejected-deactivates"),
])
def test_admission_check_state_machine(answer: str, state: str, event: str) -> None:
    """Quota is reserved first; the check's answer admits, evicts for retry, or deactivates."""
    sim = Sim(flavor("default"), check("prov"), cq("cq", quotas=QUOTA, checks=["prov"]), lq("ns", "q", "cq"))
    sim.submit("ns/w", "q", one("1"))
    events = sim.schedule(0.0)
    assert ("QuotaReserved", "ns/w", "QuotaReserved") in events and sim.state("ns/w") == "QuotaReserved"
    sim.engine.set_check("ns/w", "prov", answer, 5.0)
    assert next(e.type for e in sim.engine.take_events()) == event
    assert sim.state("ns/w") == state
    if answer == "Rejected":
        assert sim.why("ns/w")[0] == "Deactivated"


def test_finish_releases_quota_and_requeues_inadmissible() -> None:
    """When a workload finishes, parked workloads of its cohort tree are tried again at once."""
    sim = Sim(flavor("default"), cq("cq", quotas=QUOTA), lq("ns", "q", "cq"))
    sim.running("ns/running", "q", one("4"), cq="cq")
    sim.submit("ns/waiting", "q", one("4"))
    sim.schedule(1.0)
    assert sim.state("ns/waiting") == "Pending"
    sim.engine.finish("ns/running", 2.0)
    sim.schedule(2.0)
    assert sim.state("ns/waiting") == "Admitted" and sim.state("ns/running") == "Finished"


@pytest.mark.parametrize(("requeue", "winner", "loser"), [
    pytest.param("Batched", "ns/arrival", "ns/parked", id="kueue-batch-new-arrival-takes-freed-quota-first"),
    pytest.param("Immediate", "ns/parked", "ns/arrival", id="immediate-parked-higher-priority-wins"),
])
def test_inadmissible_requeue_batch_decides_who_gets_freed_quota(requeue: str, winner: str, loser: str) -> None:
    """Quota freed at an instant goes first to what is already queued (a new arrival) when parked workloads
    come back in Kueue's batch; with immediate requeues the parked, higher-priority workload wins."""
    sim = Sim(flavor("default"), cq("cq", quotas=QUOTA), lq("ns", "q", "cq"), inadmissible_requeue=requeue)
    sim.running("ns/running", "q", one("4"), cq="cq")
    sim.submit("ns/parked", "q", one("4"), priority=10)
    sim.schedule(1.0)
    assert sim.state("ns/parked") == "Pending"
    sim.engine.finish("ns/running", 2.0)
    sim.submit("ns/arrival", "q", one("3"), priority=0)  # another shape: not parked with its equivalents
    sim.schedule(2.0)
    assert (sim.state(winner), sim.state(loser)) == ("Admitted", "Pending")
    assert sim.why(loser)[0] == "WaitingForQuota"


def test_strict_fifo_head_is_retried_before_the_batch() -> None:
    """A StrictFIFO head stays in its heap, so capacity freed in the cohort reaches it before parked
    BestEffortFIFO workloads of another queue come back with Kueue's batch."""
    sim = Sim(flavor("default"), cq("strict", cohort="c", quotas={"default": {"cpu": "0"}}, strategy="StrictFIFO"),
              cq("best", cohort="c", quotas=QUOTA), lq("ns", "s", "strict"), lq("nb", "b", "best"))
    sim.running("nb/running", "b", one("4"), cq="best")
    sim.submit("nb/parked", "b", one("4"), priority=100)
    sim.submit("ns/head", "s", one("4"), priority=0)
    sim.schedule(1.0)
    assert sim.state("nb/parked") == sim.state("ns/head") == "Pending"
    sim.engine.finish("nb/running", 2.0)
    sim.schedule(2.0)
    assert sim.state("ns/head") == "Admitted" and sim.state("nb/parked") == "Pending"


@pytest.mark.parametrize(("priority", "reason", "flavors_named"), [
    pytest.param(27, "ExceedsMaxQuota", ("flavor-b",), id="same-shape-same-priority-bypassed-with-its-equivalent"),
    pytest.param(22, "WaitingForQuota", ("flavor-a", "flavor-b"), id="same-shape-lower-priority-evaluated-itself"),
])
def test_scheduling_equivalence_includes_priority(priority: int, reason: str, flavors_named: tuple[str, ...]) -> None:
    """A BestEffortFIFO workload skips evaluation behind a failed one only when pod sets and priority both match
    (Kueue's computeSchedulingHash); otherwise it scans its flavors itself, from the first (random 130022)."""
    sim = Sim(flavor("flavor-a"), flavor("flavor-b"),
              cq("cq-a", cohort="pool", quotas={"flavor-a": {"cpu": ("3", None, "2")}, "flavor-b": {"cpu": "0"}},
                 fungibility={"whenCanBorrow": "MayStopSearch", "whenCanPreempt": "MayStopSearch"}),
              cq("cq-b", cohort="pool", quotas={"flavor-a": {"cpu": "4"}, "flavor-b": {"cpu": ("1", "4", None)}},
                 fungibility={"whenCanBorrow": "MayStopSearch", "whenCanPreempt": "TryNextFlavor"}),
              lq("team-a", "lq-a", "cq-a"), lq("team-b", "lq-b", "cq-b"))
    sim.submit("team-b/job-4", "lq-b", one("2"), priority=32)
    sim.submit("team-b/job-3", "lq-b", one("3"), priority=27)
    sim.submit("team-b/other", "lq-b", one("3"), priority=priority)
    sim.submit("team-a/job-1", "lq-a", one("2"), priority=1)
    sim.submit("team-a/job-5", "lq-a", one("1"), priority=4)
    sim.schedule(0.0)
    # job-3 borrowed flavor-a's cpu, lost it to job-1 in the same cycle, then resumed its scan at flavor-b.
    assert sim.why("team-b/job-3")[0] == "ExceedsMaxQuota"
    got_reason, message = sim.why("team-b/other")
    assert got_reason == reason
    assert tuple(f for f in ("flavor-a", "flavor-b") if f"flavor {f}" in message) == flavors_named


@pytest.mark.parametrize(("cohort_object", "more_needed"), [
    pytest.param(True, "3 more needed", id="below-a-cohort-object-parked-workload-evaluated-again"),
    pytest.param(False, "2 more needed", id="cohort-only-named-parked-workload-keeps-its-message"),
])
def test_admission_below_cohort_object_requeues_parked_workloads(cohort_object: bool, more_needed: str) -> None:
    """An admission below a Cohort object brings the tree's parked workloads back with the next requeue batch (the
    ClusterQueue's status update makes Kueue's Cohort reconciler ask for it, random 190041); a cohort only named
    by the queues has no object, so its parked workloads wait for a release."""
    objects = [flavor("default"), cq("cq-a", cohort="pool", quotas=QUOTA),
               cq("cq-b", cohort="pool", quotas={"default": {"cpu": "0"}}),
               lq("ns", "a", "cq-a"), lq("ns", "b", "cq-b")]
    sim = Sim(*objects, *([cohort("pool")] if cohort_object else []))
    sim.running("ns/running", "a", one("2"), cq="cq-a")
    sim.submit("ns/parked", "b", one("4"))
    sim.schedule(1.0)
    assert sim.why("ns/parked")[1].endswith("2 more needed")
    sim.submit("ns/small", "a", one("1"))
    sim.schedule(2.0)
    assert sim.state("ns/small") == "Admitted"
    assert sim.why("ns/parked")[1].endswith(more_needed)
