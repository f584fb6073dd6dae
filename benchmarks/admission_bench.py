"""Admission engine throughput and memory (issue 4, "Performance").

Shape: 100 ClusterQueues in 10 cohorts (10 per cohort), one flavor, each queue nominal 20 cpu with a borrowing
limit of 20, ``reclaimWithinCohort: Any``, ``withinClusterQueue: LowerPriority``, ``borrowWithinCohort:
LowerPriority``; 10,000 pending workloads (100 per queue, 1–8 cpu, priorities 0–3), and 2 low-priority
workloads already running per queue so that preemption is exercised.

Figures printed:
- decisions/s settling the first instant (every pending workload admitted, or given its pending reason, plus
  every preemption), and again after 1,000 workloads finish (incremental rescheduling);
- memory per pending workload held by the engine (tracemalloc, after submission, before scheduling).

Run: ``.venv/bin/python benchmarks/admission_bench.py`` (one core; goals ≥ 10,000 decisions per cpu-second at
instant 0, ≤ 2 KB). It measures the engine the controller imports: compiled by mypyc when built (scripts/bootstrap,
`gitopsq.native`), which it prints first; ``GITOPSQ_ENGINE=python`` measures the pure Python modules.
"""

from __future__ import annotations

import random
import time
import tracemalloc

from gitopsq.admission.engine import Engine
from gitopsq.admission.topology import build_topology
from gitopsq.api import model as m
from gitopsq.api.codec import decode
from gitopsq.api.frozenmap import FrozenMap
from gitopsq.api.quantity import quantity

COHORTS, PER_COHORT, PER_QUEUE = 10, 10, 100
V = "kueue.x-k8s.io/v1beta2"


def objects() -> list[m.QueueObject]:
    docs: list[dict[str, object]] = [{"apiVersion": V, "kind": "ResourceFlavor", "metadata": {"name": "default"}}]
    for c in range(COHORTS):
        for i in range(PER_COHORT):
            name = f"cq-{c}-{i}"
            docs.append({"apiVersion": V, "kind": "ClusterQueue", "metadata": {"name": name}, "spec": {
                "cohortName": f"cohort-{c}", "namespaceSelector": {},
                "preemption": {"reclaimWithinCohort": "Any", "withinClusterQueue": "LowerPriority",
                               "borrowWithinCohort": {"policy": "LowerPriority"}},
                "resourceGroups": [{"coveredResources": ["cpu"], "flavors": [
                    {"name": "default", "resources": [{"name": "cpu", "nominalQuota": "20",
                                                       "borrowingLimit": "20"}]}]}]}})
            docs.append({"apiVersion": V, "kind": "LocalQueue", "metadata": {"name": "q", "namespace": name},
                         "spec": {"clusterQueue": name}})
    out = []
    for d in docs:
        obj = decode(d).obj
        assert obj is not None and not isinstance(obj, m.Workload)
        out.append(obj)
    return out


def pods(cpu: int) -> tuple[m.PodSet, ...]:
    return (m.PodSet(name="main", count=1, requests=FrozenMap({"cpu": quantity(str(cpu))})),)


def build(rng: random.Random) -> Engine:
    engine = Engine(build_topology(objects()))
    for c in range(COHORTS):
        for i in range(PER_COHORT):
            ns = f"cq-{c}-{i}"
            for r in range(2):
                key = f"{ns}/running-{r}"
                engine.submit(key=key, namespace=ns, queue="q", priority=0, created=-10.0, pod_sets=pods(8))
                engine.restore(key, cluster_queue=ns, flavors={"main": {"cpu": "default"}}, at=-10.0 + r)
    for n in range(PER_QUEUE):
        for c in range(COHORTS):
            for i in range(PER_COHORT):
                ns = f"cq-{c}-{i}"
                engine.submit(key=f"{ns}/w-{n}", namespace=ns, queue="q", priority=rng.randint(0, 3),
                              created=float(n), pod_sets=pods(rng.randint(1, 8)))
    return engine


def main() -> None:
    import gitopsq.admission

    print(f"admission engine: {gitopsq.admission.ENGINE}")
    rng = random.Random(4)
    engine = build(rng)
    start, cpu0 = time.perf_counter(), time.process_time()
    engine.schedule(0.0)
    first, first_cpu = time.perf_counter() - start, time.process_time() - cpu0
    events = engine.take_events()
    admitted = sum(1 for e in events if e.type == "QuotaReserved")
    preempted = sum(1 for e in events if e.type == "Preempted")
    pending = sum(1 for w in engine.state.workloads.values() if w.assignment is None)
    decisions = admitted + preempted + pending
    print(f"instant 0: {admitted} admitted, {preempted} preempted, {pending} pending with a reason "
          f"in {first:.3f} s wall, {first_cpu:.3f} s cpu -> {decisions / first:,.0f} decisions/s "
          f"({decisions / first_cpu:,.0f} per cpu-second)")

    running = sorted(k for k, w in engine.state.workloads.items() if w.assignment is not None)
    for key in rng.sample(running, len(running) // 2):
        engine.finish(key, 1.0)
    engine.take_events()
    start, cpu0 = time.perf_counter(), time.process_time()
    engine.schedule(1.0)
    second, second_cpu = time.perf_counter() - start, time.process_time() - cpu0
    events = engine.take_events()
    admitted = sum(1 for e in events if e.type == "QuotaReserved")
    preempted = sum(1 for e in events if e.type == "Preempted")
    pending = sum(1 for w in engine.state.workloads.values() if w.assignment is None)
    decisions = admitted + preempted + pending
    print(f"instant 1 (half the running finished): {admitted} admitted, {preempted} preempted, {pending} pending "
          f"in {second:.3f} s wall, {second_cpu:.3f} s cpu -> {decisions / second:,.0f} decisions/s "
          f"({decisions / second_cpu:,.0f} per cpu-second)")

    tracemalloc.start()
    fresh = Engine(build_topology(objects()))
    base = tracemalloc.take_snapshot()
    for n in range(PER_QUEUE):
        for c in range(COHORTS):
            for i in range(PER_COHORT):
                ns = f"cq-{c}-{i}"
                fresh.submit(key=f"{ns}/w-{n}", namespace=ns, queue="q", priority=rng.randint(0, 3),
                             created=float(n), pod_sets=pods(rng.randint(1, 8)))
    grown = tracemalloc.take_snapshot().compare_to(base, "filename")
    total = sum(stat.size_diff for stat in grown)
    tracemalloc.stop()
    count = COHORTS * PER_COHORT * PER_QUEUE
    print(f"memory: {total / count:,.0f} bytes per pending workload ({count} pending, tracemalloc)")


if __name__ == "__main__":
    main()
