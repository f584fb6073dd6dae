"""The API server's CPU per request, by kind, on the test rig: what each write of Kueue's benchmark costs the server.

Run: .venv/bin/python benchmarks/apiserver_cost.py [--requests 2000] [--crds own|kueue|both]

Why: the side-by-side (benchmarks/kueue-side-by-side) reports the API server's CPU for a whole run, every client
together. This splits it: on a fresh rig (kube-apiserver + etcd) with the chosen CRDs installed, it sends
``--requests`` requests of one kind at a time from 8 threads and reads the server's user + system CPU from
``/proc/<pid>/stat`` before and after, less what the idle server used over the same time. Two watchers each on
Workloads, ClusterQueues and LocalQueues (as the controller and the runner watch them in a run) receive every
change, so the watch fan-out is in the figure. The kinds are the ones a benchmark run sends: the runner's Workload
creations and ``Finished`` server-side applies, a controller's Workload status merge patches (an admission), its
ClusterQueue and LocalQueue status patches (30 queues, round robin, as in the baseline config) and Events.

``--crds own`` installs gitopsq's CRDs (gitopsq/data/crds: pod templates free-form), ``kueue`` Kueue v0.19.2's
(from the Go module cache: every pod template field validated, CEL rules), ``both`` one rig after the other. The
machine is shared with whatever else runs: state the load with the figures.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "hack" / "envtest"))
sys.path.insert(0, str(REPO / "hack" / "kueue"))
sys.path.insert(0, str(REPO / "benchmarks"))

import kueuebuild  # noqa: E402
from envtestrig import Rig, prepare  # noqa: E402
from kubernetes import client as k8s  # noqa: E402
from kubernetes import watch  # noqa: E402
from kueue_side_by_side.main import install_gitopsq_crds, install_kueue_crds  # noqa: E402
from kueue_side_by_side.measure import cpu_seconds  # noqa: E402

from gitopsq.cluster.kinds import KUEUE_GROUP, KUEUE_VERSION  # noqa: E402
from gitopsq.cluster.kube import load_api_client  # noqa: E402

QUEUES = 30  # the baseline config's ClusterQueues (5 cohorts of 6), one LocalQueue each
NAMESPACE = "cost"
NOW = "2026-01-01T00:00:00Z"
MERGE = {"Content-Type": "application/merge-patch+json", "Accept": "application/json"}
APPLY = {"Content-Type": "application/apply-patch+yaml", "Accept": "application/json"}
JSON = {"Content-Type": "application/json", "Accept": "application/json"}


class Sender:
    """Raw requests on one API client (the generated client has no status patch with a chosen patch type)."""

    def __init__(self, api: k8s.ApiClient) -> None:
        self.api = api
        self.base = f"/apis/{KUEUE_GROUP}/{KUEUE_VERSION}"

    def send(self, method: str, path: str, body: dict[str, Any], headers: dict[str, str],
             query: list[tuple[str, str]] | None = None) -> None:
        args = self.api.param_serialize(method, self.base + path, query_params=query or [], header_params=headers,
                                        body=body, auth_settings=["BearerToken"])
        response = self.api.call_api(*args)
        response.read()
        if response.status >= 300:
            raise RuntimeError(f"{method} {path}: {response.status} {response.data[:300]!r}")


def queues(s: Sender, core: k8s.CoreV1Api) -> None:
    core.create_namespace({"metadata": {"name": NAMESPACE}})
    s.send("POST", "/resourceflavors", {"apiVersion": f"{KUEUE_GROUP}/{KUEUE_VERSION}", "kind": "ResourceFlavor",
                                        "metadata": {"name": "default"}}, JSON)
    for q in range(QUEUES):
        s.send("POST", "/clusterqueues", {
            "apiVersion": f"{KUEUE_GROUP}/{KUEUE_VERSION}", "kind": "ClusterQueue", "metadata": {"name": f"cq-{q}"},
            "spec": {"namespaceSelector": {}, "cohortName": f"cohort-{q // 6}", "resourceGroups": [
                {"coveredResources": ["cpu"],
                 "flavors": [{"name": "default", "resources": [{"name": "cpu", "nominalQuota": "20"}]}]}]}}, JSON)
        s.send("POST", f"/namespaces/{NAMESPACE}/localqueues", {
            "apiVersion": f"{KUEUE_GROUP}/{KUEUE_VERSION}", "kind": "LocalQueue",
            "metadata": {"name": f"lq-{q}", "namespace": NAMESPACE}, "spec": {"clusterQueue": f"cq-{q}"}}, JSON)


def watchers(api: k8s.ApiClient, stop: threading.Event) -> None:
    custom = k8s.CustomObjectsApi(api)

    def follow(plural: str) -> None:
        w = watch.Watch()
        while not stop.is_set():
            try:
                for _ in w.stream(custom.list_cluster_custom_object, KUEUE_GROUP, KUEUE_VERSION, plural,
                                  timeout_seconds=30):
                    if stop.is_set():
                        return
            except Exception:  # a dropped watch is restarted; the figure is the server's CPU
                time.sleep(0.1)

    for _ in range(2):
        for plural in ("workloads", "clusterqueues", "localqueues"):
            threading.Thread(target=follow, args=(plural,), daemon=True).start()


def request_kinds(s: Sender, core: k8s.CoreV1Api) -> dict[str, Callable[[int], None]]:
    """What one request of each kind sends, for request number i (each a change, as in a run)."""

    def create(i: int) -> None:
        s.send("POST", f"/namespaces/{NAMESPACE}/workloads", {
            "apiVersion": f"{KUEUE_GROUP}/{KUEUE_VERSION}", "kind": "Workload",
            "metadata": {"name": f"w-{i}", "namespace": NAMESPACE},
            "spec": {"queueName": f"lq-{i % QUEUES}", "priority": 50, "podSets": [{"name": "main", "count": 1,
                     "template": {"spec": {"restartPolicy": "Never", "containers": [
                         {"name": "c", "image": "registry.k8s.io/pause:3.10",
                          "resources": {"requests": {"cpu": "1"}}}]}}}]}}, JSON)

    def admit(i: int) -> None:
        s.send("PATCH", f"/namespaces/{NAMESPACE}/workloads/w-{i}/status", {"status": {
            "admission": {"clusterQueue": f"cq-{i % QUEUES}", "podSetAssignments": [
                {"name": "main", "flavors": {"cpu": "default"}, "resourceUsage": {"cpu": "1"}, "count": 1}]},
            "conditions": [
                {"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved", "observedGeneration": 1,
                 "message": f"Quota reserved in ClusterQueue cq-{i % QUEUES}", "lastTransitionTime": NOW},
                {"type": "Admitted", "status": "True", "reason": "Admitted", "observedGeneration": 1,
                 "message": "The workload is admitted", "lastTransitionTime": NOW}]}}, MERGE)

    def finish(i: int) -> None:
        s.send("PATCH", f"/namespaces/{NAMESPACE}/workloads/w-{i}/status", {
            "apiVersion": f"{KUEUE_GROUP}/{KUEUE_VERSION}", "kind": "Workload",
            "metadata": {"name": f"w-{i}", "namespace": NAMESPACE},
            "status": {"conditions": [{"type": "Finished", "status": "True", "reason": "Succeeded",
                                       "message": "finished", "lastTransitionTime": NOW}]}},
            APPLY, [("fieldManager", "runner"), ("force", "true")])

    def usage(i: int) -> list[dict[str, Any]]:
        return [{"name": "default", "resources": [{"name": "cpu", "total": str(i % 40), "borrowed": "0"}]}]

    def cluster_queue(i: int) -> None:
        s.send("PATCH", f"/clusterqueues/cq-{i % QUEUES}/status", {"status": {
            "pendingWorkloads": i % 97, "reservingWorkloads": i % 13, "admittedWorkloads": i % 13,
            "flavorsReservation": usage(i), "flavorsUsage": usage(i)}}, MERGE)

    def local_queue(i: int) -> None:
        s.send("PATCH", f"/namespaces/{NAMESPACE}/localqueues/lq-{i % QUEUES}/status", {"status": {
            "pendingWorkloads": i % 97, "reservingWorkloads": i % 13, "admittedWorkloads": i % 13,
            "flavorsReservation": usage(i), "flavorsUsage": usage(i)}}, MERGE)

    def event(i: int) -> None:
        core.create_namespaced_event(NAMESPACE, {
            "metadata": {"name": f"w-{i}.{i:x}", "namespace": NAMESPACE},
            "involvedObject": {"kind": "Workload", "apiVersion": f"{KUEUE_GROUP}/{KUEUE_VERSION}",
                               "namespace": NAMESPACE, "name": f"w-{i}"},
            "reason": "Admitted", "type": "Normal", "source": {"component": "apiserver-cost"},
            "message": f"Admitted by ClusterQueue cq-{i % QUEUES}, wait time since reservation was 0s",
            "firstTimestamp": NOW, "lastTimestamp": NOW, "count": 1})

    return {"Workload create (runner)": create, "Workload status merge patch (admission)": admit,
            "Workload status apply (runner's Finished)": finish, "ClusterQueue status merge patch": cluster_queue,
            "LocalQueue status merge patch": local_queue, "Event create": event}


def measure(crds: str, requests: int) -> list[tuple[str, float, float]]:
    """(kind, server CPU seconds less idle, wall seconds) for each request kind, on a fresh rig."""
    with tempfile.TemporaryDirectory(prefix="gitopsq-apiserver-cost-") as tmp:
        rig = Rig.start(prepare(log=False), Path(tmp) / "rig")
        stop = threading.Event()
        try:
            if crds == "kueue":
                install_kueue_crds(rig.kubeconfig, kueuebuild.crd_dir())
            else:
                install_gitopsq_crds(rig.kubeconfig)
            with load_api_client(str(rig.kubeconfig)) as api:
                api.configuration.connection_pool_maxsize = 16
                core = k8s.CoreV1Api(api)
                s = Sender(api)
                queues(s, core)
                watchers(api, stop)
                pid = rig.state.apiserver_pid
                time.sleep(3)
                c0, t0 = cpu_seconds(pid), time.monotonic()
                time.sleep(5)
                idle = (cpu_seconds(pid) - c0) / (time.monotonic() - t0)
                out = []
                with ThreadPoolExecutor(8) as pool:
                    for kind, send in request_kinds(s, core).items():
                        time.sleep(1)
                        c0, t0 = cpu_seconds(pid), time.monotonic()
                        list(pool.map(send, range(requests)))
                        time.sleep(1)  # the watch fan-out of the last changes
                        wall = time.monotonic() - t0
                        out.append((kind, cpu_seconds(pid) - c0 - idle * wall, wall))
                return out
        finally:
            stop.set()
            rig.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=2000, help="requests of each kind")
    parser.add_argument("--crds", choices=["own", "kueue", "both"], default="both")
    args = parser.parse_args(argv)
    prepare(log=True)
    runs = {crds: measure(crds, args.requests) for crds in (["own", "kueue"] if args.crds == "both" else [args.crds])}
    names = {"own": "gitopsq's CRDs", "kueue": "Kueue v0.19.2's CRDs"}
    print(f"API server CPU per request, {args.requests} requests of each kind from 8 threads, 2 watchers each on "
          f"Workloads, ClusterQueues, LocalQueues; {os.cpu_count()} cores, load average "
          f"{os.getloadavg()[0]:.2f} at the end")
    print()
    print("| request | " + " | ".join(f"{names[c]}: ms CPU each" for c in runs) + " |")
    print("|---|" + "---:|" * len(runs))
    for row, (kind, _, _) in enumerate(next(iter(runs.values()))):
        print(f"| {kind} | " + " | ".join(f"{1000 * r[row][1] / args.requests:.2f}" for r in runs.values()) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
