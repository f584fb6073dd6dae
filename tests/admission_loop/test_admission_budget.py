"""The request budget goes to admissions: a token bucket per resource kind (as controller-runtime clients have),
pending reasons only for queue heads, and at most about a second of admissions per pass in the engine's order."""

from __future__ import annotations

import dataclasses
import json
import random
import threading
import time
from typing import Any

import pytest
from cluster_rig import admitted, apply, cond, create_job, job_manifest, queue_setup, wait_for, workload_of
from envtest_rig import Envtest
from kubernetes import client as k8s_client
from running_loop import FAST, RunningLoop

from gitopsq import logs
from gitopsq.admission_loop import pace
from gitopsq.admission_loop.decisions import (
    ENGINE_BUDGET,
    MIN_WINDOW,
    Decisions,
    PendingReason,
    QueuePosition,
    decide,
    heads,
    next_window,
    window_floor,
)
from gitopsq.admission_loop.live_workload import read_workload, topology_of
from gitopsq.admission_loop.loop import Progress
from gitopsq.admission_loop.options import LoopOptions
from gitopsq.admission_loop.pace import SLOW_ANSWERS, SPREAD, Pace, ahead, rest_after, token_wait
from gitopsq.admission_loop.passes import AdmissionPass
from gitopsq.admission_loop.rate_limited import Client, TokenBucket, resource_of
from gitopsq.admission_loop.watch_cache import Cache


@pytest.mark.parametrize(("path", "resource"), [
    pytest.param("/apis/kueue.x-k8s.io/v1beta2/namespaces/a/workloads/w/status", "workloads",
                 id="a workload's status"),
    pytest.param("/apis/kueue.x-k8s.io/v1beta2/workloads", "workloads", id="the workload collection"),
    pytest.param("/apis/kueue.x-k8s.io/v1beta2/clusterqueues/cq/status", "clusterqueues",
                 id="a cluster-scoped queue"),
    pytest.param("/api/v1/namespaces/a/events", "events", id="core events in a namespace"),
    pytest.param("/api/v1/namespaces/a", "namespaces", id="a namespace itself"),
    pytest.param("/apis/batch/v1/namespaces/a/jobs/j", "jobs", id="a job"),
])
def test_resource_of_path(path: str, resource: str) -> None:
    """A REST path maps to the resource whose token bucket it draws from."""
    assert resource_of(path) == resource


def test_queue_status_writes_do_not_drain_the_workload_budget() -> None:
    """Each resource kind has its own bucket, so a burst of ClusterQueue writes leaves Workload writes their
    whole burst; with ``per_kind=False`` they share one."""
    per_kind = Client(k8s_client.ApiClient(), qps=1, burst=3)
    for _ in range(3):
        assert per_kind.bucket_for("/apis/kueue.x-k8s.io/v1beta2/clusterqueues/a/status").try_take()
    assert per_kind.bucket_for("/apis/kueue.x-k8s.io/v1beta2/namespaces/n/workloads/w/status").try_take()
    shared = Client(k8s_client.ApiClient(), qps=1, burst=3, per_kind=False)
    for _ in range(3):
        assert shared.bucket_for("/apis/kueue.x-k8s.io/v1beta2/clusterqueues/a/status").try_take()
    assert not shared.bucket_for("/apis/kueue.x-k8s.io/v1beta2/namespaces/n/workloads/w/status").try_take()


@pytest.mark.parametrize(("order", "per_queue", "expected"), [
    pytest.param({"a/old": ("cq", 0, 1.0), "a/new": ("cq", 0, 2.0)}, 1, {"a/old"}, id="the oldest of equals"),
    pytest.param({"a/low": ("cq", -1, 1.0), "a/high": ("cq", -5, 9.0)}, 1, {"a/high"},
                 id="higher priority before age"),
    pytest.param({"a/x": ("one", 0, 1.0), "b/y": ("two", 0, 5.0), "b/z": ("two", 0, 6.0)}, 1, {"a/x", "b/y"},
                 id="one head per cluster queue"),
    pytest.param({"a/x": ("cq", 0, 1.0), "a/y": ("cq", 0, 2.0), "a/z": ("cq", 0, 3.0)}, 2, {"a/x", "a/y"},
                 id="two heads when asked"),
    pytest.param({"a/lost": ("", 0, 1.0), "a/lost2": ("", 0, 2.0)}, 1, {"a/lost", "a/lost2"},
                 id="workloads reaching no cluster queue always"),
])
def test_heads_are_the_workloads_worth_a_reason(order: dict[str, tuple[str, int, float]], per_queue: int,
                                               expected: set[str]) -> None:
    """Pending reasons are written for the first workloads of each ClusterQueue in queue order only."""
    decisions = Decisions(pending=dict.fromkeys(order, PendingReason("WaitingForQuota", "m")),
                          order={key: QueuePosition(*position) for key, position in order.items()})
    assert heads(decisions, per_queue) == expected


@pytest.mark.envtest
def test_only_the_queue_head_gets_a_pending_reason(kueue_clean: Envtest) -> None:
    """Behind a full ClusterQueue, the oldest waiting workload shows why it waits; the ones behind it are not
    written at all (no status write per waiting workload)."""
    env = kueue_clean
    ns = env.new_namespace("heads")
    apply(env, queue_setup(ns, "api-cq"))
    with RunningLoop(env, dataclasses.replace(FAST, pending_heads=1)) as running:
        create_job(env, job_manifest(ns, "holder", "queue", {"cpu": "1"}))
        wait_for("holder admitted", lambda: admitted(env, ns, "holder"))
        for name in ("first", "second", "third"):
            create_job(env, job_manifest(ns, name, "queue", {"cpu": "1"}))
            time.sleep(1.1)  # creationTimestamp has second resolution: a strict queue order
        head = wait_for("head pending", lambda: (c := cond(workload_of(env, ns, "first"), "QuotaReserved"))
                        and c["status"] == "False" and c)
        assert head["reason"] == "WaitingForQuota"
        passes = running.loop.passes
        env.kubectl("label", "namespace", ns, "touch=1", "--overwrite")
        wait_for("another pass", lambda: running.loop.passes > passes)
        time.sleep(0.5)
        assert [cond(workload_of(env, ns, n), "QuotaReserved") for n in ("second", "third")] == [None, None]


@pytest.mark.envtest
def test_admissions_beyond_the_per_pass_cap_follow_in_later_passes(kueue_clean: Envtest) -> None:
    """With two admission writes per pass, five workloads that all fit are admitted two passes at a time."""
    env = kueue_clean
    ns = env.new_namespace("capped")
    apply(env, queue_setup(ns, "api-cq", cpu="5"))
    names = [f"job-{i}" for i in range(5)]
    for name in names:  # all there before the loop starts: its first passes see all five
        create_job(env, job_manifest(ns, name, "queue", {"cpu": "1"}))
    running = RunningLoop(env, dataclasses.replace(FAST, admissions_per_pass=2))
    written_in: list[int] = []
    admit = running.loop.admission._admit

    def counting_admit(*args: Any, **kwargs: Any) -> None:
        written_in.append(running.loop.passes)
        admit(*args, **kwargs)

    running.loop.admission._admit = counting_admit  # type: ignore[method-assign]
    with running:
        wait_for("all five admitted", lambda: all(admitted(env, ns, n) for n in names))
        assert len(written_in) == 5
        assert max(written_in.count(p) for p in written_in) <= 2


@pytest.mark.envtest
def test_cache_views_follow_the_watch(kueue_clean: Envtest) -> None:
    """A cache built with a view for workloads decodes each object once per change on the watch thread:
    creation, an update and a deletion show in ``views`` without decoding anything per read."""
    env = kueue_clean
    ns = env.new_namespace("views")
    decoded: list[str] = []

    def view(raw: dict[str, Any]) -> tuple[str, str]:
        decoded.append(raw["metadata"]["resourceVersion"])
        return raw["metadata"]["name"], (raw["metadata"].get("labels") or {}).get("mark", "")

    client = Client(env.api_client())
    cache = Cache(client, names=("workloads",), views={"workloads": view})
    cache.start()
    try:
        assert cache.wait_synced(timeout=20)
        body = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload", "metadata": {"name": "w"},
                "spec": {"queueName": "q", "podSets": [{"name": "main", "count": 1, "template": {"spec": {
                    "containers": [{"name": "c", "image": "busybox"}]}}}]}}
        base = f"/apis/kueue.x-k8s.io/v1beta2/namespaces/{ns}/workloads"
        client.request("POST", base, body=body)
        wait_for("created", lambda: ("w", "") in cache.views("workloads", view))
        client.request("PATCH", f"{base}/w", body={"metadata": {"labels": {"mark": "x"}}},
                       content_type="application/merge-patch+json")
        wait_for("updated", lambda: cache.views("workloads", view) == [("w", "x")])
        reads = len(decoded)
        for _ in range(5):
            cache.views("workloads", view)
        assert len(decoded) == reads
        client.request("DELETE", f"{base}/w")
        wait_for("deleted", lambda: cache.views("workloads", view) == [])
    finally:
        cache.stop()


def _queue_objects(nominal: str) -> list[dict[str, Any]]:
    return [
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": "rf"}},
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ns"}},
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": "cq"},
         "spec": {"namespaceSelector": {}, "resourceGroups": [{"coveredResources": ["cpu"], "flavors": [
             {"name": "rf", "resources": [{"name": "cpu", "nominalQuota": nominal}]}]}]}},
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue", "metadata": {"name": "lq", "namespace": "ns"},
         "spec": {"clusterQueue": "cq"}},
    ]


def _pending_workloads(count: int, cpu: str = "1") -> dict[str, Any]:
    live = {}
    for i in range(count):
        w = read_workload({
            "metadata": {"name": f"w-{i:03d}", "namespace": "ns", "uid": f"window-{cpu}-{i}", "resourceVersion": "1",
                         "generation": 1, "creationTimestamp": f"2026-01-01T00:{i // 60:02d}:{i % 60:02d}Z"},
            "spec": {"queueName": "lq", "priority": 0, "podSets": [{"name": "main", "count": 1, "template": {
                "spec": {"containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": cpu}}}]}}}]}})
        assert w is not None
        live[w.key] = w
    return live


@pytest.mark.parametrize(("nominal", "count", "window", "admitted", "explained"), [
    pytest.param("100", 30, 10, 10, 0, id="all of the window fits: admitted, the rest waits for the next pass"),
    pytest.param("5", 30, 10, 5, 1, id="quota binds inside the window: the head is explained"),
    pytest.param("100", 30, None, 30, 0, id="no window: everything that fits"),
])
def test_window_admits_the_oldest_identical_workloads(nominal: str, count: int, window: int | None,
                                                      admitted: int, explained: int) -> None:
    """With a window, the engine sees only the oldest identical waiting workloads of a queue: those are the
    ones admitted, in FIFO order, and every other waiting workload is still reported (for the metrics)."""
    topology = topology_of(_queue_objects(nominal))
    live = _pending_workloads(count)
    decisions = decide(topology, live, 1e10, heads_per_queue=1, window=window)
    assert sorted(decisions.admit) == sorted(live)[:admitted]
    assert set(decisions.pending) | set(decisions.behind) == set(live) - set(decisions.admit)
    assert len(decisions.pending) == explained


class _Bucket:
    def __init__(self, tokens: float) -> None:
        self.tokens = tokens
        self.burst = 100  # LoopOptions' default qps 50, burst twice that

    def level(self) -> float:
        return self.tokens


class _Writer:
    def __init__(self, tokens: float) -> None:
        self.workload_bucket = _Bucket(tokens)


@pytest.mark.parametrize(("tokens", "seconds", "options", "cap"), [
    pytest.param(100.0, 0.1, {}, 50, id="a full bucket, fast passes: one second of the budget"),
    pytest.param(100.0, 1.5, {}, 100, id="a full bucket, passes of 1.5 s: the burst (two seconds)"),
    pytest.param(100.0, 0.4, {}, 60, id="passes of 0.4 s and their rest (twice as long): what those refill"),
    pytest.param(100.0, 0.7, {"pass_rest": 1.0}, 70, id="resting as long as the pass: what two passes refill"),
    pytest.param(55.0, 1.1, {}, 55, id="a pass of 1.1 s at 50/s: all it banked, so the rate holds"),
    pytest.param(22.5, 0.1, {}, 22, id="slow refill: what accrued since the last pass"),
    pytest.param(3.7, 0.1, {}, 3, id="three tokens banked: three admissions"),
    pytest.param(-4.0, 0.1, {}, 1, id="an empty bucket: still one, waiting for its token"),
    pytest.param(100.0, 2.0, {"admissions_per_pass": 5}, 5, id="an explicit per-pass limit"),
])
def test_a_pass_writes_what_the_bucket_holds(tokens: float, seconds: float, options: dict[str, Any],
                                             cap: int) -> None:
    """A pass admits at most the Workload tokens banked and what the budget refills over a pass like the last and
    its rest (a second's worth at least, the client's burst at most), so it never sits out the bucket's refill
    while freed quota waits for the next pass, nor leaves budget unused when passes are slow."""
    admission = AdmissionPass(cache=None, writer=_Writer(tokens), options=LoopOptions(**options))  # type: ignore[arg-type]
    admission.pace.busy = seconds
    assert admission.admission_cap() == cap


@pytest.mark.parametrize(("tokens", "due", "budget"), [
    pytest.param(100.0, 40, 10, id="a full bucket: the tenth a full bucket would lose"),
    pytest.param(95.0, 40, 5, id="nearly full: what is above nine tenths"),
    pytest.param(90.0, 40, 0, id="admissions may need every token below nine tenths"),
    pytest.param(20.0, 40, 0, id="admissions waiting for tokens: none"),
    pytest.param(100.0, 3, 3, id="fewer due than spare: all of them"),
])
def test_pending_reasons_take_only_tokens_admissions_cannot_use(tokens: float, due: int, budget: int) -> None:
    admission = AdmissionPass(cache=None, writer=_Writer(tokens), options=LoopOptions())  # type: ignore[arg-type]
    assert admission.pending_budget(due) == budget


def test_pending_reasons_stay_within_their_share() -> None:
    """However many tokens are spare, reasons get their own share of the budget (``pending_share``: 10 % of
    50/s here, its burst one second of the budget) and then wait for it to refill."""
    options = LoopOptions(pending_share=0.1)
    admission = AdmissionPass(cache=None, writer=_Writer(1e9), options=options)  # type: ignore[arg-type]
    admission.writer.workload_bucket.burst = int(1e9)  # type: ignore[attr-defined]
    first = admission.pending_budget(10_000)
    assert 50 <= first <= 51  # the share's burst (a token may have accrued meanwhile)
    assert admission.pending_budget(10_000) <= 1


@pytest.mark.parametrize(("window", "admitted", "expected"), [
    pytest.param(8, [], 8, id="nothing admitted: the smallest window"),
    pytest.param(8, ["1"], 8, id="quota-bound, one a group: stays small"),
    pytest.param(50, ["1", "1", "1", "5"], 8, id="shrinks when groups get few"),
    pytest.param(8, ["1"] * 8, 16, id="a group used the whole window: doubles"),
    pytest.param(32, ["1"] * 10, 20, id="follows twice the busiest group"),
])
def test_the_engine_window_follows_what_groups_get(window: int, admitted: list[str], expected: int) -> None:
    """The next pass gives the engine twice what the busiest group of identical Workloads got (at least 8),
    doubling when a group filled its window: few per group while quota limits admissions, more when it
    does not."""
    workloads = []
    for cpu in sorted(set(admitted)):
        workloads += list(_pending_workloads(admitted.count(cpu), cpu).values())
    assert next_window(window, workloads) == expected


@pytest.mark.parametrize(("window", "admitted", "groups", "expected"), [
    pytest.param(8, ["1"] * 8, 90, 16, id="Kueue's baseline, 90 groups: as without a budget"),
    pytest.param(8, [], 3000, 3, id="a thousand queues, three shapes each: 3 a group, 9,000 in all"),
    pytest.param(8, ["1"] * 8, 3000, 3, id="a full window still stays within the budget"),
    pytest.param(8, ["1"], 20_000, 1, id="more groups than the budget: each group's oldest"),
])
def test_the_window_keeps_the_engine_within_its_budget(window: int, admitted: list[str], groups: int,
                                                       expected: int) -> None:
    """With many groups the windows together stay near ENGINE_BUDGET waiting Workloads (never below one a
    group): a pass writes at most the client's burst, and those come from each queue's first heads."""
    workloads = []
    for cpu in sorted(set(admitted)):
        workloads += list(_pending_workloads(admitted.count(cpu), cpu).values())
    assert next_window(window, workloads, groups) == expected
    assert window_floor(groups) == min(MIN_WINDOW, max(1, ENGINE_BUDGET // groups))


@pytest.mark.parametrize(("elapsed", "options", "fill", "rest"), [
    pytest.param(0.02, {}, 2.0, 0.08, id="a fast pass: the next one pass_interval after this one started"),
    pytest.param(0.1, {}, 2.0, 0.2, id="a pass as long as the interval: rests twice as long"),
    pytest.param(0.3, {}, 2.0, 0.6, id="a slow pass (a thousand queues): rests twice as long, a third of the CPU"),
    pytest.param(0.2, {}, 0.5, 0.3, id="... but not past the moment the next pass would end with a full bucket"),
    pytest.param(0.3, {}, 0.5, 0.3, id="... nor below as long as the pass took"),
    pytest.param(8.0, {}, 2.0, 8.0, id="a pass slowed by a saturated API server backs off as long as it took"),
    pytest.param(0.02, {}, 0.0, 0.08, id="a full bucket still waits the interval: no busy loop"),
    pytest.param(0.35, {"pass_rest": 0.0}, 2.0, 0.0, id="pass_rest 0: back to back"),
    pytest.param(2.0, {"pass_rest": 0.5}, float("inf"), 1.0, id="no bucket: pass_rest alone"),
])
def test_slow_passes_rest_while_tokens_bank(elapsed: float, options: dict[str, Any], fill: float,
                                            rest: float) -> None:
    assert rest_after(elapsed, LoopOptions(**options), fill) == pytest.approx(rest)


@pytest.mark.parametrize(("elapsed", "waited", "fill", "rest"), [
    pytest.param(1.7, 0.5, 2.0, 0.7, id="busy 1.2 s: rests 1.2 s, of which the 0.5 s waited for tokens is taken"),
    pytest.param(1.7, 0.0, 2.0, 1.7, id="the same pass without the wait: busy 1.7 s, rests as long"),
    pytest.param(3.0, 2.0, 2.0, 0.0, id="a wait longer than the rest: the next pass at once"),
    pytest.param(0.05, 0.04, 2.0, 0.05, id="pass_interval still holds"),
])
def test_waiting_for_tokens_counts_as_rest(elapsed: float, waited: float, fill: float, rest: float) -> None:
    """A pass whose writes waited for their tokens rested meanwhile: it rests as long as it was busy calls for,
    less that wait — so writing ahead of the tokens does not stretch the time between passes."""
    assert rest_after(elapsed, LoopOptions(), fill, waited) == pytest.approx(rest)


@pytest.mark.parametrize(("span", "extra"), [
    pytest.param(None, 0, id="the last pass issued nothing: nothing ahead"),
    pytest.param(1.55, 0, id="fast passes (0.4 s, rest 0.8 s): the refill stays within the burst"),
    pytest.param(2.05, 2, id="passes of 0.5 s: two tokens past the burst before the next issue"),
    pytest.param(3.4, 70, id="passes of 1.2 s on a busy machine: 70 past the burst"),
    pytest.param(6.3, 100, id="a saturated API server (answers in 3 s): another burst at most"),
])
def test_a_pass_writes_ahead_what_the_refill_would_lose(span: float | None, extra: int) -> None:
    """Past the tokens banked, a pass writes what the bucket would refill beyond its burst over the span from
    its start to the next pass's issue: those writes wait in line for their tokens."""
    assert ahead(50.0, 100, span) == extra


def test_the_span_expected_is_the_smoothed_mean_and_its_spread() -> None:
    """Each issue after an issuing pass samples a span (that pass's time to its issue and the time to this one);
    `Pace` expects their smoothed mean plus `SPREAD` smoothed deviations (TCP's round-trip estimator); a pass
    issuing nothing, or the loop idling, starts over."""
    paced = Pace(LoopOptions())
    assert paced.expected_span() is None
    paced.issue(1.0, 0.0, 10, 100.0)  # decided for 1 s
    assert paced.expected_span() is None  # one issue, no span yet
    paced.issue(3.0, 2.5, 10, 100.0)  # 1 s + 2 s to this issue; decided for 0.5 s
    assert paced.expected_span() == pytest.approx(3.0)
    paced.issue(6.5, 5.0, 10, 100.0)  # 0.5 + 3.5 = 4.0: mean 3 + 1/8, deviation 1/4
    assert paced.expected_span() == pytest.approx(3.125 + SPREAD * 0.25)
    paced.issue(7.0, 6.9, 0, 100.0)
    assert paced.expected_span() is None
    paced.issue(8.0, 7.5, 10, 100.0)
    paced.issue(9.5, 9.0, 10, 100.0)
    assert paced.expected_span() == pytest.approx(2.0)
    paced.idle()
    assert paced.expected_span() is None and paced.cap(100.0, 100) == 50  # a second's worth, nothing ahead


def test_nothing_goes_ahead_while_the_api_server_answers_slowly() -> None:
    """After a pass whose admissions were answered `SLOW_ANSWERS` or more after their tokens came, the next
    pass writes only what it banked; once answers are quick again, it writes ahead again."""
    paced = Pace(LoopOptions())
    paced.issue(1.0, 0.0, 100, 100.0)  # all banked: no token wait
    paced.answered(1.2)
    paced.issue(4.0, 3.0, 100, 40.0)  # 60 past the tokens: the last waits 1.2 s
    assert paced.expected_span() == pytest.approx(4.0) and paced.cap(0.0, 100) == 100  # 200 - 100 ahead
    paced.issue(8.0, 7.0, 100, 100.0)
    paced.answered(8.0 + SLOW_ANSWERS)
    assert paced.answer == pytest.approx(SLOW_ANSWERS) and paced.cap(0.0, 100) == 1  # nothing ahead
    assert paced.expected_span() is None  # and the spans measured so far are forgotten
    paced.issue(12.0, 11.0, 100, 40.0)
    paced.answered(12.0 + 1.2 + 0.3)  # 1.2 s for the tokens, 0.3 s for the answer
    assert paced.answer == pytest.approx(0.3) and paced.cap(0.0, 100) == 1  # one quick answer: no span yet
    paced.issue(15.0, 14.0, 100, 40.0)
    paced.answered(15.0 + 1.2 + 0.3)
    assert paced.expected_span() == pytest.approx(4.0) and paced.cap(0.0, 100) == 100  # ahead again
    _, batches = _simulate(LoopOptions(), decide=0.3, after=0.1, latency=3.0, jitter=0.5)
    assert max(batches) <= 100  # answers in 3 s (the runner's creations saturating the server): the burst at most


@pytest.mark.parametrize(("batch", "level", "seconds"), [
    pytest.param(60, 100.0, 0.0, id="banked: no wait"),
    pytest.param(170, 100.0, 1.4, id="70 ahead of the tokens: the last waits 1.4 s at 50/s"),
    pytest.param(10, -5.0, 0.2, id="a bucket already in debt counts as empty"),
])
def test_token_wait_is_the_last_writes_wait(batch: int, level: float, seconds: float) -> None:
    assert token_wait(batch, level, 50.0) == pytest.approx(seconds)


def _simulate(options: LoopOptions, *, decide: float, after: float, latency: float, jitter: float = 0.0,
              seconds: float = 600.0) -> tuple[float, list[int]]:
    """Passes paced by `Pace` against the real token bucket on a simulated clock, with unlimited admissible
    work: each pass decides for ``decide`` s, issues its batch at once (every write reserves its token and waits
    from the issue on, as concurrent writers do), is answered ``latency`` s after its token, then works ``after``
    s more (pending reasons, statuses) and rests. Each of the three varies by up to ± ``jitter`` of itself
    (seeded: the same run every time). Returns admissions per second and the batches."""
    clock = [0.0]
    waits: list[float] = []
    bucket = TokenBucket(options.qps, options.burst, clock=lambda: clock[0], sleep=waits.append)
    paced = Pace(options)
    batches: list[int] = []
    draw = random.Random(21)

    def varied(seconds: float) -> float:
        return seconds * draw.uniform(1 - jitter, 1 + jitter)

    while clock[0] < seconds:
        started = clock[0]
        cap = paced.cap(bucket.level(), bucket.burst)
        clock[0] += varied(decide)
        paced.issue(clock[0], started, cap, bucket.level())
        waits.clear()
        for _ in range(cap):
            bucket.take()
        clock[0] += max(waits, default=0.0) + varied(latency)
        paced.answered(clock[0])
        clock[0] += varied(after)
        batches.append(cap)
        paced.done(started, clock[0])
        clock[0] += paced.rest(clock[0] - started, (bucket.burst - bucket.level()) / options.qps)
    return sum(batches) / clock[0], batches


_NOTHING_AHEAD = ("ahead", lambda *_: 0)  # what the pace did before: write what is banked
_MEAN_ONLY = ("SPREAD", 0.0)  # expect the mean span, no deviations


@pytest.mark.parametrize(("timing", "jitter", "knocked_out", "rates"), [
    pytest.param((0.8, 0.1, 0.1), 0.0, _NOTHING_AHEAD, (40.0, 49.0), id="passes of 1 s: 40/s -> the budget"),
    pytest.param((1.0, 0.15, 0.05), 0.0, _NOTHING_AHEAD, (36.0, 49.0),
                 id="passes of 1.2 s (a busy machine): 35/s -> the budget"),
    pytest.param((1.5, 0.3, 0.1), 0.0, _NOTHING_AHEAD, (27.0, 40.0),
                 id="passes of 1.9 s: 26/s -> 41/s (ahead is at most a burst)"),
    pytest.param((0.8, 0.1, 0.1), 0.5, _MEAN_ONLY, (47.5, 49.3), id="irregular, 1 s: the mean alone 47/s -> 49.5/s"),
    pytest.param((0.6, 0.1, 0.6), 0.5, _MEAN_ONLY, (47.0, 49.2),
                 id="irregular, 1.3 s, half of it waiting for answers: 46.7/s -> 49.5/s"),
    pytest.param((1.0, 0.15, 0.05), 0.5, _MEAN_ONLY, (46.7, 48.5), id="irregular, 1.2 s: 46/s -> 49/s"),
])
def test_slow_passes_keep_the_budget(monkeypatch: pytest.MonkeyPatch, timing: tuple[float, float, float],
                                     jitter: float, knocked_out: tuple[str, Any], rates: tuple[float, float]) -> None:
    """While work waits for tokens and passes are slow (``timing``: decide, after, latency as `_simulate` takes
    them), writing ahead keeps the bucket from filling between issues: near the full 50/s where writing only what
    is banked loses a fifth or more (the rest after a pass is as long as it was busy, so banked tokens alone
    cover a cycle of two seconds at most). Passes that vary by half their length (``jitter``) need the spread as
    well: sized for the mean span alone, the pace loses the refill of every longer one. Never above the client's
    budget (burst + qps × time: the bucket itself enforces it). ``rates``: at most the first with
    ``knocked_out``, at least the second with it."""
    decide, after, latency = timing
    without, with_it = rates
    options = LoopOptions()
    rate, batches = _simulate(options, decide=decide, after=after, latency=latency, jitter=jitter)
    assert with_it <= rate <= options.qps + options.burst / 600.0
    assert max(batches) <= 2 * options.burst
    monkeypatch.setattr(pace, *knocked_out)
    lost, _ = _simulate(options, decide=decide, after=after, latency=latency, jitter=jitter)
    assert lost <= without


def test_fast_passes_write_nothing_ahead(monkeypatch: pytest.MonkeyPatch) -> None:
    """Passes of 0.4 s (a thousand ClusterQueues on an idle machine), varying by a fifth: the refill between
    issues stays within the burst, so the batches are exactly those written without `ahead` — the baseline's
    pacing is untouched."""
    options = LoopOptions()
    rate, batches = _simulate(options, decide=0.35, after=0.03, latency=0.02, jitter=0.2)
    monkeypatch.setattr(pace, "ahead", lambda *_: 0)
    same_rate, same = _simulate(options, decide=0.35, after=0.03, latency=0.02, jitter=0.2)
    assert batches == same and rate == same_rate
    assert rate >= 49.0



def test_a_pass_sends_its_whole_batch_at_once() -> None:
    """A pass's writes all go out together (up to twice the burst: banked and ahead): on an API server saturated
    by other clients each write takes seconds, and a pass waits for its slowest. Every write here waits until all
    of them are in flight; a pool smaller than the batch would never get there."""
    options = LoopOptions(burst=40)
    admission = AdmissionPass(cache=None, writer=_Writer(40.0), options=options)  # type: ignore[arg-type]
    in_flight = threading.Barrier(2 * options.burst, timeout=10)
    admission._parallel([in_flight.wait for _ in range(2 * options.burst)])
    assert options.writers() == 80 and options.connections() >= 80 + options.queue_status_workers + 10


def test_the_client_keeps_a_connection_for_every_concurrent_request() -> None:
    client = Client(k8s_client.ApiClient(k8s_client.Configuration()), connections=133)
    assert client.api_client.configuration.connection_pool_maxsize == 133
    assert client.api_client.rest_client.pool_manager.connection_pool_kw["maxsize"] == 133


def test_the_progress_line_shows_what_held_admissions_back(capsys: pytest.CaptureFixture[str]) -> None:
    """Every interval the loop logs what it admitted, what the budget held back (``capped``), the slowest
    answer and the budget the Workload bucket discarded full — readable, not taken for a credential by the
    log's redaction (a field named after tokens was)."""
    logs.configure(json=True)
    client = Client(k8s_client.ApiClient(k8s_client.Configuration()))
    seen = {"pending": 40, "holding": 3, "finished": 7}
    progress = Progress(client, every=0.0, seen=lambda: seen)
    client.bucket.unused = 37.4
    progress.passed(1.5, 120, 0.5, capped=80, answer=0.25,
                    writes={"evictions": 0.0, "admissions": 0.75, "pending_reasons": 0.2, "other": 0.0})
    line = json.loads(capsys.readouterr().err.strip().splitlines()[-1])
    assert line["event"] == "admission progress"
    assert (line["admissions"], line["capped"], line["slowest_answer_ms"], line["unused_budget"]) == (120, 80, 250, 37)
    assert line["mean_pass_ms"] == 1500 and line["mean_pass_cpu_ms"] == 500
    assert line["mean_writes_ms"] == {"evictions": 0, "admissions": 750, "pending_reasons": 200, "other": 0}
    assert line["seen"] == {"pending": 40, "holding": 3, "finished": 7}
    progress.passed(0.5, 150, 0.1)
    line = json.loads(capsys.readouterr().err.strip().splitlines()[-1])
    assert (line["admissions"], line["capped"], line["unused_budget"]) == (30, 0, 0)  # per interval
    assert line["mean_writes_ms"] == {}
