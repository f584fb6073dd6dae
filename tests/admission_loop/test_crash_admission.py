"""Walkthrough (6): the admission loop killed with SIGKILL at its most delicate points and restarted, with no
double admission and no leaked quota (the loop runs as a separate process; $GITOPSQ_FAULT picks the point)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator

import pytest
from cluster_rig import apply, cond, create_job, job, job_manifest, queue_setup, wait_for, workloads
from envtest_rig import Envtest

pytestmark = pytest.mark.envtest



class LoopProcess:
    """``python -m gitopsq.admission_loop.loop`` against the rig, optionally with a fault point."""

    def __init__(self, env: Envtest, fault: str | None = None) -> None:
        environ = env.env()
        environ.pop("GITOPSQ_FAULT", None)
        if fault:
            environ["GITOPSQ_FAULT"] = fault
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "gitopsq.admission_loop.loop", "--kubeconfig", str(env.kubeconfig),
             "--qps", "200", "--burst", "400"], env=environ, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)

    def wait_killed(self, timeout: float = 30.0) -> None:
        code = self.proc.wait(timeout)
        assert code == -signal.SIGKILL, self.proc.stderr.read().decode() if self.proc.stderr else code

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                os.kill(self.proc.pid, signal.SIGKILL)
                self.proc.wait()


class UsageWatch:
    """Samples the reserved CPU of all workloads in the background and keeps the maximum seen."""

    def __init__(self, env: Envtest, ns: str) -> None:
        self.env, self.ns, self.max_cpu, self.stop = env, ns, 0, threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.stop.is_set():
            total = 0
            for w in workloads(self.env, self.ns):
                reserved = cond(w, "QuotaReserved")
                finished = cond(w, "Finished")
                if reserved and reserved["status"] == "True" and not (finished and finished["status"] == "True"):
                    usage = w["status"]["admission"]["podSetAssignments"][0]["resourceUsage"]["cpu"]
                    total += int(usage)
            self.max_cpu = max(self.max_cpu, total)
            time.sleep(0.05)


@pytest.fixture
def processes(kueue_clean: Envtest) -> Iterator[list[LoopProcess]]:
    started: list[LoopProcess] = []
    yield started
    for p in started:
        p.stop()


def admitted_names(env: Envtest, ns: str) -> list[str]:
    return sorted(r["name"] for w in workloads(env, ns) if (c := cond(w, "Admitted")) and c["status"] == "True"
                  for r in w["metadata"]["ownerReferences"])


def test_killed_between_reserving_quota_and_starting_the_job(kueue_clean: Envtest,
                                                             processes: list[LoopProcess]) -> None:
    """Killed right after the first quota reservation was written: after restart the job of that Workload is
    started, exactly two of three 2-CPU jobs run in 4 CPUs, and reserved quota never exceeded 4."""
    env = kueue_clean
    ns = env.new_namespace("crash1")
    apply(env, queue_setup(ns, "crash-cq", cpu="4", priority_classes={"urgent": 1000}, preemption="LowerPriority"))
    usage = UsageWatch(env, ns)
    for i in range(3):
        create_job(env, job_manifest(ns, f"job-{i}", "queue", {"cpu": "2"}))
    processes.append(first := LoopProcess(env, fault="after-reserve"))
    first.wait_killed()
    reserved = admitted_names(env, ns)
    assert len(reserved) == 1
    assert job(env, ns, reserved[0])["spec"]["suspend"] is True  # died before starting it
    processes.append(LoopProcess(env))
    wait_for("two jobs running", lambda: sum(not job(env, ns, f"job-{i}")["spec"]["suspend"] for i in range(3)) == 2,
             timeout=40)
    time.sleep(1.0)
    usage.stop.set()
    names = admitted_names(env, ns)
    assert len(names) == 2 and reserved[0] in names
    assert usage.max_cpu == 4


def test_killed_between_preempting_and_admitting(kueue_clean: Envtest, processes: list[LoopProcess]) -> None:
    """Killed right after writing the victims' eviction: the preemptor was not admitted yet, the victims still
    hold their quota; after restart the victims are stopped and released and then the preemptor is admitted,
    with reserved quota never above 4 CPUs."""
    env = kueue_clean
    ns = env.new_namespace("crash2")
    apply(env, queue_setup(ns, "crash-cq", cpu="4", priority_classes={"urgent": 1000}, preemption="LowerPriority"))
    processes.append(first := LoopProcess(env, fault="after-preempt"))
    for i in range(2):
        create_job(env, job_manifest(ns, f"low-{i}", "queue", {"cpu": "2"}))
    wait_for("low jobs running", lambda: all(not job(env, ns, f"low-{i}")["spec"]["suspend"] for i in range(2)),
             timeout=30)
    usage = UsageWatch(env, ns)
    create_job(env, job_manifest(ns, "urgent", "queue", {"cpu": "2"}, labels={"kueue.x-k8s.io/priority-class":
                                                                              "urgent"}))
    first.wait_killed()
    evicted = [w for w in workloads(env, ns) if (c := cond(w, "Evicted")) and c["status"] == "True"]
    assert len(evicted) == 1 and evicted[0]["status"].get("admission")  # quota still held until the job stops
    assert "urgent" not in admitted_names(env, ns)
    processes.append(LoopProcess(env))
    wait_for("urgent running", lambda: job(env, ns, "urgent")["spec"]["suspend"] is False, timeout=40)
    time.sleep(1.0)
    usage.stop.set()
    victim = evicted[0]["metadata"]["ownerReferences"][0]["name"]
    assert job(env, ns, victim)["spec"]["suspend"] is True
    assert sorted(admitted_names(env, ns)) == sorted(["urgent", next(n for n in ("low-0", "low-1") if n != victim)])
    assert usage.max_cpu == 4
