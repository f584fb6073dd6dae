"""Discipline with the API server: the client's token bucket, no status churn for unchanged pending reasons,
optimistic concurrency on status writes, and watches that survive an API server restart by relisting."""

from __future__ import annotations

import dataclasses
import threading
import time
from typing import Any

import pytest
from cluster_rig import admitted, apply, cond, create_job, job_manifest, queue_setup, rest, wait_for, workload_of
from envtest_rig import Envtest
from running_loop import FAST, RunningLoop

from gitopsq.admission_loop.loop import AdmissionLoop
from gitopsq.admission_loop.rate_limited import Client, TokenBucket
from gitopsq.admission_loop.watch_cache import Cache
from gitopsq.admission_loop.writer import NotLeading, Writer
from gitopsq.cluster.kube import ClusterConflict


@pytest.mark.parametrize(("qps", "burst", "requests", "waited"), [
    pytest.param(50, 100, 100, 0.0, id="a burst within the bucket does not wait"),
    pytest.param(50, 100, 150, 1.0, id="fifty more at 50 per second wait one second"),
    pytest.param(5, 1, 6, 1.0, id="five per second without burst"),
])
def test_token_bucket(qps: float, burst: int, requests: int, waited: float) -> None:
    """The client's token bucket lets ``burst`` requests through at once and then ``qps`` per second."""
    clock = [0.0]
    slept: list[float] = []

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        clock[0] += seconds

    bucket = TokenBucket(qps, burst, clock=lambda: clock[0], sleep=sleep)
    for _ in range(requests):
        bucket.take()
    assert sum(slept) == pytest.approx(waited) == pytest.approx(bucket.waited)


def test_token_bucket_counts_the_refill_it_discards() -> None:
    """A full bucket's refill is budget nobody used (the progress log's ``unused_budget``); a bucket in debt
    discards nothing while it fills again."""
    clock = [0.0]
    bucket = TokenBucket(50, 100, clock=lambda: clock[0], sleep=lambda _: None)
    clock[0] = 3.0
    assert bucket.level() == 100 and bucket.unused == pytest.approx(150)
    for _ in range(130):
        bucket.take()
    clock[0] = 4.5
    assert bucket.level() == pytest.approx(45) and bucket.unused == pytest.approx(150)
    clock[0] = 6.5
    assert bucket.level() == 100 and bucket.unused == pytest.approx(195)


@pytest.mark.envtest
def test_pending_reason_unchanged_means_no_status_write(kueue_clean: Envtest) -> None:
    """A workload that keeps waiting for the same reason is not rewritten on later passes, even when its
    message's count changes (message_refresh), while quota changes elsewhere."""
    env = kueue_clean
    ns = env.new_namespace("churn")
    apply(env, queue_setup(ns, "api-cq"))
    options = dataclasses.replace(FAST, message_refresh=3600.0)
    with RunningLoop(env, options) as running:
        create_job(env, job_manifest(ns, "holder", "queue", {"cpu": "1"}))
        wait_for("holder admitted", lambda: admitted(env, ns, "holder"))
        create_job(env, job_manifest(ns, "waiter", "queue", {"cpu": "1"}))
        first = wait_for("waiter pending", lambda: (c := cond(workload_of(env, ns, "waiter"), "QuotaReserved"))
                         and c["reason"] == "WaitingForQuota" and workload_of(env, ns, "waiter"))
        rv = first["metadata"]["resourceVersion"]
        passes = running.loop.passes
        for i in range(3):  # topology changes force full passes
            env.kubectl("label", "namespace", ns, f"touch={i}", "--overwrite")
        wait_for("three more passes", lambda: running.loop.passes >= passes + 3)
        time.sleep(0.5)
        assert workload_of(env, ns, "waiter")["metadata"]["resourceVersion"] == rv


@pytest.mark.envtest
def test_status_write_from_stale_state_conflicts(kueue_clean: Envtest) -> None:
    """A status write computed from an old resourceVersion is refused (409), never overwriting newer state."""
    env = kueue_clean
    ns = env.new_namespace("conflict")
    api = rest(env)
    base = f"/apis/kueue.x-k8s.io/v1beta2/namespaces/{ns}/workloads"
    created = api.request("POST", base, body={
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload", "metadata": {"name": "w"},
        "spec": {"queueName": "q", "podSets": [{"name": "main", "count": 1, "template": {"spec": {
            "containers": [{"name": "c", "image": "busybox"}]}}}]}})
    api.request("PATCH", f"{base}/w", body={"metadata": {"labels": {"changed": "yes"}}},
                content_type="application/merge-patch+json")
    client = Client(env.api_client())
    writer = Writer(client, Cache(client, names=("workloads",)))
    with pytest.raises(ClusterConflict):
        writer.workload_status(created, {"conditions": []})


@pytest.mark.envtest
def test_watches_relist_after_api_server_restart(kueue_clean: Envtest) -> None:
    """After the API server restarts, the cache's watches come back (relisting when their resourceVersion is
    no longer served) and the loop admits work submitted afterwards."""
    env = kueue_clean
    ns = env.new_namespace("restart")
    apply(env, queue_setup(ns, "api-cq"))
    with RunningLoop(env) as running:
        create_job(env, job_manifest(ns, "before", "queue", {"cpu": "500m"}))
        wait_for("before admitted", lambda: admitted(env, ns, "before"))
        relists = sum(i.relists for i in running.loop.cache.informers.values())
        env.restart_apiserver()
        create_job(env, job_manifest(ns, "after", "queue", {"cpu": "500m"}))
        wait_for("after admitted", lambda: admitted(env, ns, "after"), timeout=60)
        assert sum(i.relists for i in running.loop.cache.informers.values()) > relists


def test_no_write_leaves_without_leadership() -> None:
    """Every write asks the controller's leadership check first; without the Lease nothing is sent."""
    sent: list[str] = []

    class Recorder:
        def request(self, method: str, path: str, **_: object) -> dict[str, object]:
            sent.append(method)
            return {"metadata": {"name": "x"}}

    writer = Writer(Recorder(), None)
    writer.may_write = lambda: False
    with pytest.raises(NotLeading):
        writer.patch("jobs", "/apis/batch/v1/namespaces/a/jobs/x", {"spec": {"suspend": True}}, "Job/a/x")
    assert sent == []


@pytest.mark.envtest
def test_a_pass_times_its_waits_for_writes_by_kind(kueue_clean: Envtest) -> None:
    """Each pass counts how long it waited on the API server's answers to each kind of write (the progress line's
    ``mean_writes_ms``): admitting a Workload, writing another's pending reason and evicting one for a
    higher-priority arrival show up as such, and the waits fit inside the pass."""
    env = kueue_clean
    ns = env.new_namespace("phases")
    apply(env, queue_setup(ns, "phases-cq", priority_classes={"urgent": 100}, preemption="LowerPriority"))
    seen: list[tuple[float, dict[str, float]]] = []
    with RunningLoop(env, FAST) as running:
        progress = running.loop.progress
        record = progress.passed

        def passed(seconds: float, admitted: int, cpu: float = 0.0, **more: Any) -> None:
            seen.append((seconds, dict(more.get("writes") or {})))
            record(seconds, admitted, cpu, **more)

        progress.passed = passed  # type: ignore[method-assign]
        create_job(env, job_manifest(ns, "holder", "queue", {"cpu": "1"}))
        wait_for("holder admitted", lambda: admitted(env, ns, "holder"))
        create_job(env, job_manifest(ns, "waiter", "queue", {"cpu": "1"}))
        wait_for("waiter pending", lambda: (c := cond(workload_of(env, ns, "waiter"), "QuotaReserved"))
                 and c["reason"] == "WaitingForQuota")
        # the loop watches every namespace: the rig's other tests may leave Workloads behind
        wait_for("the watch shows the waiting one and the holder", lambda: (counts := running.loop.progress.seen())
                 and counts["pending"] >= 1 and counts["holding"] >= 1)
        before_urgent = len(seen)
        create_job(env, job_manifest(ns, "urgent", "queue", {"cpu": "1"},
                                     labels={"kueue.x-k8s.io/priority-class": "urgent"}))
        wait_for("urgent admitted", lambda: admitted(env, ns, "urgent"), timeout=30)
    ran = [(seconds, writes) for seconds, writes in seen if writes]
    assert ran and all(set(writes) == {"evictions", "admissions", "pending_reasons", "other"} for _, writes in ran)
    assert any(writes["admissions"] > 0 for _, writes in ran)
    assert any(writes["pending_reasons"] > 0 for _, writes in ran)
    assert any(writes.get("evictions", 0) > 0 for _, writes in seen[before_urgent:])
    assert all(sum(writes.values()) <= seconds for seconds, writes in ran)


@pytest.mark.envtest
def test_the_loop_runs_again_in_a_later_term(kueue_clean: Envtest) -> None:
    """A run that ended (its leadership term did) closed its watches and pools; the next run builds them afresh,
    syncs from a new LIST and admits — the second term of one AdmissionLoop object."""
    env = kueue_clean
    ns = env.new_namespace("terms")
    apply(env, queue_setup(ns, "terms-cq", cpu="2"))
    api = env.api_client()
    loop = AdmissionLoop(api, FAST)
    try:
        for name in ("first-term", "second-term"):
            stop = threading.Event()
            thread = threading.Thread(target=loop.run, args=(stop, lambda: True), daemon=True)
            thread.start()
            try:
                assert loop.synced.wait(30), f"{name}: the cache never synced"
                create_job(env, job_manifest(ns, name, "queue", {"cpu": "1"}))
                wait_for(f"{name} admitted", lambda n=name: admitted(env, ns, n))
            finally:
                stop.set()
                loop.cache.changed.set()
                thread.join(30)
            assert not thread.is_alive()
    finally:
        api.close()
