"""The admission loop: the admission core's decisions made real on an API server.

One pass, run whenever the watch cache changes (and at least every ``resync`` seconds):
1. the job reconciler (job_reconciler.py) creates Workloads, marks them Finished, stops evicted jobs and starts
   admitted ones;
2. the admission pass (passes.py, deciding with decisions.py) rebuilds the engine from the cache — admitted
   Workloads are the source of truth for usage, so a restart loses nothing — settles ``now`` and writes what
   changed:
   evictions first, then, only in quota trees where nothing was evicted this pass, admissions (about a
   second of the budget per pass); then the pending reasons of queue heads whose reason changed;
3. ClusterQueue and LocalQueue status (queue_status.py).
Quota held by an evicted Workload is released only once its job has stopped (job_reconciler.py), and a preemptor is
admitted in a later pass than its victims' eviction, so a crash anywhere can neither double-admit nor leak
quota: the next pass recomputes from what the API server holds.
"""

from __future__ import annotations

import argparse
import functools
import signal
import threading
import time
from collections.abc import Callable, Mapping
from typing import cast

from kubernetes import client as k8s_client

from gitopsq import logs
from gitopsq.admission import ENGINE
from gitopsq.admission_loop.integration_watch import IntegrationWatch
from gitopsq.admission_loop.integrations import select
from gitopsq.admission_loop.job_reconciler import JobReconciler
from gitopsq.admission_loop.live_workload import FINISHED, LiveWorkload, read_workload
from gitopsq.admission_loop.options import NO_FAULT, FaultPoint, LoopOptions, configured
from gitopsq.admission_loop.passes import AdmissionPass
from gitopsq.admission_loop.ports import AdmissionMetrics, DecisionSink
from gitopsq.admission_loop.queue_status import QueueStatusWriter
from gitopsq.admission_loop.rate_limited import Client, TokenBucket
from gitopsq.admission_loop.watch_cache import Cache
from gitopsq.admission_loop.workload_index import WorkloadIndex
from gitopsq.admission_loop.writer import EventRecorder, Writer
from gitopsq.api.raw_objects import ObjectList
from gitopsq.cluster.kube import load_api_client
from gitopsq.errors import ClusterError
from gitopsq.manifests.config_model import AdmissionSettings
from gitopsq.metrics import KueueMetrics, serve

_log = logs.get("admission")


def _finished(view: LiveWorkload) -> bool:
    return view.state == FINISHED


class Progress:
    """One ``admission progress`` log line every ``every`` seconds while passes run: passes, their mean and
    longest duration, the mean CPU time of a pass on the loop's thread (the rest of a pass's duration is waiting:
    for writes, for the interpreter lock), admissions written, admissions decided but left for a later pass
    (``capped``: the budget, not quota, held them back), the slowest answer to a pass's admissions past their
    tokens (`pace.SLOW_ANSWERS`), seconds requests spent waiting for tokens, Workload tokens the bucket
    discarded full (``unused_budget``: budget lost while ``capped`` says work waited), how long a pass waited
    on average for each kind of write (``mean_writes_ms``, `passes.WRITE_PHASES`: what a slow pass was made of),
    and how many Workloads the watch has shown waiting, holding quota and finished (``seen``: against what the
    API server holds, the watch's lag) — what to look at when admissions seem slow."""

    def __init__(self, client: Client, every: float = 10.0,
                 seen: Callable[[], Mapping[str, int] | None] = lambda: None) -> None:
        self.client, self.every, self.seen = client, every, seen
        self._since = time.monotonic()
        self._passes = 0
        self._busy = self._longest = self._cpu = 0.0
        self._admissions = self._capped = 0
        self._waited = self._unused = self._answer = 0.0
        self._writes: dict[str, float] = {}

    def passed(self, seconds: float, admissions_written: int, cpu: float = 0.0, *, capped: int = 0,
               answer: float = 0.0, writes: Mapping[str, float] | None = None) -> None:
        self._passes += 1
        for phase, spent in (writes or {}).items():
            self._writes[phase] = self._writes.get(phase, 0.0) + spent
        self._capped += capped
        self._answer = max(self._answer, answer)
        self._busy += seconds
        self._cpu += cpu
        self._longest = max(self._longest, seconds)
        now = time.monotonic()
        if now - self._since < self.every:
            return
        waited, unused = self.client.waited, self.client.bucket.unused
        # unused_budget, not "tokens_…": the log redacts keys that look like credentials
        _log.info("admission progress", passes=self._passes, mean_pass_ms=round(1000 * self._busy / self._passes),
                    longest_pass_ms=round(1000 * self._longest),
                    mean_pass_cpu_ms=round(1000 * self._cpu / self._passes),
                    admissions=admissions_written - self._admissions, capped=self._capped,
                    slowest_answer_ms=round(1000 * self._answer),
                    throttled_seconds=round(waited - self._waited, 1), unused_budget=round(unused - self._unused),
                    mean_writes_ms={phase: round(1000 * spent / self._passes) for phase, spent in self._writes.items()},
                    seen=self.seen(),
                    seconds=round(now - self._since, 1))
        self._since, self._passes, self._busy, self._longest, self._cpu = now, 0, 0.0, 0.0, 0.0
        self._admissions, self._waited, self._unused, self._capped = admissions_written, waited, unused, 0
        self._answer = 0.0
        self._writes = {}


class AdmissionLoop:
    """The controller runnable (gitopsq.controller.Runnable): run(stop, may_write), once per leadership term.

    A term's end closes what watched and wrote for it (the watches, the queue status and write pools, the event
    recorder), so every later term builds them afresh and starts from a new LIST: a replica whose Lease renewal
    ran past its deadline on a saturated API server leads again two seconds later, and its loop must admit
    again, not die on a watch thread that cannot start twice."""

    name = "admission"

    def __init__(self, api_client: k8s_client.ApiClient, options: LoopOptions | None = None, *,
                 metrics: AdmissionMetrics | None = None, audit: DecisionSink | None = None,
                 fault: FaultPoint = NO_FAULT) -> None:
        self.options = options or LoopOptions()
        self.client = Client(api_client, qps=self.options.qps, burst=self.options.burst,
                             connections=self.options.connections())
        self.metrics = metrics
        self._audit, self._fault = audit, fault
        self.passes = 0
        self.synced = threading.Event()
        self._configure: AdmissionSettings | None = None  # set by `configure`, applied before the next pass
        self._configure_lock = threading.Lock()
        self._term = threading.Lock()  # held by the running term: the next one waits for its parts to close
        self._terms = 0
        self._build()

    def _build(self) -> None:
        """The parts one leadership term watches and writes with, on the loop's current options."""
        metrics, audit, fault = self.metrics, self._audit, self._fault
        self.cache = Cache(self.client, views={"workloads": read_workload}, retire={"workloads": _finished},
                           indexes={"workloads": WorkloadIndex()})
        events = EventRecorder(self.client) if self.options.events else None
        self.events = events
        self.writer = Writer(self.client, self.cache, events)
        self.integrations = IntegrationWatch(self.client, self.cache, select(self.options.integrations),
                                             every=self.options.integration_recheck,
                                             report=getattr(metrics, "integration_active", None))
        self.integrations.refresh(force=True)  # built-in kinds are watched from the start
        self.jobs = JobReconciler(self.cache, self.writer, now=time.time, fault=fault, integrations=(),
                                  pods_ready=self.options.wait_for_pods_ready, pods_left=self._pods_left)
        share = max(1.0, self.options.qps * self.options.queue_status_share)
        refresh = max(1.0, self.options.qps * min(self.options.queue_status_share,
                                                  self.options.queue_status_refresh_share))
        self.queues = QueueStatusWriter(self.cache, self.writer, min_interval=self.options.queue_status_interval,
                                        local_interval=self.options.local_queue_status_interval,
                                        workers=self.options.queue_status_workers,
                                        bucket=TokenBucket(share, max(2, int(share * 2))),
                                        refresh=TokenBucket(refresh, max(2, int(refresh * 2))))
        self.admission = AdmissionPass(self.cache, self.writer, self.options, metrics, audit=audit, fault=fault)
        seen = functools.partial(self.cache.indexed, "workloads", WorkloadIndex.counts)
        self.progress = Progress(self.client, seen=seen)

    def configure(self, admission: AdmissionSettings) -> None:
        """gitopsq.yaml's ``admission`` block of a newly applied revision: the engine's settings and
        waitForPodsReady from the next pass on (thread-safe; the sync loop calls it)."""
        with self._configure_lock:
            self._configure = admission
        self.cache.changed.set()

    def _apply_configuration(self) -> None:
        with self._configure_lock:
            admission, self._configure = self._configure, None
        if admission is None:
            return
        options = configured(self.options, admission)
        if options == self.options:
            return
        self.options = options
        self.admission.reconfigure(options)
        self.jobs.pods_ready = options.wait_for_pods_ready
        _log.info("admission settings changed", fair_sharing=options.settings.fair_sharing,
                    preemption_strategies=list(options.settings.preemption_strategies),
                    inadmissible_requeue=options.settings.inadmissible_requeue,
                    wait_for_pods_ready=options.wait_for_pods_ready.enable)

    def _pods_left(self, namespace: str, selector: str) -> int:
        """Pods matching ``selector`` not yet Succeeded or Failed, terminating ones included (one LIST; asked
        only for the Workloads of deleted jobs, which keep their quota until it says 0)."""
        answer = self.client.request("GET", f"/api/v1/namespaces/{namespace}/pods",
                                     query=(("labelSelector", selector),), obj=f"pods of {selector}")
        return sum(1 for p in cast(ObjectList, answer or {}).get("items") or ()
                   if (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed"))

    def run(self, stop: threading.Event, may_write: Callable[[], bool]) -> None:
        while not self._term.acquire(timeout=0.5):  # the last term's thread is still closing its parts
            if stop.is_set():
                return
        try:
            if self._terms:
                self.synced.clear()
                self._build()
                _log.info("admission loop leads again", term=self._terms + 1)
            self._terms += 1
            self._run_term(stop, may_write)
        finally:
            self._term.release()

    def _run_term(self, stop: threading.Event, may_write: Callable[[], bool]) -> None:
        self.writer.may_write = may_write
        self.cache.start()
        try:
            while not stop.is_set() and not self.cache.wait_synced(timeout=0.5):
                pass
            self.synced.set()
            _log.info("admission loop synced", workloads=len(self.cache.items("workloads")), engine=str(ENGINE))
            while not stop.is_set():
                self.cache.changed.clear()
                started, cpu = time.monotonic(), time.thread_time()
                ran = may_write()
                if ran:
                    self.once()
                self.progress.passed(time.monotonic() - started, self.admission.admissions_written,
                                     time.thread_time() - cpu, capped=self.admission.capped if ran else 0,
                                     answer=self.admission.pace.answer if ran else 0.0,
                                     writes=self.admission.write_seconds if ran else None)
                if self.writer.writes_since_pass == 0 and not self.admission.backlog:
                    wait = min(self.options.resync, self.options.queue_status_interval) if self.queues.deferred \
                        else self.options.resync
                    self.admission.pace.idle()
                    self._wait_for_change(stop, wait)
                    time.sleep(0.02)  # let a burst of watch events land before the next pass
                else:  # work waits for tokens: small frequent passes, not a busy loop
                    stop.wait(self.admission.pace.rest(time.monotonic() - started, self._fill_seconds()))
        finally:
            events = self.events
            _log.info("admission loop stopped", passes=self.passes, requests=dict(self.client.counts),
                        by_kind=dict(self.client.by_kind), throttled_seconds=round(self.client.waited, 1),
                        events_sent=events.sent if events else 0, events_dropped=events.dropped if events else 0)
            self.queues.close()
            self.cache.stop()
            self.admission.close()
            if self.events is not None:
                self.events.close()

    def _fill_seconds(self) -> float:
        """How long until the Workload token bucket is full at the client's rate (no bucket: never)."""
        bucket = self.writer.workload_bucket
        if bucket is None or self.options.qps <= 0:
            return float("inf")
        return max(0.0, bucket.burst - bucket.level()) / self.options.qps

    def _wait_for_change(self, stop: threading.Event, seconds: float) -> None:
        """Until the cache changes, ``stop`` is set (looked at every 0.2 s: a stop request ends the loop
        promptly, not after a resync's wait) or ``seconds`` pass."""
        deadline = time.monotonic() + seconds
        while not stop.is_set():
            left = deadline - time.monotonic()
            if left <= 0 or self.cache.changed.wait(min(0.2, left)):
                return

    def once(self) -> None:
        self.passes += 1
        self._apply_configuration()
        self.writer.mark()
        try:
            self.integrations.refresh()
            self.jobs.integrations = self.integrations.ready()
            self.jobs.reconcile()
            self.admission.run()
            topology = self.admission.topology()
            cq_tally, lq_tally = self.queues.run(topology, time.time(), count_finished=self.metrics is not None)
            if self.metrics is not None:
                self.metrics.observe_queues(topology, cq_tally, lq_tally, self.admission.reasons,
                                            {n: t.finished for n, t in cq_tally.items()},
                                            active=self.admission.active, lq_active=self.admission.lq_active,
                                            shares=self.admission.shares)
        except ClusterError as err:
            _log.warning("admission pass failed; retrying", error=str(err))
            time.sleep(0.5)


__all__ = ["AdmissionLoop", "FaultPoint", "LoopOptions", "Progress", "main"]  # what the controller wires


def main(argv: list[str] | None = None) -> int:
    """``python -m gitopsq.admission_loop.loop``: the loop alone, no leader election (tests, benchmarks);
    $GITOPSQ_FAULT, read once here, arms the crash-test hook."""
    parser = argparse.ArgumentParser(prog="gitopsq-admission-loop")
    parser.add_argument("--kubeconfig")
    parser.add_argument("--qps", type=float, default=50.0)
    parser.add_argument("--burst", type=int, default=100)
    parser.add_argument("--metrics-addr", default="")
    parser.add_argument("--no-events", action="store_true")
    parser.add_argument("--integrations", default="batch/job", help="Kueue framework names, comma-separated")
    args = parser.parse_args(argv)
    logs.configure(json=True)
    metrics: KueueMetrics | None = None
    if args.metrics_addr:
        metrics = KueueMetrics()
        serve(args.metrics_addr, metrics.registry)
    loop = AdmissionLoop(load_api_client(args.kubeconfig),
                         LoopOptions(qps=args.qps, burst=args.burst, events=not args.no_events,
                                     integrations=tuple(args.integrations.split(","))), metrics=metrics,
                         fault=FaultPoint.from_environ())
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    loop.run(stop, lambda: True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
