"""End-to-end admission throughput on the real API server, in the shape of Kueue's scheduler benchmark.

Run: .venv/bin/python benchmarks/admission_loop_bench.py [--scale 0.2] [--qps 50] [--memory-workloads 10000]

Shape (research/kueue.md §6.2, ``configs/baseline``): one ResourceFlavor; 5 cohorts × 6 ClusterQueues, each with
nominalQuota 20 cpu, borrowingLimit 100, reclaimWithinCohort Any, withinClusterQueue LowerPriority, its own
namespace and LocalQueue. Per ClusterQueue three classes of Workloads are created concurrently, sleeping the
class's interval before each: small (1 cpu, 100 ms, runs 200 ms, priority 50), medium (5 cpu, 500 ms, 500 ms,
100), large (20 cpu, 1200 ms, 1000 ms, 200). Upstream creates 350/100/50 per queue (15,000); ``--scale`` cuts the
counts (default 0.2: 3,000 Workloads) so that a run stays within a few minutes at 50 requests/s, and says so.
Like Kueue's runner, this script finishes each Workload ``runtime`` after it sees it Admitted (Finished=True)
and measures time to admission from creation to the Admitted event it observes.

The admission loop runs as it ships (``gitopsq controller --admission-only`` with the Helm chart's defaults: leader
election on a Lease, events on, metrics and health served on loopback) with its client limited to ``--qps``
(burst 2×), as minimalkueue is (QPS 50, burst 100); the Job webhook is off (nothing here makes Jobs). A second
phase creates ``--memory-workloads`` pending Workloads in one queue with no quota and reports the loop's peak RSS
once its LocalQueue's status counts them all.
"""

from __future__ import annotations

import argparse
import copy
import heapq
import json
import math
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "hack" / "envtest"))

from envtestrig import Rig, prepare  # noqa: E402

from gitopsq.admission_loop.watch_cache import _events  # noqa: E402
from gitopsq.cluster.apply import KubeRest  # noqa: E402
from gitopsq.cluster.crds import install_crds  # noqa: E402
from gitopsq.cluster.kube import ClusterConflict, load_api_client  # noqa: E402

CLASSES = {  # name: (count per CQ upstream, creation interval s, runtime s, priority, cpu)
    "small": (350, 0.1, 0.2, 50, 1),
    "medium": (100, 0.5, 0.5, 100, 5),
    "large": (50, 1.2, 1.0, 200, 20),
}
KUEUE_MEAN_ADMISSION_MS = {"large": 16_501, "medium": 76_768, "small": 215_468}  # baseline, 15,000 workloads
KUEUE = {"wall_ms": 351_116, "cq_usage_pct": 55.9, "admissions_per_s": 43}
WL = "/apis/kueue.x-k8s.io/v1beta2"


@dataclass
class Observed:
    cls: str
    cpu: int
    created: float
    admitted: float | None = None
    finished: float | None = None
    admissions: int = 0
    intervals: list[tuple[float, float]] = field(default_factory=list)


def queue_objects(cohorts: int, per_cohort: int) -> Iterator[tuple[str, dict[str, Any]]]:
    yield f"{WL}/resourceflavors", {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor",
                                    "metadata": {"name": "rf"}}
    for c in range(cohorts):
        for q in range(per_cohort):
            name = f"cq-{c}-{q}"
            yield "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
            yield f"{WL}/clusterqueues", {
                "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": name},
                "spec": {"cohortName": f"cohort-{c}", "namespaceSelector": {},
                         "preemption": {"reclaimWithinCohort": "Any", "withinClusterQueue": "LowerPriority"},
                         "resourceGroups": [{"coveredResources": ["cpu"], "flavors": [{"name": "rf", "resources": [
                             {"name": "cpu", "nominalQuota": "20", "borrowingLimit": "100"}]}]}]}}
            yield f"{WL}/namespaces/{name}/localqueues", {
                "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
                "metadata": {"name": name, "namespace": name}, "spec": {"clusterQueue": name}}


def workload(name: str, ns: str, cls: str, cpu: int, priority: int) -> dict[str, Any]:
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
            "metadata": {"name": name, "namespace": ns, "labels": {"bench/class": cls}},
            "spec": {"queueName": ns, "priority": priority, "podSets": [{"name": "main", "count": 1, "template": {
                "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "pause", "resources": {
                    "requests": {"cpu": str(cpu)}}}]}}}]}}


def is_true(obj: dict[str, Any], kind: str) -> bool:
    return any(c.get("type") == kind and c.get("status") == "True"
               for c in (obj.get("status") or {}).get("conditions") or ())


class Runner:
    """Creates the trace, watches Workloads, finishes admitted ones after their runtime."""

    def __init__(self, rest: KubeRest) -> None:
        self.rest = rest
        self.seen: dict[str, Observed] = {}
        self.latest: dict[str, dict[str, Any]] = {}
        self.timers: list[tuple[float, str, int]] = []
        self.lock = threading.Condition()
        self.stop = threading.Event()
        self.start = time.monotonic()

    def create(self, ns: str, cls: str, count: int) -> None:
        _, interval, _, priority, cpu = CLASSES[cls]
        for i in range(count):
            time.sleep(interval)
            name = f"{cls}-{i}"
            key = f"{ns}/{name}"
            with self.lock:
                self.seen[key] = Observed(cls, cpu, time.monotonic())
            self.rest.request("POST", f"{WL}/namespaces/{ns}/workloads", body=workload(name, ns, cls, cpu, priority))

    def watch(self, rv: str) -> None:
        client = self.rest.api_client
        while not self.stop.is_set():
            request = client.param_serialize("GET", f"{WL}/workloads", query_params=[
                ("watch", "1"), ("resourceVersion", rv), ("timeoutSeconds", "60")], header_params={
                "Accept": "application/json"}, auth_settings=["BearerToken"])
            response = client.call_api(*request, _request_timeout=(10, 90))
            try:
                for event in _events(response.response):
                    obj = event["object"]
                    rv = obj["metadata"].get("resourceVersion", rv)
                    if event["type"] in ("ADDED", "MODIFIED"):
                        self.observe(obj)
            except Exception:  # the stream ended (shutdown or timeout): watch again from rv
                continue

    def observe(self, obj: dict[str, Any]) -> None:
        key = f"{obj['metadata']['namespace']}/{obj['metadata']['name']}"
        now = time.monotonic()
        with self.lock:
            seen = self.seen.get(key)
            self.latest[key] = obj
            if seen is None or seen.finished is not None:
                return
            admitted = is_true(obj, "Admitted") and not is_true(obj, "Evicted")
            running = bool(seen.intervals) and math.isnan(seen.intervals[-1][1])  # open interval
            if admitted and not running:
                if seen.admitted is None:
                    seen.admitted = now
                seen.admissions += 1
                seen.intervals.append((now, float("nan")))
                runtime = CLASSES[seen.cls][2]
                heapq.heappush(self.timers, (now + runtime, key, seen.admissions))
                self.lock.notify()
            elif not admitted and running:
                seen.intervals[-1] = (seen.intervals[-1][0], now)  # evicted: stops using quota

    def finisher(self) -> None:
        while not self.stop.is_set():
            with self.lock:
                while not self.timers or self.timers[0][0] > time.monotonic():
                    self.lock.wait(0.01 if self.timers else 0.2)
                    if self.stop.is_set():
                        return
                _, key, generation = heapq.heappop(self.timers)
                seen = self.seen[key]
                obj = copy.deepcopy(self.latest[key])
                if seen.admissions != generation or not is_true(obj, "Admitted") or is_true(obj, "Evicted"):
                    continue
            conditions = [*obj["status"]["conditions"], {
                "type": "Finished", "status": "True", "reason": "ByTest", "message": "runtime elapsed",
                "lastTransitionTime": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}]
            ns, name = key.split("/")
            try:
                self.rest.request("PATCH", f"{WL}/namespaces/{ns}/workloads/{name}/status", body={
                    "metadata": {"resourceVersion": obj["metadata"]["resourceVersion"]},
                    "status": {"conditions": conditions}}, content_type="application/merge-patch+json")
            except ClusterConflict:
                with self.lock:  # changed meanwhile: look again shortly
                    heapq.heappush(self.timers, (time.monotonic() + 0.05, key, generation))
                continue
            now = time.monotonic()
            with self.lock:
                seen.finished = now
                seen.intervals[-1] = (seen.intervals[-1][0], now)


def rss_kib(pid: int) -> tuple[int, int]:
    fields = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines() if ":" in line)
    return int(fields["VmRSS"].split()[0]), int(fields["VmHWM"].split()[0])


def start_loop(kubeconfig: Path, qps: float) -> tuple[subprocess.Popen[bytes], Path]:
    """The shipped controller in admission mode as its own process; its JSON log goes beside the kubeconfig."""
    path = kubeconfig.parent / f"loop-{time.monotonic_ns()}.log"
    subprocess.run(["kubectl", "--kubeconfig", str(kubeconfig), "create", "namespace", "gitopsq-system"],
                   capture_output=True, check=False)  # the Lease's and the Events' namespace; may exist already
    with path.open("wb") as log:
        proc = subprocess.Popen([sys.executable, "-m", "gitopsq", "controller", "--admission-only",
                                 f"--kubeconfig={kubeconfig}", "--namespace=gitopsq-system", "--leader-elect",
                                 "--health-addr=127.0.0.1:0", "--metrics-addr=127.0.0.1:0", "--webhook-addr=",
                                 "--qps", str(qps), "--burst", str(int(qps * 2))],
                                stdout=log, stderr=subprocess.STDOUT)
    return proc, path


def loop_requests(log: Path) -> str:
    """The request counts the loop logs when it stops."""
    for line in reversed(log.read_text().splitlines()):
        if "admission loop stopped" in line:
            try:
                record = json.loads(line)
            except ValueError:
                return line.split("admission loop stopped", 1)[1].strip()
            return (f"requests {record['requests']}, passes {record['passes']}, "
                    f"throttled {record['throttled_seconds']} s")
    return "no request log; log tail: " + " | ".join(log.read_text().splitlines()[-3:])


def cpu_seconds(pid: int) -> float:
    parts = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(parts[11]) + int(parts[12])) / os.sysconf("SC_CLK_TCK")


def throughput(rig: Rig, args: argparse.Namespace) -> None:
    api = load_api_client(str(rig.kubeconfig))
    api.configuration.connection_pool_maxsize = 128
    from kubernetes import client as k8s_client

    rest = KubeRest(k8s_client.ApiClient(api.configuration))
    for path, body in queue_objects(5, 6):
        rest.request("POST", path, body=body)
    counts = {cls: max(1, round(CLASSES[cls][0] * args.scale)) for cls in CLASSES}
    total = 30 * sum(counts.values())
    print(f"shape: 30 ClusterQueues in 5 cohorts; per queue small {counts['small']}, medium {counts['medium']}, "
          f"large {counts['large']} ({total} Workloads; upstream 15,000 — scale {args.scale})")
    loop, log = start_loop(rig.kubeconfig, args.qps)
    runner = Runner(rest)
    rv = rest.request("GET", f"{WL}/workloads", query=[("limit", "1")])["metadata"]["resourceVersion"]
    threads = [threading.Thread(target=runner.watch, args=(rv,), daemon=True),
               threading.Thread(target=runner.finisher, daemon=True)]
    time.sleep(2.0)  # the loop's cache syncs
    started = time.monotonic()
    creators = [threading.Thread(target=runner.create, args=(f"cq-{c}-{q}", cls, counts[cls]), daemon=True)
                for c in range(5) for q in range(6) for cls in CLASSES]
    for t in threads + creators:
        t.start()
    deadline = started + args.timeout
    while time.monotonic() < deadline:
        with runner.lock:
            done = sum(1 for s in runner.seen.values() if s.finished is not None)
        if done == total:
            break
        time.sleep(0.5)
    wall = time.monotonic() - started
    loop_cpu = cpu_seconds(loop.pid)
    _, hwm = rss_kib(loop.pid)
    runner.stop.set()
    loop.send_signal(signal.SIGTERM)
    loop.wait(30)
    print("controller", loop_requests(log))
    seen = list(runner.seen.values())
    admitted = [s for s in seen if s.admitted is not None]
    admits = sorted(s.admitted for s in admitted if s.admitted is not None)
    span = (admits[-1] - admits[0]) if len(admits) > 1 else float("nan")
    first = min(s.created for s in seen)
    end = max((s.finished or 0.0) for s in seen)
    used = sum(s.cpu * (b - a) for s in seen for a, b in s.intervals if not math.isnan(b))
    utilisation = 100.0 * used / (30 * 20 * (end - first)) if end > first else float("nan")
    print(f"finished {sum(s.finished is not None for s in seen)}/{total} in {wall:.1f} s wall "
          f"(Kueue baseline: {KUEUE['wall_ms'] / 1000:.0f} s for 15,000)")
    print(f"admissions/s end to end: {len(admits) / span:.1f} over {span:.1f} s "
          f"(Kueue ≈ {KUEUE['admissions_per_s']}/s at QPS 50); client limit {args.qps:g} req/s")
    print(f"ClusterQueue usage: {utilisation:.1f} % of nominal (Kueue baseline {KUEUE['cq_usage_pct']} %, "
          "min 50 %)")
    for cls in CLASSES:
        waits = [(s.admitted - s.created) * 1000 for s in admitted if s.cls == cls and s.admitted is not None]
        mean = sum(waits) / len(waits) if waits else float("nan")
        print(f"mean time to admission {cls:>6}: {mean:9.0f} ms over {len(waits)} "
              f"(Kueue baseline {KUEUE_MEAN_ADMISSION_MS[cls]} ms at 15,000 workloads)")
    preempted = sum(max(0, s.admissions - 1) for s in seen)
    print(f"re-admissions after preemption: {preempted}; controller CPU {loop_cpu:.1f} s, peak RSS "
          f"{hwm / 1024:.0f} MiB")


def memory(rig: Rig, args: argparse.Namespace) -> None:
    rest = KubeRest(load_api_client(str(rig.kubeconfig)))
    ns = "memory"
    if args.skip_throughput:
        rest.request("POST", f"{WL}/resourceflavors", body={"apiVersion": "kueue.x-k8s.io/v1beta2",
                                                            "kind": "ResourceFlavor", "metadata": {"name": "rf"}})
    rest.request("POST", "/api/v1/namespaces", body={"apiVersion": "v1", "kind": "Namespace",
                                                     "metadata": {"name": ns}})
    rest.request("POST", f"{WL}/clusterqueues", body={
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": "tiny"},
        "spec": {"namespaceSelector": {}, "resourceGroups": [{"coveredResources": ["cpu"], "flavors": [
            {"name": "rf", "resources": [{"name": "cpu", "nominalQuota": "0"}]}]}]}})
    rest.request("POST", f"{WL}/namespaces/{ns}/localqueues", body={
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue", "metadata": {"name": ns, "namespace": ns},
        "spec": {"clusterQueue": "tiny"}})
    created = time.monotonic()
    pool = [threading.Thread(target=lambda k=k: [rest.request(
        "POST", f"{WL}/namespaces/{ns}/workloads", body=workload(f"w-{k}-{i}", ns, "small", 1, 50))
        for i in range(args.memory_workloads // 8)]) for k in range(8)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    print(f"created {args.memory_workloads} pending Workloads in {time.monotonic() - created:.0f} s")
    loop, _ = start_loop(rig.kubeconfig, args.memory_qps)
    started = time.monotonic()
    while time.monotonic() - started < args.timeout:
        # Kueue writes a pending reason for the queue heads only (as gitopsq does): the loop has taken in every
        # Workload when the LocalQueue's status counts them all.
        queue = rest.request("GET", f"{WL}/namespaces/{ns}/localqueues/{ns}")
        if (queue.get("status") or {}).get("pendingWorkloads") == args.memory_workloads // 8 * 8:
            break
        time.sleep(2)
    settled = time.monotonic() - started
    time.sleep(2)
    rss, hwm = rss_kib(loop.pid)
    loop.send_signal(signal.SIGTERM)
    loop.wait(30)
    print(f"controller memory with {args.memory_workloads} Workloads in flight: RSS {rss / 1024:.0f} MiB, peak "
          f"{hwm / 1024:.0f} MiB (all counted in the LocalQueue's status {settled:.0f} s after start at "
          f"{args.memory_qps:g} req/s; Kueue's baseline asserted maxrss ≈ 445 MiB)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scale", type=float, default=0.2)
    parser.add_argument("--qps", type=float, default=50.0)
    parser.add_argument("--timeout", type=float, default=600.0)
    parser.add_argument("--memory-workloads", type=int, default=10_000)
    parser.add_argument("--memory-qps", type=float, default=500.0)
    parser.add_argument("--skip-memory", action="store_true")
    parser.add_argument("--skip-throughput", action="store_true")
    args = parser.parse_args()
    binaries = prepare(log=False)
    print(f"machine: {os.cpu_count()} cores; rig: kube-apiserver + etcd on loopback")
    with tempfile.TemporaryDirectory(prefix="gitopsq-bench-") as tmp:
        rig = Rig.start(binaries, Path(tmp) / "rig")
        try:
            with load_api_client(str(rig.kubeconfig)) as api:
                install_crds(api)
            if not args.skip_throughput:
                throughput(rig, args)
            if not args.skip_memory:
                memory(rig, args)
        finally:
            rig.stop()
    print(json.dumps({"note": "figures above; see docs/admission-loop.md for how to read them"}))


if __name__ == "__main__":
    main()
