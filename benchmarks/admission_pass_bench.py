"""CPU cost of one admission pass's decision at the size of Kueue's baseline benchmark, no API server.

Run: .venv/bin/python benchmarks/admission_pass_bench.py [--finished 9000] [--pending 5000] [--window 8]

Builds the baseline's 30 ClusterQueues (5 cohorts) and Workload objects as the runner creates them — finished,
admitted (quota full) and pending ones of the three classes — decodes them as the loop's watch does, then
times `decide` (the engine rebuilt and settled) and the queue-status tally, each repeated, and prints the
median in milliseconds. The pass of the live loop runs these once each, plus its writes.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "benchmarks"))

from admission_loop_bench import queue_objects  # noqa: E402

from gitopsq.admission_loop.decisions import decide  # noqa: E402
from gitopsq.admission_loop.live_workload import read_workload, topology_of  # noqa: E402
from gitopsq.admission_loop.workload_status import iso  # noqa: E402

CLASSES = (("small", 1, 50), ("medium", 5, 100), ("large", 20, 200))


def raw_workload(i: int, ns: str, *, cls: str, cpu: int, priority: int, state: str, now: float) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "metadata": {"name": f"{cls}-{i}", "namespace": ns, "uid": f"uid-{ns}-{cls}-{i}", "generation": 1,
                     "resourceVersion": str(i + 1), "creationTimestamp": iso(now - 60 + i * 0.001)},
        "spec": {"queueName": ns, "priority": priority, "podSets": [{"name": "main", "count": 1, "template": {
            "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": str(cpu)}}}]}}}]},
        "status": {"conditions": []}}  # fmt: skip
    if state in ("admitted", "finished"):
        obj["status"]["admission"] = {"clusterQueue": ns, "podSetAssignments": [
            {"name": "main", "flavors": {"cpu": "rf"}, "count": 1}]}
        obj["status"]["conditions"] = [
            {"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved", "message": "",
             "lastTransitionTime": iso(now - 1)},
            {"type": "Admitted", "status": "True", "reason": "Admitted", "message": "",
             "lastTransitionTime": iso(now - 1)}]
    if state == "finished":
        obj["status"]["conditions"].append({"type": "Finished", "status": "True", "reason": "Succeeded",
                                            "message": "", "lastTransitionTime": iso(now)})
    return obj


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--finished", type=int, default=9000)
    parser.add_argument("--pending", type=int, default=5000)
    parser.add_argument("--window", type=int, default=8)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--room", action="store_true", help="admitted ones are small: quota left for admissions")
    args = parser.parse_args()
    now = time.time()
    objects = [o for _, o in queue_objects(5, 6)]
    topology = topology_of(objects)
    queues = sorted(topology.queues)
    raws: list[dict[str, Any]] = []
    for n in range(args.finished + args.pending + len(queues)):
        ns = queues[n % len(queues)]
        cls, cpu, priority = CLASSES[(n // len(queues)) % 3]
        state = "finished" if n < args.finished else "pending"
        if n >= args.finished + args.pending:
            cls, cpu, priority, state = ("small", 1, 50, "admitted") if args.room else ("large", 20, 200, "admitted")
        raws.append(raw_workload(n, ns, cls=cls, cpu=cpu, priority=priority, state=state, now=now))
    live = {w.key: w for w in (read_workload(r) for r in raws) if w is not None}
    times = []
    for _ in range(args.repeat):
        started = time.process_time()
        decisions = decide(topology, live, now, 1, window=args.window)
        times.append(time.process_time() - started)
    print(f"{len(live)} workloads ({args.finished} finished, {args.pending} pending, {len(queues)} admitted), "
          f"window {args.window}: decide {1000 * statistics.median(times):.0f} ms (CPU, median of {args.repeat}); "
          f"{len(decisions.admit)} admissions, {len(decisions.pending)} reasons "
          f"({next((p.reason for p in decisions.pending.values()), '')})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
