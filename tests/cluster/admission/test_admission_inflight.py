"""On the rig: a pass does not wait for its admission writes, and the next pass sees them holding quota."""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from typing import Any

import pytest
from cluster_rig import admitted, apply, cond, create_job, job_manifest, queue_setup, wait_for, workload_of
from envtest_rig import Envtest
from running_loop import FAST

from gitopsq.cluster.admission.loop import AdmissionLoop

pytestmark = pytest.mark.envtest


def test_a_pass_sends_admissions_without_waiting_and_the_next_counts_their_quota(kueue_clean: Envtest) -> None:
    """A ClusterQueue of 1 cpu, two 1-cpu Jobs. The first admission's write is held back: the pass that sent it
    returns anyway; the passes after it, while the write is out, admit nothing else (the quota is held by the
    assumed admission) and write nothing to the Workload in flight. Released, the write lands; the other Job
    waits for quota."""
    env = kueue_clean
    ns = env.new_namespace("inflight")
    apply(env, queue_setup(ns, "inflight-cq", cpu="1"))
    api = env.api_client()
    loop = AdmissionLoop(api, FAST)
    gate = threading.Event()
    admissions: list[str] = []
    other_writes: list[str] = []
    write = loop.writer.workload_status

    def held(raw: Mapping[str, Any], status: Mapping[str, Any]) -> dict[str, Any]:
        name = raw["metadata"]["name"]
        if status.get("admission"):
            admissions.append(name)
            gate.wait(30)
        elif any(name == a for a in admissions) and not gate.is_set():
            other_writes.append(name)
        return write(raw, status)

    loop.writer.workload_status = held  # type: ignore[method-assign]
    loop.cache.start()
    try:
        assert loop.cache.wait_synced(30)
        for name in ("first", "second"):
            create_job(env, job_manifest(ns, name, "queue", {"cpu": "1"}))
        wait_for("both Workloads in the cache", lambda: len([
            w for w in loop.cache.items("workloads") if w["metadata"]["namespace"] == ns]) == 2 or loop.once())
        wait_for("an admission sent", lambda: admissions or loop.once())
        started = time.monotonic()
        for _ in range(5):
            loop.once()
            time.sleep(0.05)
        assert time.monotonic() - started < 5, "passes waited for the held admission"
        assert len(admissions) == 1, admissions  # the other Job's quota is held by the one in flight
        assert len(loop.admission.inflight) == 1
        assert other_writes == []
        gate.set()
        assert loop.admission.inflight.drain(30)
        held_by = admissions[0].removeprefix("job-").rsplit("-", 1)[0]
        waiting = "second" if held_by == "first" else "first"
        wait_for("the admission landed", lambda: admitted(env, ns, held_by))
        wait_for("the other waits for quota", lambda: loop.once() or (
            (c := cond(workload_of(env, ns, waiting), "QuotaReserved")) and c["reason"] == "WaitingForQuota"))
        assert not admitted(env, ns, waiting)
    finally:
        gate.set()
        loop.admission.close()
        loop.queues.close()
        loop.cache.stop()
        api.close()


def test_an_eviction_in_flight_holds_its_quota_until_answered(kueue_clean: Envtest) -> None:
    """A 1-cpu ClusterQueue holds a low-priority Job; an urgent one preempts it. The eviction's write is held
    back: passes go on without waiting, send no second eviction and do not admit the preemptor (the victim
    holds its quota until the answer is in the cache). Released, the victim is evicted and the preemptor
    admitted."""
    env = kueue_clean
    ns = env.new_namespace("inflight-evict")
    apply(env, queue_setup(ns, "inflight-evict-cq", cpu="1", priority_classes={"urgent": 1000},
                           preemption="LowerPriority"))
    api = env.api_client()
    loop = AdmissionLoop(api, FAST)
    gate = threading.Event()
    evictions: list[str] = []
    write = loop.writer.workload_status

    def held(raw: Mapping[str, Any], status: Mapping[str, Any]) -> dict[str, Any]:
        if any(c.get("type") == "Evicted" and c.get("status") == "True" for c in status.get("conditions") or ()):
            evictions.append(raw["metadata"]["name"])
            gate.wait(30)
        return write(raw, status)

    loop.writer.workload_status = held  # type: ignore[method-assign]
    loop.cache.start()
    try:
        assert loop.cache.wait_synced(30)
        create_job(env, job_manifest(ns, "low", "queue", {"cpu": "1"}))
        wait_for("low admitted", lambda: admitted(env, ns, "low") or loop.once())
        create_job(env, job_manifest(ns, "urgent", "queue", {"cpu": "1"}, labels={
            "kueue.x-k8s.io/priority-class": "urgent"}))
        wait_for("an eviction sent", lambda: evictions or loop.once())
        started = time.monotonic()
        for _ in range(5):
            loop.once()
            time.sleep(0.05)
        assert time.monotonic() - started < 5, "passes waited for the held eviction"
        assert len(evictions) == 1, evictions
        assert admitted(env, ns, "low") and not admitted(env, ns, "urgent")
        gate.set()
        wait_for("urgent admitted after the eviction landed", lambda: admitted(env, ns, "urgent") or loop.once(),
                 timeout=30)
        assert cond(workload_of(env, ns, "low"), "Evicted")["status"] == "True"  # type: ignore[index]
    finally:
        gate.set()
        loop.admission.close()
        loop.queues.close()
        loop.cache.stop()
        api.close()
