"""Admission latency of JobSets next to batch Jobs, on the full rig: from the object's creation to every one of its
pods being scheduled (``spec.nodeName`` set on a KWOK node).

Run: .venv/bin/python benchmarks/jobset_latency.py [--count 200] [--rate 4] [--qps 50]

The rig is the full profile (kube-apiserver, etcd, kube-controller-manager, kube-scheduler, KWOK and the real JobSet
controller with its webhooks; docs/envtest.md). gitopsq runs as the chart runs it: ``gitopsq controller
--admission-only --integrations batch/job,jobset.x-k8s.io/jobset`` as its own process (no leader election, no
webhook: objects are created suspended, as the webhook would make them). One ClusterQueue over one flavor has quota
for everything and the fake nodes room for every pod, so the figure is the path itself — Workload creation,
admission, unsuspension, the operators making Jobs and pods, the scheduler binding them — not queueing for quota.

Phase 1 creates ``--count`` batch Jobs of 3 pods (parallelism 3) at ``--rate`` per second; phase 2 creates
``--count`` JobSets of the same shape (a 1-pod driver and a 2-pod worker replicated job: 3 pods, the same
requests), also at ``--rate``. A watch on pods records when each pod is first seen bound; an object's latency is
the time from just before its POST to its last pod bound. Prints the median, p90, p99 and max per phase, the CPU
seconds each process of the path used in each phase (to find the stage that limits the rate), gitopsq's request
counts, and the load average (the machine is shared: state it with the figures).
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "hack" / "envtest"))

from envtestrig import Rig, prepare  # noqa: E402

from gitopsq.admission_loop.watch_cache import _events  # noqa: E402
from gitopsq.cluster.apply import KubeRest  # noqa: E402
from gitopsq.cluster.crds import install_crds  # noqa: E402
from gitopsq.cluster.kube import load_api_client  # noqa: E402

WL = "/apis/kueue.x-k8s.io/v1beta2"
NS = "bench"
PODS = 3
JOBSET_LABEL = "jobset.sigs.k8s.io/jobset-name"
JOB_LABEL = "batch.kubernetes.io/job-name"


def node(name: str) -> dict[str, Any]:
    capacity = {"cpu": "64", "memory": "256Gi", "pods": "250"}
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "annotations": {"kwok.x-k8s.io/node": "fake"},
                         "labels": {"kubernetes.io/hostname": name, "pool": "bench"}},
            "spec": {}, "status": {"capacity": capacity, "allocatable": dict(capacity)}}


def pod_template(name: str) -> dict[str, Any]:
    return {"spec": {"restartPolicy": "Never", "containers": [
        {"name": name, "image": "example.invalid/train:1", "resources": {"requests": {"cpu": "100m"}}}]}}


def batch_job(name: str) -> dict[str, Any]:
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "namespace": NS, "labels": {"kueue.x-k8s.io/queue-name": "queue"}},
            "spec": {"suspend": True, "parallelism": PODS, "completions": PODS, "template": pod_template("main")}}


def jobset(name: str) -> dict[str, Any]:
    def rjob(rname: str, pods: int) -> dict[str, Any]:
        return {"name": rname, "replicas": 1, "template": {"spec": {
            "parallelism": pods, "completions": pods, "backoffLimit": 0, "template": pod_template(rname)}}}
    return {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
            "metadata": {"name": name, "namespace": NS, "labels": {"kueue.x-k8s.io/queue-name": "queue"}},
            "spec": {"suspend": True, "replicatedJobs": [rjob("driver", 1), rjob("workers", PODS - 1)]}}


class PodWatch:
    """Watches pods in the namespace; per owner (Job or JobSet name) the time its last pod was first seen bound."""

    def __init__(self, rest: KubeRest, label: str) -> None:
        self.rest, self.label = rest, label
        self.bound: dict[str, set[str]] = {}
        self.done: dict[str, float] = {}
        self.lock = threading.Lock()
        self.stop = threading.Event()

    def run(self, rv: str) -> None:
        client = self.rest.api_client
        while not self.stop.is_set():
            request = client.param_serialize("GET", f"/api/v1/namespaces/{NS}/pods", query_params=[
                ("watch", "1"), ("resourceVersion", rv), ("timeoutSeconds", "30"),
                ("labelSelector", self.label)], header_params={"Accept": "application/json"},
                auth_settings=["BearerToken"])
            response = client.call_api(*request, _request_timeout=(10, 60))
            try:
                for event in _events(response.response):
                    obj = event["object"]
                    rv = obj["metadata"].get("resourceVersion", rv)
                    if event["type"] in ("ADDED", "MODIFIED") and (obj.get("spec") or {}).get("nodeName"):
                        self._bound(obj)
            except Exception:  # the stream ended (timeout or shutdown): watch again from rv
                continue

    def _bound(self, pod: dict[str, Any]) -> None:
        owner = pod["metadata"]["labels"][self.label]
        now = time.monotonic()
        with self.lock:
            names = self.bound.setdefault(owner, set())
            names.add(pod["metadata"]["name"])
            if len(names) >= PODS and owner not in self.done:
                self.done[owner] = now


def phase(rest: KubeRest, kind: str, count: int, rate: float, timeout: float) -> list[float]:
    """Create ``count`` objects of ``kind`` at ``rate``/s; latencies (s) from POST to the last pod bound."""
    label, path, build = (JOB_LABEL, f"/apis/batch/v1/namespaces/{NS}/jobs", batch_job) if kind == "Job" else \
        (JOBSET_LABEL, f"/apis/jobset.x-k8s.io/v1alpha2/namespaces/{NS}/jobsets", jobset)
    rv = rest.request("GET", f"/api/v1/namespaces/{NS}/pods", query=(("limit", "1"),))["metadata"]["resourceVersion"]
    watch = PodWatch(rest, label)
    thread = threading.Thread(target=watch.run, args=(rv,), daemon=True)
    thread.start()
    created: dict[str, float] = {}
    start = time.monotonic()
    for i in range(count):
        time.sleep(max(0.0, start + i / rate - time.monotonic()))
        name = f"{kind.lower()}-{i}"
        created[name] = time.monotonic()
        rest.request("POST", path, body=build(name))
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and len(watch.done) < count:
        time.sleep(0.2)
    watch.stop.set()
    missing = count - len(watch.done)
    if missing:
        print(f"  {kind}: {missing} of {count} not fully scheduled within {timeout:.0f} s (left out of the figures)")
    return [watch.done[n] - t for n, t in created.items() if n in watch.done]


def cpu_seconds(pid: int) -> float:
    try:
        parts = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(parts[11]) + int(parts[12])) / os.sysconf("SC_CLK_TCK")


def processes(rig: Rig, controller: subprocess.Popen[bytes]) -> dict[str, int]:
    state = rig.state
    return {"gitopsq": controller.pid, "kube-apiserver": state.apiserver_pid, "etcd": state.etcd_pid,
            "controller-manager": state.controller_manager_pid, "scheduler": state.scheduler_pid,
            "kwok": state.kwok_pid, "jobset": state.jobset_pid}


def measured(rig: Rig, controller: subprocess.Popen[bytes], run: Any) -> tuple[list[float], str]:
    """``run()``'s latencies and the CPU seconds each process used meanwhile."""
    pids = processes(rig, controller)
    before = {name: cpu_seconds(pid) for name, pid in pids.items()}
    started = time.monotonic()
    latencies = run()
    wall = time.monotonic() - started
    used = ", ".join(f"{name} {cpu_seconds(pid) - before[name]:.1f}" for name, pid in pids.items())
    return latencies, f"CPU seconds over {wall:.0f} s: {used}"


def report(kind: str, latencies: list[float]) -> None:
    ordered = sorted(latencies)
    if not ordered:
        print(f"  {kind}: no figures")
        return

    def pct(p: float) -> float:
        return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]
    print(f"  {kind:6s} n={len(ordered):3d}  median {statistics.median(ordered):6.2f} s  p90 {pct(90):6.2f} s  "
          f"p99 {pct(99):6.2f} s  max {ordered[-1]:6.2f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--count", type=int, default=200)
    parser.add_argument("--rate", type=float, default=4.0, help="creations per second")
    parser.add_argument("--qps", type=float, default=50.0, help="the controller's admission-loop QPS")
    parser.add_argument("--nodes", type=int, default=10)
    parser.add_argument("--timeout", type=float, default=600.0, help="per phase, after the last creation")
    parser.add_argument("--controller-manager-qps", type=float, default=0.0,
                        help="restart the rig's kube-controller-manager with this client QPS (burst 2x); 0: upstream's "
                             "default (20, burst 30)")
    args = parser.parse_args()
    binaries = prepare(full=True, log=False)
    print(f"machine: {os.cpu_count()} cores; load average at start {os.getloadavg()}")
    with tempfile.TemporaryDirectory(prefix="gitopsq-jobset-bench-") as tmp:
        rig = Rig.start(binaries, Path(tmp) / "rig", full=True)
        controller = None
        try:
            if args.controller_manager_qps:
                raise_controller_manager_qps(rig, args.controller_manager_qps)
            with load_api_client(str(rig.kubeconfig)) as api:
                install_crds(api)
                rest = KubeRest(api)
                for i in range(args.nodes):
                    manifest = node(f"bench-{i}")
                    rest.request("POST", "/api/v1/nodes", body=manifest)
                    rest.request("PATCH", f"/api/v1/nodes/bench-{i}/status", body={"status": manifest["status"]},
                                 content_type="application/merge-patch+json")
                while sum(1 for n in rest.request("GET", "/api/v1/nodes")["items"] if any(
                        c["type"] == "Ready" and c["status"] == "True"
                        for c in (n.get("status") or {}).get("conditions") or ())) < args.nodes:
                    time.sleep(0.2)  # KWOK makes them Ready
                rest.request("POST", "/api/v1/namespaces", body={"apiVersion": "v1", "kind": "Namespace",
                                                                 "metadata": {"name": NS}})
                for path, body in queue_objects(args.count):
                    rest.request("POST", path, body=body)
                while not rest.request("GET", f"/api/v1/namespaces/{NS}/serviceaccounts")["items"]:
                    time.sleep(0.2)  # pods are refused until the default ServiceAccount exists
                log = Path(tmp) / "controller.log"
                with log.open("wb") as out:
                    controller = subprocess.Popen(
                        [sys.executable, "-m", "gitopsq", "controller", "--admission-only", "--no-leader-elect",
                         "--kubeconfig", str(rig.kubeconfig), "--integrations", "batch/job,jobset.x-k8s.io/jobset",
                         "--qps", str(args.qps), "--burst", str(int(args.qps * 2)), "--health-addr",
                         "127.0.0.1:0", "--metrics-addr", "", "--log-format", "json"],
                        stdout=out, stderr=subprocess.STDOUT, env={**os.environ, "PYTHONPATH": str(REPO)})
                time.sleep(5.0)  # the controller syncs its cache and picks up the JobSet CRD
                print(f"{args.count} of each, created at {args.rate}/s, {PODS} pods each; "
                      f"controller qps {args.qps}")
                jobs, cpu = measured(rig, controller, lambda: phase(rest, "Job", args.count, args.rate, args.timeout))
                print(f"  Jobs: {cpu}; load average after: {os.getloadavg()}")
                jobsets, cpu = measured(rig, controller,
                                        lambda: phase(rest, "JobSet", args.count, args.rate, args.timeout))
                print(f"  JobSets: {cpu}; load average after: {os.getloadavg()}")
                print("creation → every pod bound:")
                report("Job", jobs)
                report("JobSet", jobsets)
        finally:
            if controller is not None:
                controller.terminate()
                controller.wait(timeout=30)
                stopped = [line for line in (Path(tmp) / "controller.log").read_text().splitlines()
                           if "admission loop stopped" in line]
                print(f"gitopsq: {stopped[-1][:600] if stopped else 'no request log'}")
            rig.stop()


def raise_controller_manager_qps(rig: Rig, qps: float) -> None:
    """Replace the rig's kube-controller-manager by one with the same command line and a higher client rate (to
    see whether its rate limit, not CPU, sets the pace)."""
    os.kill(rig.state.controller_manager_pid, signal.SIGTERM)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and Path(f"/proc/{rig.state.controller_manager_pid}").exists():
        time.sleep(0.2)
    argv = [*rig.component_argv("kube-controller-manager"), f"--kube-api-qps={qps}", f"--kube-api-burst={int(qps * 2)}"]
    env = {**os.environ, "KUBE_FEATURE_WatchListClient": "false"}
    rig._replace_state(controller_manager_pid=rig._spawn(argv, "kube-controller-manager.log", env))
    time.sleep(5.0)  # it starts its controllers
    print(f"kube-controller-manager restarted with --kube-api-qps={qps} --kube-api-burst={int(qps * 2)}")


def queue_objects(count: int) -> list[tuple[str, dict[str, Any]]]:
    """One flavor, one ClusterQueue with room for every pod of both phases, LocalQueue ``queue``."""
    cpu = str(count * 2 * PODS)  # 100m each, ample
    return [
        (f"{WL}/resourceflavors", {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor",
                                   "metadata": {"name": "bench"}, "spec": {"nodeLabels": {"pool": "bench"}}}),
        (f"{WL}/clusterqueues", {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue",
                                 "metadata": {"name": "bench"}, "spec": {"namespaceSelector": {}, "resourceGroups": [
                                     {"coveredResources": ["cpu"], "flavors": [
                                         {"name": "bench", "resources": [{"name": "cpu", "nominalQuota": cpu}]}]}]}}),
        (f"{WL}/namespaces/{NS}/localqueues", {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
                                               "metadata": {"name": "queue", "namespace": NS},
                                               "spec": {"clusterQueue": "bench"}}),
    ]


if __name__ == "__main__":
    main()
