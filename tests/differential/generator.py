"""Random but valid scenarios (shared/interfaces.md §4) for differential runs, from a seed alone.

Each scenario is small enough to settle on Kueue in a few seconds: 1–4 ClusterQueues, 1–3 flavors, one or two
resources (in one resource group or two), no cohort / a flat cohort / a two-level Cohort tree with optional
cohort quota, lending and borrowing limits, every preemption policy and fungibility setting, both queueing
strategies, fair sharing on or off with weights and strategy lists, already-admitted workloads (some
borrowing) and pending ones, some submitted later, some with runtimes.

Legitimate nondeterminism is designed out rather than compared away. Kueue breaks ties it cannot see (equal
creation second, equal reservation second) by UID, which differs per run, so:
1. every pending workload has its own priority (no equal-priority pending pair, no equal-priority victims that
   were both admitted during the run);
2. already-admitted workloads have distinct reservation times, whole seconds apart;
3. instants after the first submit exactly one workload, and runtimes are odd so finishes rarely share an
   instant with a submission.
Initial admissions are feasible: each is placed only where Kueue's own quota arithmetic (`Capacity`) says it
fits, so the starting state is one Kueue could have reached.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from differential.capacity import Capacity

V = "kueue.x-k8s.io/v1beta2"
RUNTIMES = (7, 23, 41, 67, 89)


@dataclass(frozen=True, slots=True)
class Shape:
    flavors: tuple[str, ...]
    groups: tuple[tuple[tuple[str, ...], tuple[str, ...]], ...]  # (covered resources, flavors) per group


def _shape(rnd: random.Random) -> Shape:
    flavors = tuple(f"flavor-{c}" for c in "abc"[: rnd.choice((1, 2, 2, 3))])
    if rnd.random() < 0.35:
        if rnd.random() < 0.5 or len(flavors) == 1:
            return Shape(flavors, ((("cpu", "memory"), flavors),))
        split = rnd.randint(1, len(flavors) - 1)
        return Shape(flavors, ((("cpu",), flavors[:split]), (("memory",), flavors[split:])))
    return Shape(flavors, ((("cpu",), flavors),))


def _amount(res: str, n: int) -> Any:
    return f"{n}Gi" if res == "memory" else n


def _quota(rnd: random.Random, res: str, in_cohort: bool) -> dict[str, Any]:
    nominal = rnd.choice((0, 1, 2, 3, 4, 4, 6))
    q: dict[str, Any] = {"name": res, "nominalQuota": _amount(res, nominal)}
    if in_cohort and rnd.random() < 0.3:
        q["borrowingLimit"] = _amount(res, rnd.choice((0, 1, 2, 4)))
    if in_cohort and nominal > 0 and rnd.random() < 0.25:
        q["lendingLimit"] = _amount(res, rnd.randint(0, nominal))
    return q


def _preemption(rnd: random.Random, fair: bool) -> dict[str, Any]:
    p: dict[str, Any] = {
        "withinClusterQueue": rnd.choice(("Never", "LowerPriority", "LowerOrNewerEqualPriority")),
        "reclaimWithinCohort": rnd.choice(("Never", "LowerPriority", "Any")),
    }
    if not fair and p["reclaimWithinCohort"] != "Never" and rnd.random() < 0.4:
        bwc: dict[str, Any] = {"policy": rnd.choice(("Never", "LowerPriority"))}
        if bwc["policy"] == "LowerPriority" and rnd.random() < 0.4:
            bwc["maxPriorityThreshold"] = rnd.choice((5, 15, 25))
        p["borrowWithinCohort"] = bwc
    return p


def _fungibility(rnd: random.Random) -> dict[str, Any]:
    f = {"whenCanBorrow": rnd.choice(("MayStopSearch", "TryNextFlavor")),
         "whenCanPreempt": rnd.choice(("MayStopSearch", "TryNextFlavor"))}
    if f["whenCanBorrow"] == f["whenCanPreempt"] == "TryNextFlavor" and rnd.random() < 0.5:
        f["preference"] = rnd.choice(("BorrowingOverPreemption", "PreemptionOverBorrowing"))
    return f


def _groups(rnd: random.Random, shape: Shape, in_cohort: bool) -> list[dict[str, Any]]:
    return [{"coveredResources": list(covered),
             "flavors": [{"name": f, "resources": [_quota(rnd, r, in_cohort) for r in covered]} for f in flavors]}
            for covered, flavors in shape.groups]


def _topology(rnd: random.Random, shape: Shape, fair: bool) -> tuple[list[dict[str, Any]], list[str]]:
    """Cohort objects and ClusterQueues; returns (objects, cluster queue names)."""
    kind = rnd.choice(("none", "flat", "flat", "tree")) if not fair else rnd.choice(("flat", "tree"))
    n = rnd.randint(1, 2) if kind == "none" else rnd.randint(2, 4)
    objects: list[dict[str, Any]] = []
    parents: list[str | None]
    if kind == "none":
        parents = [None] * n
    elif kind == "flat":
        parents = ["pool"] * n
    else:
        leaves = ["left", "right"]
        for leaf in leaves:
            spec: dict[str, Any] = {"parentName": "org"}
            if rnd.random() < 0.3:
                spec["resourceGroups"] = _groups(rnd, shape, in_cohort=True)
            if fair:
                spec["fairSharing"] = {"weight": rnd.choice(("1", "2", "500m"))}
            objects.append({"apiVersion": V, "kind": "Cohort", "metadata": {"name": leaf}, "spec": spec})
        if rnd.random() < 0.3:
            objects.append({"apiVersion": V, "kind": "Cohort", "metadata": {"name": "org"},
                            "spec": {"resourceGroups": _groups(rnd, shape, in_cohort=False)}})
        parents = [leaves[i % 2] if i < 2 else rnd.choice([*leaves, "org"]) for i in range(n)]
    names = []
    for i, parent in enumerate(parents):
        name = f"cq-{'abcd'[i]}"
        names.append(name)
        spec = {"namespaceSelector": {}, "queueingStrategy": rnd.choice(("BestEffortFIFO", "BestEffortFIFO",
                                                                          "StrictFIFO")),
                "preemption": _preemption(rnd, fair), "flavorFungibility": _fungibility(rnd),
                "resourceGroups": _groups(rnd, shape, in_cohort=parent is not None)}
        if parent is not None:
            spec["cohortName"] = parent
        if fair:
            spec["fairSharing"] = {"weight": rnd.choice(("1", "1", "2", "500m"))}
        objects.append({"apiVersion": V, "kind": "ClusterQueue", "metadata": {"name": name}, "spec": spec})
    return objects, names


def _pod_sets(rnd: random.Random, shape: Shape) -> list[dict[str, Any]]:
    resources = sorted({r for covered, _ in shape.groups for r in covered})
    sets = []
    for i in range(1 if rnd.random() < 0.8 else 2):
        requests: dict[str, Any] = {"cpu": str(rnd.choice((1, 1, 2, 3)))}
        if "memory" in resources and rnd.random() < 0.8:
            requests["memory"] = f"{rnd.choice((1, 2))}Gi"
        sets.append({"name": ("main", "worker")[i], "count": rnd.choice((1, 1, 2)), "requests": requests})
    return sets


def generate(seed: int) -> dict[str, Any]:
    """One scenario; the same seed always gives the same scenario."""
    rnd = random.Random(seed)
    fair = rnd.random() < 0.3
    shape = _shape(rnd)
    objects: list[dict[str, Any]] = [{"apiVersion": V, "kind": "ResourceFlavor", "metadata": {"name": f}}
                                     for f in shape.flavors]
    queue_objects, cqs = _topology(rnd, shape, fair)
    objects += queue_objects
    for cq in cqs:
        objects.append({"apiVersion": V, "kind": "LocalQueue", "metadata": {"name": f"lq-{cq[3:]}",
                        "namespace": f"team-{cq[3:]}"}, "spec": {"clusterQueue": cq}})
    capacity = Capacity(objects)
    workloads: list[dict[str, Any]] = []
    at = -10 * rnd.randint(6, 9)
    for i in range(rnd.randint(0, 5)):
        cq = rnd.choice(cqs)
        pod_sets = _pod_sets(rnd, shape)
        placed = capacity.place(cq, pod_sets, rnd)
        if placed is None:
            continue
        entry: dict[str, Any] = {"name": f"running-{i}", "namespace": f"team-{cq[3:]}", "queue": f"lq-{cq[3:]}",
                                 "priority": rnd.choice((0, 10, 20, 30)), "podSets": pod_sets,
                                 "admitted": {"clusterQueue": cq, "flavors": placed, "at": at}}
        if rnd.random() < 0.2:
            entry["runtime"] = rnd.choice(RUNTIMES) - at  # finishes a few seconds into the run
        workloads.append(entry)
        at += 10
    priorities = rnd.sample(range(1, 40), 6)
    later = rnd.random() < 0.4
    for i in range(rnd.randint(1, 6)):
        cq = rnd.choice(cqs)
        entry = {"name": f"job-{i}", "namespace": f"team-{cq[3:]}", "queue": f"lq-{cq[3:]}",
                 "priority": priorities[i], "podSets": _pod_sets(rnd, shape)}
        if later and i > 0 and rnd.random() < 0.6:
            entry["submitAt"] = 100 * i
        if rnd.random() < 0.2:
            entry["runtime"] = rnd.choice(RUNTIMES)
        workloads.append(entry)
    scenario: dict[str, Any] = {"name": f"random-{seed}", "description": f"generated by tests/differential (seed "
                                f"{seed})", "objects": objects, "workloads": workloads}
    if fair:
        scenario["settings"] = {"fairSharing": {"preemptionStrategies": rnd.choice((
            ["LessThanOrEqualToFinalShare", "LessThanInitialShare"], ["LessThanOrEqualToFinalShare"],
            ["LessThanInitialShare"]))}}
    return scenario
