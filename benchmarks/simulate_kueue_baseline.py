"""Kueue's scheduler benchmark shape (test/performance/scheduler configs/baseline) replayed in `simulate`.

5 cohorts × 6 ClusterQueues, each nominal 20 cpu with borrowingLimit 100, ``reclaimWithinCohort: Any``,
``withinClusterQueue: LowerPriority``. Per ClusterQueue (15,000 workloads in all):

    class   count  interval  runtime  priority  cpu
    small   350    100 ms    200 ms   50        1
    medium  100    500 ms    500 ms   100       5
    large   50     1200 ms   1000 ms  200       20

Each class creates its workloads one interval apart (the runner sleeps before each creation). Printed: the
wall time of the replay (goal ≤ 30 s), the utilisation as Kueue's checker defines it (Σ∫usage over Σ nominal ×
the span between the first and the last event) and the mean time to admission per class (creation → last
Admitted), next to Kueue's published baseline averages (shared/research/kueue.md §6.2).

Run: ``.venv/bin/python benchmarks/simulate_kueue_baseline.py``
"""

from __future__ import annotations

import time

from gitopsq.admission.topology import Settings
from gitopsq.api import model as m
from gitopsq.api.codec import decode
from gitopsq.api.frozenmap import FrozenMap
from gitopsq.api.quantity import quantity
from gitopsq.simulate.replay import simulate
from gitopsq.simulate.result import Result
from gitopsq.simulate.scenario import Scenario, TraceWorkload

V = "kueue.x-k8s.io/v1beta2"
COHORTS, QUEUES_PER_COHORT = 5, 6
CLASSES = {  # name: (count per queue, interval ms, runtime ms, priority, cpu)
    "small": (350, 100, 200, 50, 1),
    "medium": (100, 500, 500, 100, 5),
    "large": (50, 1200, 1000, 200, 20),
}
KUEUE_MEAN_ADMISSION_MS = {"small": 215_468, "medium": 76_768, "large": 16_501}  # Kueue CI averages


def _decode(doc: dict[str, object]) -> m.QueueObject:
    obj = decode(doc).obj
    assert obj is not None and not isinstance(obj, m.Workload)
    return obj


def scenario() -> Scenario:
    objects = [_decode({"apiVersion": V, "kind": "ResourceFlavor", "metadata": {"name": "rf"}})]
    workloads: list[TraceWorkload] = []
    for c in range(COHORTS):
        for q in range(QUEUES_PER_COHORT):
            name = f"cq-{c}-{q}"
            objects.append(_decode({"apiVersion": V, "kind": "ClusterQueue", "metadata": {"name": name}, "spec": {
                "cohortName": f"cohort-{c}", "namespaceSelector": {},
                "preemption": {"reclaimWithinCohort": "Any", "withinClusterQueue": "LowerPriority"},
                "resourceGroups": [{"coveredResources": ["cpu"], "flavors": [{"name": "rf", "resources": [
                    {"name": "cpu", "nominalQuota": "20", "borrowingLimit": "100"}]}]}]}}))
            objects.append(_decode({"apiVersion": V, "kind": "LocalQueue",
                                    "metadata": {"name": name, "namespace": name}, "spec": {"clusterQueue": name}}))
            for cls, (count, interval, runtime, priority, cpu) in CLASSES.items():
                pods = (m.PodSet(name="main", count=1, requests=FrozenMap({"cpu": quantity(str(cpu))})),)
                workloads.extend(
                    TraceWorkload(name=f"{cls}-{i}", namespace=name, queue=name, priority=priority,
                                  priority_class=None, submit_at=(i + 1) * interval / 1000, runtime=runtime / 1000,
                                  pod_sets=pods)
                    for i in range(count))
    workloads.sort(key=lambda t: t.submit_at)
    return Scenario(name="kueue-scheduler-baseline", file="<generated>", settings=Settings(),
                    objects=tuple(objects), workloads=tuple(workloads))


def utilisation(result: Result, nominal_milli: int) -> float:
    """Kueue's checker: Σ∫usage dt ×100 / (Σ nominal × (last event − first event))."""
    first, last = result.events[0].time, result.events[-1].time
    integral = 0.0
    points = list(result.timeline)
    for (t0, usage), (t1, _) in zip(points, [*points[1:], (last, {})], strict=True):
        span = max(0.0, min(t1, last) - max(t0, first))
        integral += span * sum(v for per_cq in usage.values() for v in per_cq.values())
    return integral * 100 / (nominal_milli * (last - first))


def main() -> None:
    sc = scenario()
    start_wall, start_cpu = time.perf_counter(), time.process_time()
    result = simulate(sc)
    wall, cpu = time.perf_counter() - start_wall, time.process_time() - start_cpu
    submitted = {f"{t.namespace}/{t.name}": t.submit_at for t in sc.workloads}
    admitted_at: dict[str, float] = {}
    for e in result.events:
        if e.type == "Admitted":
            admitted_at[e.workload] = e.time
    print(f"replayed {len(sc.workloads):,} workloads over {len(result.queues)} ClusterQueues: wall {wall:.1f} s "
          f"(cpu {cpu:.1f} s), simulated span {result.events[-1].time:.1f} s, {result.count('Admitted'):,} "
          f"admissions, {result.count('Preempted'):,} preemptions")
    nominal = COHORTS * QUEUES_PER_COHORT * 20_000
    print(f"utilisation: {utilisation(result, nominal):.1f} % (Kueue baseline average 55.9 %, threshold ≥ 50 %)")
    for cls in CLASSES:
        waits = [admitted_at[k] - submitted[k] for k in submitted if k.split("/")[1].startswith(cls + "-")
                 and k in admitted_at]
        mean_ms = 1000 * sum(waits) / len(waits) if waits else float("nan")
        print(f"mean time to admission, {cls:<6}: {mean_ms:>10,.0f} ms over {len(waits):,} workloads "
              f"(Kueue baseline average {KUEUE_MEAN_ADMISSION_MS[cls]:,} ms)")


if __name__ == "__main__":
    main()
