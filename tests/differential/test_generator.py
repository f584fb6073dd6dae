"""The differential harness's own pure parts: the scenario generator, its quota arithmetic, the comparison and
the conftest's marker rules. Fast; part of the quick run."""

from __future__ import annotations

from pathlib import Path

import pytest

from differential import kueue_objects
from differential.capacity import Capacity
from differential.compare import differences, other_scan_phase, simulate, with_scan_progress_reset
from differential.conftest import DEFAULT_CASES, DEFAULT_HANDWRITTEN, base_seed, handwritten_sample
from differential.generator import generate
from gitopsq.simulate.scenario import parse_scenario

SEEDS = range(25)


def test_same_seed_same_scenario() -> None:
    """A seed alone determines the scenario, so any failure can be replayed from its seed."""
    assert generate(20261121) == generate(20261121)
    assert generate(1) != generate(2)


@pytest.mark.parametrize("seed", SEEDS)
def test_generated_scenario_is_valid_for_gitopsq(seed: int) -> None:
    """Every generated scenario is a valid scenario file for `gitopsq simulate`."""
    import yaml

    parse_scenario(yaml.safe_dump(generate(seed)), f"random-{seed}.yaml")


@pytest.mark.parametrize("seed", SEEDS)
def test_generated_scenario_has_no_ambiguous_ties(seed: int) -> None:
    """Pending workloads never share a priority, admitted ones never share a reservation second, and later
    instants submit one workload each — the ties Kueue breaks by UID never decide an outcome."""
    scenario = generate(seed)
    pending = [w for w in scenario["workloads"] if "admitted" not in w]
    admitted = [w for w in scenario["workloads"] if "admitted" in w]
    assert len({w["priority"] for w in pending}) == len(pending)
    assert len({w["admitted"]["at"] for w in admitted}) == len(admitted)
    later = [w.get("submitAt", 0) for w in pending if w.get("submitAt", 0) > 0]
    assert len(set(later)) == len(later)


@pytest.mark.parametrize("seed", SEEDS)
def test_generated_scenario_is_reproducible_on_kueue(seed: int) -> None:
    """The oracle driver accepts every generated scenario (no kind or feature it cannot reproduce)."""
    plan = kueue_objects.plan(generate(seed))
    assert plan.cluster_queues


def test_generator_covers_the_feature_space() -> None:
    """Across 200 seeds the generator produces every preemption policy, fungibility setting, queueing strategy,
    topology, fair sharing on and off, lending and borrowing limits, and admitted and pending mixes."""
    seen: set[str] = set()
    for seed in range(200):
        s = generate(seed)
        seen.add(f"fair={'settings' in s}")
        for o in s["objects"]:
            spec = o.get("spec") or {}
            if o["kind"] == "Cohort":
                seen.add("cohort-tree")
            if o["kind"] != "ClusterQueue":
                continue
            seen.add(f"strategy={spec['queueingStrategy']}")
            seen.add(f"within={spec['preemption']['withinClusterQueue']}")
            seen.add(f"reclaim={spec['preemption']['reclaimWithinCohort']}")
            seen.update(f"bwc={spec['preemption']['borrowWithinCohort']['policy']}"
                        for _ in [0] if "borrowWithinCohort" in spec["preemption"])
            seen.update(f"{k}={v}" for k, v in spec["flavorFungibility"].items())
            seen.add(f"groups={len(spec['resourceGroups'])}")
            seen.add("cohort" if "cohortName" in spec else "no-cohort")
            for g in spec["resourceGroups"]:
                for f in g["flavors"]:
                    seen.update(k for r in f["resources"] for k in r if k.endswith("Limit"))
        seen.update("admitted" for w in s["workloads"] if "admitted" in w)
        seen.update("later" for w in s["workloads"] if w.get("submitAt"))
        seen.update("runtime" for w in s["workloads"] if "runtime" in w)
    for want in ("fair=True", "fair=False", "cohort-tree", "cohort", "no-cohort", "strategy=StrictFIFO",
                 "strategy=BestEffortFIFO", "within=Never", "within=LowerPriority",
                 "within=LowerOrNewerEqualPriority", "reclaim=Never", "reclaim=LowerPriority", "reclaim=Any",
                 "bwc=Never", "bwc=LowerPriority", "whenCanBorrow=TryNextFlavor", "whenCanPreempt=MayStopSearch",
                 "preference=PreemptionOverBorrowing", "preference=BorrowingOverPreemption", "groups=2",
                 "borrowingLimit", "lendingLimit", "admitted", "later", "runtime"):
        assert want in seen, want


def _cq(name: str, cohort: str, nominal: int, lending: int | None = None) -> dict[str, object]:
    resource: dict[str, object] = {"name": "cpu", "nominalQuota": nominal}
    if lending is not None:
        resource["lendingLimit"] = lending
    return {"kind": "ClusterQueue", "metadata": {"name": name},
            "spec": {"cohortName": cohort, "resourceGroups": [
                {"coveredResources": ["cpu"], "flavors": [{"name": "default", "resources": [resource]}]}]}}


def test_capacity_follows_kueues_lending_limit_example() -> None:
    """Kueue's worked lending-limit example: lend-a (3, lend 2) and lend-b (2, lend 2) with 2 cpu used in
    lend-b leave 2 cpu available to lend-b."""
    cap = Capacity([_cq("lend-a", "lend", 3, lending=2), _cq("lend-b", "lend", 2, lending=2)])
    cap.usage["cq/lend-b"][("default", "cpu")] = 2
    assert cap.available("cq/lend-b", ("default", "cpu")) == 2
    assert cap.available("cq/lend-a", ("default", "cpu")) == 3


def _result(**workloads: dict[str, object]) -> dict[str, object]:
    return {"events": [], "final": {"workloads": workloads, "clusterQueues": {}}}


@pytest.mark.parametrize(("kueue", "gitopsq", "fields"), [
    ({"state": "Admitted", "clusterQueue": "a", "flavors": {"main": {"cpu": "x"}}},
     {"state": "Admitted", "clusterQueue": "a", "flavors": {"main": {"cpu": "x"}}}, []),
    ({"state": "Admitted", "clusterQueue": "a", "flavors": {"main": {"cpu": "x"}}},
     {"state": "Admitted", "clusterQueue": "a", "flavors": {"main": {"cpu": "y"}}}, ["flavors"]),
    ({"state": "Pending", "reason": "WaitingForQuota", "message": "m"},
     {"state": "Pending", "reason": "ExceedsMaxQuota", "message": "n"}, ["reason", "message"]),
    ({"state": "Pending", "reason": "WaitingForQuota", "message": "m"},
     {"state": "Admitted", "clusterQueue": "a"}, ["state", "cluster_queue", "reason", "message"]),
], ids=["same-placement", "other-flavor", "other-reason", "admitted-instead-of-pending"])
def test_differences_name_each_differing_field(kueue: dict[str, object], gitopsq: dict[str, object],
                                               fields: list[str]) -> None:
    """The comparison reports exactly the fields in which the simulator's outcome differs from Kueue's."""
    diffs = differences(_result(**{"ns/w": kueue}), _result(**{"ns/w": gitopsq}))
    assert [d.field for d in diffs] == fields


def test_differences_compare_preemption_reasons() -> None:
    """A preemption with another reason (or none) is a difference."""
    kueue = {**_result(**{"ns/w": {"state": "Pending"}}),
             "events": [{"time": 0.0, "workload": "ns/w", "type": "Preempted", "reason": "InClusterQueue"}]}
    diffs = differences(kueue, _result(**{"ns/w": {"state": "Pending"}}))
    assert [(d.field, d.kueue, d.gitopsq) for d in diffs] == [("preempted", ["InClusterQueue"], [])]


def _queues(strategy: str | None) -> dict[str, object]:
    spec = {"queueingStrategy": strategy} if strategy else {}  # no strategy: Kueue's default, BestEffortFIFO
    return {"objects": [{"kind": "ClusterQueue", "metadata": {"name": "cq"}, "spec": spec},
                        {"kind": "ClusterQueue", "metadata": {"name": "other"},
                         "spec": {"queueingStrategy": "BestEffortFIFO"}}]}


_NO_LONGER_FITS = "Workload no longer fits after processing another workload"
_OVERLAPPING = "Workload has overlapping preemption targets with another workload"
_WAITING = {"state": "Pending", "clusterQueue": "cq", "reason": "WaitingForQuota",
            "message": "Waiting behind the head of BestEffortFIFO ClusterQueue cq"}
_ADMITTED = {"state": "Admitted", "clusterQueue": "cq", "flavors": {"main": {"cpu": "f"}}}


@pytest.mark.parametrize(("strategy", "head_message", "head_queue", "follower", "fields"), [
    ("StrictFIFO", "m", "cq", _WAITING, []),
    ("StrictFIFO", _NO_LONGER_FITS, "cq", _WAITING, []),
    ("BestEffortFIFO", _NO_LONGER_FITS, "cq", _WAITING, []),
    ("BestEffortFIFO", _OVERLAPPING, "cq", _WAITING, []),
    (None, _NO_LONGER_FITS, "cq", _WAITING, []),
    ("BestEffortFIFO", "m", "cq", _WAITING, ["reason", "message"]),
    ("BestEffortFIFO", _NO_LONGER_FITS, "other", _WAITING, ["reason", "message"]),
    ("BestEffortFIFO", _NO_LONGER_FITS, "cq", _ADMITTED, ["state", "cluster_queue", "flavors"]),
    ("StrictFIFO", "", "cq", _WAITING, ["reason", "message", "reason", "message"]),
], ids=["strict-fifo-follower-is-the-deliberate-difference", "strict-fifo-any-head-reason",
        "best-effort-follower-behind-a-head-that-no-longer-fits", "best-effort-follower-behind-overlapping-targets",
        "default-strategy-is-best-effort", "best-effort-head-parked-so-follower-compared",
        "retried-head-in-another-queue-so-compared", "follower-admitted-by-gitopsq-is-compared",
        "no-evaluated-head-so-compared"])
def test_unevaluated_followers_are_the_only_exemption(strategy: str | None, head_message: str, head_queue: str,
                                                      follower: dict[str, object], fields: list[str]) -> None:
    """A follower Kueue left without a condition, and gitopsq left pending, is not compared on its reason only
    behind a head Kueue pops every cycle in the same ClusterQueue: any evaluated StrictFIFO head, or a BestEffortFIFO
    head skipped after nomination ("no longer fits", "overlapping preemption targets"); behind any other head, in
    another queue, with no evaluated head, or when gitopsq placed it, the difference is reported."""
    kueue_head = ({"state": "Pending", "reason": "WaitingForQuota", "message": head_message} if head_message
                  else {"state": "Pending"})
    our_head = {"state": "Pending", "clusterQueue": head_queue, "reason": "WaitingForQuota",
                "message": head_message or "m"}
    kueue = _result(**{"ns/head": kueue_head, "ns/next": {"state": "Pending"}})
    ours = _result(**{"ns/head": our_head, "ns/next": follower})
    diffs = differences(kueue, ours, scenario=_queues(strategy))
    assert [d.field for d in diffs] == fields


def test_ci_defaults_are_bounded_and_dated(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without settings a run compares DEFAULT_CASES scenarios seeded by today's date; the seed is settable."""
    monkeypatch.delenv("GITOPSQ_DIFFERENTIAL_SEED", raising=False)
    assert 0 < DEFAULT_CASES <= 200
    assert str(base_seed()).startswith("20")
    monkeypatch.setenv("GITOPSQ_DIFFERENTIAL_SEED", "42")
    assert base_seed() == 42


def _one_queue(strategy: str) -> dict[str, object]:
    return {"objects": [{"kind": "ClusterQueue", "metadata": {"name": "cq"}, "spec": {"queueingStrategy": strategy}},
                        {"kind": "LocalQueue", "metadata": {"name": "lq", "namespace": "ns"},
                         "spec": {"clusterQueue": "cq"}}],
            "workloads": [{"name": "head", "namespace": "ns", "queue": "lq"},
                          {"name": "next", "namespace": "ns", "queue": "lq"}]}


@pytest.mark.parametrize(("strategy", "head_seen", "fields"), [
    ("BestEffortFIFO", ["WaitingForQuota: a", "WaitingForQuota: b"], []),
    ("StrictFIFO", ["WaitingForQuota: a", "WaitingForQuota: b"], ["state", "cluster_queue", "flavors"]),
    ("BestEffortFIFO", [], ["state", "cluster_queue", "flavors"]),
], ids=["best-effort-head-spinning-is-kueue-3710", "strict-fifo-head-spinning-is-compared",
        "best-effort-head-settled-is-compared"])
def test_kueue_3710_spinning_head_exempts_only_its_tree(strategy: str, head_seen: list[str],
                                                        fields: list[str]) -> None:
    """Behind a BestEffortFIFO head Kueue keeps requeueing (issue #3710) nothing of its cohort tree is compared;
    a StrictFIFO queue, or a head whose reason settled, is compared as usual."""
    head: dict[str, object] = {"state": "Pending", "reason": "WaitingForQuota", "message": "a"}
    if head_seen:
        head["messagesSeen"] = head_seen
    kueue = _result(**{"ns/head": head, "ns/next": {"state": "Pending"}})
    ours = _result(**{"ns/head": {"state": "Pending", "clusterQueue": "cq", "reason": "WaitingForQuota",
                                  "message": "a"},
                      "ns/next": {"state": "Admitted", "clusterQueue": "cq", "flavors": {"main": {"cpu": "f"}}}})
    diffs = differences(kueue, ours, scenario=_one_queue(strategy))
    assert [d.field for d in diffs if d.workload == "ns/next"] == fields


@pytest.mark.parametrize(("strategy", "alternated_at", "fields"), [
    ("BestEffortFIFO", [41.0], []),
    ("StrictFIFO", [41.0], ["flavors"]),
    ("BestEffortFIFO", [], ["flavors"]),
], ids=["best-effort-head-spun-then-admitted-is-kueue-3710", "strict-fifo-head-spun-is-compared",
        "best-effort-head-never-spun-is-compared"])
def test_head_that_spun_before_its_admission_exempts_its_tree(strategy: str, alternated_at: list[float],
                                                               fields: list[str]) -> None:
    """A BestEffortFIFO head whose reason alternated within an instant (Kueue #3710) and that was admitted later
    exempts its tree, itself included: where its scans stood when quota came free was a race (random 110056)."""
    head: dict[str, object] = {"state": "Admitted", "clusterQueue": "cq", "flavors": {"main": {"cpu": "b"}}}
    if alternated_at:
        head["alternatedAt"] = alternated_at
    kueue = _result(**{"ns/head": head, "ns/next": {"state": "Pending"}})
    ours = _result(**{"ns/head": {"state": "Admitted", "clusterQueue": "cq", "flavors": {"main": {"cpu": "a"}}},
                      "ns/next": {"state": "Pending"}})
    diffs = differences(kueue, ours, scenario=_one_queue(strategy))
    assert [d.field for d in diffs] == fields


def test_handwritten_sample_is_bounded_seeded_and_can_be_all(monkeypatch: pytest.MonkeyPatch) -> None:
    """A CI run replays a seed-chosen subset of the hand-written scenarios; the same seed picks the same ones,
    another seed others, and ``all`` replays every one."""
    paths = [Path(f"s{i:02d}.yaml") for i in range(60)]
    monkeypatch.delenv("GITOPSQ_DIFFERENTIAL_HANDWRITTEN", raising=False)
    monkeypatch.setenv("GITOPSQ_DIFFERENTIAL_SEED", "1")
    first = handwritten_sample(paths)
    assert len(first) == DEFAULT_HANDWRITTEN and first == handwritten_sample(paths) and first == sorted(first)
    monkeypatch.setenv("GITOPSQ_DIFFERENTIAL_SEED", "2")
    assert handwritten_sample(paths) != first
    monkeypatch.setenv("GITOPSQ_DIFFERENTIAL_HANDWRITTEN", "all")
    assert handwritten_sample(paths) == paths


@pytest.mark.parametrize(("times", "fields"), [
    pytest.param([400.0, 400.0], [], id="preempted-twice-at-one-instant-is-a-kueue-cycle"),
    pytest.param([100.0, 400.0], ["state", "cluster_queue", "flavors"], id="preempted-at-two-instants-is-compared"),
])
def test_kueue_preemption_cycle_exempts_its_tree(times: list[float], fields: list[str]) -> None:
    """A tree where Kueue preempted one workload twice at the same instant (a preemption cycle gitopsq does not
    play out) is not compared; preemptions at different instants are."""
    events = [{"time": t, "workload": "ns/head", "type": "Preempted", "reason": "InCohortFairSharing"} for t in times]
    kueue = {**_result(**{"ns/head": {"state": "Pending"}, "ns/next": {"state": "Pending"}}), "events": events}
    ours = {**_result(**{"ns/head": {"state": "Pending"},
                         "ns/next": {"state": "Admitted", "clusterQueue": "cq", "flavors": {"main": {"cpu": "f"}}}}),
            "events": events}
    diffs = differences(kueue, ours, scenario=_one_queue("BestEffortFIFO"))
    assert [d.field for d in diffs if d.workload == "ns/next"] == fields


@pytest.mark.parametrize(("alternated", "accepted"), [
    pytest.param(["team-b/job-0"], True, id="head-seen-alternating-in-the-other-phase-is-kueues-race"),
    pytest.param([], False, id="no-alternation-seen-is-a-divergence"),
    pytest.param(["elsewhere/job-9"], False, id="alternation-in-another-tree-is-a-divergence"),
])
def test_other_scan_phase_needs_an_alternating_head_in_the_tree(alternated: list[str], accepted: bool) -> None:
    """Random 120081: Kueue admits the StrictFIFO head it kept alternating between two flavor scans with the
    flavors of whichever scan it was in when capacity came; that outcome is Kueue's race only when the oracle saw
    a workload of that cohort tree alternate (`alternatedAt`)."""
    scenario = generate(120081)
    other_phase = simulate(with_scan_progress_reset(scenario))
    diffs = differences(other_phase, simulate(scenario), scenario=scenario)
    assert [d.field for d in diffs] == ["flavors"]
    for k in alternated:  # what the oracle records of a workload whose reason alternated at instant 0
        other_phase["final"]["workloads"].setdefault(k, {"state": "Pending"})["alternatedAt"] = [0.0]
    assert other_scan_phase(other_phase, scenario, diffs) is accepted
