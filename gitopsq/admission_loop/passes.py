"""One admission pass (step 2 of the loop, loop.py): the admission core's decisions written back.

The engine is rebuilt from the cache (admitted Workloads are the source of truth for usage: a restart loses
nothing) and settles ``now``. Writes: evictions first, then, only in quota trees where nothing was evicted this
pass, admissions in the engine's order, about a second of the request budget per pass (the rest is decided afresh
next pass: late high-priority arrivals are not stuck behind a long batch); then the pending reasons of queue heads
whose reason changed, from tokens admissions leave. The pass also evicts deactivated Workloads and those past
their maximum execution time (lifecycle.py) or not ready in time, and requeues the ones whose backoff is over or
that were reactivated (pods_ready.py); backing-off Workloads never reach the engine.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor

from gitopsq import logs
from gitopsq.admission.topology import Topology
from gitopsq.admission_loop import checks as admission_checks
from gitopsq.admission_loop import pace
from gitopsq.admission_loop.decisions import MIN_WINDOW, Decisions, decide, next_window, window_floor
from gitopsq.admission_loop.integrations import INTEGRATIONS
from gitopsq.admission_loop.lifecycle import DEACTIVATION_TARGET, Deactivate, lifecycle, reactivated
from gitopsq.admission_loop.live_workload import (
    ADMITTED,
    EVICTING,
    FINISHED,
    LiveWorkload,
    queue_objects,
    read_workload,
    topology_of,
)
from gitopsq.admission_loop.options import NO_FAULT, FaultPoint, LoopOptions
from gitopsq.admission_loop.partial import with_counts
from gitopsq.admission_loop.pass_audit import PassAudit
from gitopsq.admission_loop.pass_metrics import ReadyWatch, pending_gauges, queued_at
from gitopsq.admission_loop.pods_ready import TIMEOUT_REASON, block_admissions, queue_view, timeouts
from gitopsq.admission_loop.ports import AdmissionMetrics, DecisionSink, WatchCache, WorkloadWriter
from gitopsq.admission_loop.rate_limited import TokenBucket
from gitopsq.admission_loop.workload_status import (
    Flavors,
    admission_status,
    condition,
    is_true,
    iso,
    set_condition,
)
from gitopsq.admission_loop.writer import workload_path
from gitopsq.api.raw_objects import Condition, MergePatch
from gitopsq.cluster.kinds import TOPOLOGY
from gitopsq.cluster.kube import ClusterConflict, ClusterNotFound
from gitopsq.errors import ClusterError

_log = logs.get("admission")

PENDING_ABOVE = 0.9  # pending reasons use only Workload tokens above this fraction of the burst (`pending_budget`)
# What a pass waits for its writes on, in `AdmissionPass.write_seconds`: evictions and deactivations, admissions,
# pending reasons, and the rest (requeues, checks-ready admissions). A pass waits for every answer, so while the API
# server is slow these, not the decision, make up the pass (and the rest after it).
WRITE_PHASES = ("evictions", "admissions", "pending_reasons", "other")


def _owned_by_job(w: LiveWorkload) -> bool:
    kinds = {i.kind for i in INTEGRATIONS}
    return any(r.get("controller") and r.get("kind") in kinds for r in (w.raw.get("metadata") or {}).get(
        "ownerReferences") or ())


class AdmissionPass:
    """Step 2 of the module docstring, with its bookkeeping (last message writes, metrics hooks)."""

    def __init__(self, cache: WatchCache, writer: WorkloadWriter, options: LoopOptions,
                 metrics: AdmissionMetrics | None = None, *, clock: Callable[[], float] = time.time,
                 audit: DecisionSink | None = None, fault: FaultPoint = NO_FAULT) -> None:
        self.cache, self.writer, self.options, self.metrics, self.clock = cache, writer, options, metrics, clock
        self.fault = fault
        self.audit = PassAudit(audit)  # audit: a gitopsq.audit AuditSink, or None
        self._topology: Topology | None = None
        self._topology_generation: tuple[object, ...] = ()
        self._message_written: dict[str, float] = {}
        self._running: set[str] = set()
        self.last: Decisions = Decisions()
        self.reasons: list[tuple[str, str]] = []
        self.active: dict[str, int] = {}  # per ClusterQueue, pending workloads still in the admission queue
        self.lq_active: dict[str, int] = {}  # the same per LocalQueue (namespace/name)
        self.shares: tuple[dict[str, tuple[str, float]], dict[str, float]] | None = None
        self._ready = ReadyWatch(metrics, clock()) if metrics is not None else None
        self.backlog = 0  # pending reasons and admissions left for the next pass
        self.capped = 0  # admissions decided but left for the next pass
        self.write_seconds = dict.fromkeys(WRITE_PHASES, 0.0)  # the last pass's waits for its writes, by phase
        self.admissions_written = 0  # admission writes attempted, all passes (progress log)
        self.pace = pace.Pace(options)  # how many admissions a pass writes, how long the loop rests after it
        self._window = MIN_WINDOW  # waiting Workloads per group the next pass gives the engine (`next_window`)
        self._window_floor = MIN_WINDOW  # at least that many (`window_floor`: fewer when groups are many)
        share = max(1.0, options.qps * options.pending_share)
        self._pending_bucket = TokenBucket(share, max(1, int(options.qps)))
        self._pool = ThreadPoolExecutor(max_workers=options.writers(), thread_name_prefix="admission-write")

    def reconfigure(self, options: LoopOptions) -> None:
        """New engine settings (gitopsq.yaml's ``admission`` block): the topology is rebuilt with them."""
        self.options = options
        self.pace.options = options
        self._topology = None

    def topology(self) -> Topology:
        generation = self._topology_key()
        if self._topology is None or generation != self._topology_generation:
            topology = topology_of(queue_objects(self.cache), self.options.settings)
            if self.cache.watches("admissionchecks"):  # an AdmissionCheck not Active makes its queues inactive
                topology = admission_checks.with_inactive_checks(
                    topology, admission_checks.inactive_checks(self.cache.items("admissionchecks")))
            self._topology = topology
            self._topology_generation = generation
        return self._topology

    def _topology_key(self) -> tuple[object, ...]:
        """What the topology depends on. Queues count by their shape (objects, uid, metadata.generation): their
        status, which this loop writes several times a second, never changes the topology, so it does not force a
        rebuild (nor, with a thousand queues, a walk over them every pass to find that out)."""
        key: list[object] = []
        for name in TOPOLOGY:
            if not self.cache.watches(name):
                continue
            key.append(self.cache.shape((name,)) if name in ("clusterqueues", "localqueues")
                       else self.cache.generation((name,)))
        return tuple(key)

    def run(self) -> Decisions:
        now = self.clock()
        started = time.monotonic()
        self.write_seconds = dict.fromkeys(WRITE_PHASES, 0.0)
        topology = self.topology()
        cap = self.admission_cap()
        window = max(self._window_floor, min(cap, self._window))
        # The index hands over only what the engine needs: quota holders and the oldest ``window`` of each group
        # of identical waiting Workloads (decide's window, precomputed); with metrics to feed, also how many of
        # each group wait beyond it. A cache built without an index (unit tests) is read whole.
        metered = self.metrics is not None
        live, beyond = self.cache.indexed("workloads", lambda ix: (ix.window(window), ix.beyond(window) if metered
                                                                   else {})) or (None, {})
        if live is None:
            live = {w.key: w for w in self.cache.live_views("workloads", read_workload) if w is not None}
        for key in self._running.difference(live):  # finished since the last pass: before what its quota allows
            raw = self.cache.get("workloads", key)
            w = read_workload(raw) if raw is not None else None
            if w is not None and w.state == FINISHED:
                if self.metrics is not None:
                    self.metrics.workload_finished(w)
                self.audit.submit("finished", w, w.cluster_queue or "", w.flavors, now, reason="Finished")
        pods_ready = self.options.wait_for_pods_ready
        if pods_ready.enable:  # backing-off Workloads stay out; those whose wait is over are requeued (pods_ready.py)
            live, due = queue_view(live, now, pods_ready)
            self._timed("other", [functools.partial(self._requeue, w, now) for w in due])
        live, due = admission_checks.queue_view(live, now)  # a Retry check's backoff: out, then requeued
        self._timed("other", [functools.partial(self._requeue, w, now) for w in due])
        woken = reactivated(live)  # active again after a deactivation: requeued first, admitted in a later pass
        if woken:
            live = {k: w for k, w in live.items() if w not in woken}
            self._timed("other", [functools.partial(self._requeue, w, now, reason="Reactivated") for w in woken])
        decisions = decide(topology, live, now, self.options.pending_heads, window=window,
                           explain_all=self.metrics is not None, enough=cap)
        block_admissions(decisions, live, pods_ready)  # blockAdmission: nothing new while a gang is not ready
        life = lifecycle(live, now)  # deactivations and maximum execution times (lifecycle.py)
        late = timeouts(live, now, pods_ready)
        checked = admission_checks.outcomes(live, now)  # Retry evicts, Rejected deactivates (checks.py)
        decisions.evict.update(checked.evict)
        decisions.evict.update(life.evict)
        decisions.evict.update(late.evict)
        evicting = time.monotonic()
        for key, deactivate in sorted((life.deactivate | late.deactivate).items()):
            self._deactivate(live[key], deactivate, now)
        for key, deactivate in sorted(checked.deactivate.items()):
            if key not in life.deactivate and key not in life.evict:
                self._deactivate(live[key], deactivate, now, event_reason="AdmissionCheckRejected")
        for key, eviction in sorted(decisions.evict.items()):
            self._evict(live[key], eviction.kind, eviction.reason, eviction.message, now,
                        requeue_state=eviction.requeue_state)
        if decisions.evict or life.deactivate or late.deactivate or checked.deactivate:
            self.write_seconds["evictions"] += time.monotonic() - evicting
        if decisions.evict:
            self.fault("after-preempt")
        # In the engine's order (round-robin over ClusterQueues, priority within each) and about a second of
        # the budget per pass: the rest is decided again next pass, with whatever arrived meanwhile.
        chosen = list(decisions.admit.items())[:cap]
        self.capped = len(decisions.admit) - len(chosen)
        self._window = next_window(window, [live[key] for key in decisions.admit], decisions.groups)
        self._window_floor = window_floor(decisions.groups)
        self.admissions_written += len(chosen)
        admissions = [functools.partial(self._admit, live[key], a.cluster_queue, a.flavors, a.checks, now,
                                        a.counts)
                      for key, a in chosen]
        if self.fault.armed("after-reserve") and admissions:
            admissions[0]()
            self.fault("after-reserve")
        bucket = self.writer.workload_bucket
        self.pace.issue(time.monotonic(), started, len(admissions), bucket.level() if bucket is not None else None)
        self._timed("admissions", admissions)
        if admissions:
            self.pace.answered(time.monotonic())
        ready = [w for w in live.values() if w.state == ADMITTED and admission_checks.all_ready(w.raw)]
        self._timed("other", [functools.partial(self._checks_ready, w, now) for w in ready
                              if not is_true(w.raw, "Admitted")])
        # Pending reasons wait behind admissions (`pending_budget`); one not written now is, later, if still true.
        pending = [functools.partial(self._pending, live[key], p.reason, p.message, now)
                   for key, p in sorted(decisions.pending.items(), key=lambda kv: (live[kv[0]].created, kv[0]))
                   if self._pending_due(live[key], p.reason, p.message, now)]
        budget = self.pending_budget(len(pending))
        self._timed("pending_reasons", pending[:budget])
        self.backlog = len(pending) - min(len(pending), budget) + self.capped
        if self.metrics is not None:  # every waiting workload's reason, for the pending-workloads gauges
            self.reasons, self.active, self.lq_active = pending_gauges(decisions, live, beyond, topology)
            self.shares = (decisions.shares, decisions.cohort_shares) if topology.settings.fair_sharing else None
            if self._ready is not None:
                self._ready.observe(live)
        self._running = {k for k, w in live.items() if w.state in (ADMITTED, EVICTING)} | {k for k, _ in chosen}
        self.audit.durable()  # one WAL fsync for every decision this pass wrote
        if self.metrics is not None:
            self.metrics.attempt(len(decisions.admit), len(decisions.pending), time.monotonic() - started)
        self.last = decisions
        self.pace.done(started, time.monotonic())
        return decisions

    def pending_budget(self, due: int) -> int:
        """How many of ``due`` pending reasons this pass writes: within their share (``pending_share``), from Workload
        tokens above `PENDING_ABOVE` of the burst only (a full bucket would lose them): while the budget limits
        admissions all of it goes to them (Kueue's benchmark: ~1,000 reasons written then cost the last one 20 s)."""
        bucket = self.writer.workload_bucket
        spare = int(bucket.level() - bucket.burst * PENDING_ABOVE) if bucket is not None else due
        budget = 0
        while budget < min(due, spare) and self._pending_bucket.try_take():
            budget += 1
        return budget

    def admission_cap(self) -> int:
        """`pace.Pace.cap` with this pass's Workload bucket."""
        bucket = self.writer.workload_bucket
        if bucket is None:
            return self.pace.cap(None, max(1, int(2 * self.options.qps)))
        return self.pace.cap(bucket.level(), bucket.burst)

    def close(self) -> None:
        """End the write pool (the term is over; writes still in flight finish first)."""
        self._pool.shutdown(wait=True, cancel_futures=True)

    def _timed(self, phase: str, calls: Sequence[Callable[[], None]]) -> None:
        """`_parallel`, its wall time counted in ``write_seconds[phase]``."""
        if not calls:
            return
        started = time.monotonic()
        self._parallel(calls)
        self.write_seconds[phase] += time.monotonic() - started

    def _parallel(self, calls: Sequence[Callable[[], None]]) -> None:
        """Run independent status writes concurrently; the client's token bucket still bounds the rate."""
        if len(calls) <= 1:
            for call in calls:
                call()
            return
        for future in [self._pool.submit(call) for call in calls]:
            future.result()

    def _write(self, w: LiveWorkload, status: MergePatch) -> bool:
        try:
            self.writer.workload_status(w.raw, status)
            return True
        except ClusterConflict:
            _log.debug("workload changed under us; recomputing next pass", workload=w.key)
        except ClusterNotFound:
            self.cache.forget("workloads", w.key)
        except ClusterError as err:
            _log.warning("workload status not written", workload=w.key, error=str(err))
        return False

    def _conditions(self, w: LiveWorkload) -> list[Condition]:
        return [c.copy() for c in (w.raw.get("status") or {}).get("conditions") or ()]

    def _deactivate(self, w: LiveWorkload, deactivate: Deactivate, now: float, *, event_reason: str = "") -> None:
        """Kueue's first two deactivation steps: the ``DeactivationTarget`` mark, then ``spec.active: false``;
        the eviction follows in a later pass (lifecycle.py)."""
        if deactivate.event:
            conds = self._conditions(w)
            set_condition(conds, DEACTIVATION_TARGET, "True", deactivate.reason, deactivate.message, now)
            if not self._write(w, {"conditions": conds, "accumulatedPastExecutionTimeSeconds": None}):
                return
            self.writer.event(w.raw, "Workload", event_reason or deactivate.reason, deactivate.event, warning=True)
        try:
            self.writer.patch("workloads", workload_path(w.namespace, w.name), {"spec": {"active": False}},
                              f"Workload/{w.key}")
        except ClusterError as err:
            _log.info("workload not deactivated yet", workload=w.key, error=str(err))

    def _requeue(self, w: LiveWorkload, now: float, *, reason: str = "BackoffFinished") -> None:
        """Back into the queue (Kueue): a Workload evicted for not getting ready has waited out its backoff
        (``BackoffFinished``), or a deactivated one is active again (``Reactivated``)."""
        conds = self._conditions(w)
        if reason == "Reactivated":
            set_condition(conds, "Requeued", "True", reason, "The workload was reactivated", now)
            self._write(w, {"conditions": conds})
            return
        set_condition(conds, "Requeued", "True", "BackoffFinished", "The workload backoff was finished", now)
        requeue_state: MergePatch = {**((w.raw.get("status") or {}).get("requeueState") or {})}
        requeue_state["requeueAt"] = None
        self._write(w, {"conditions": conds, "requeueState": requeue_state})

    def _evict(self, w: LiveWorkload, kind: str, reason: str, message: str, now: float,  # noqa: PLR0917
               requeue_state: Mapping[str, object] | None = None) -> None:
        conds = self._conditions(w)
        if reason.startswith("DeactivatedDueTo"):  # the mark has done its work (Kueue drops it on eviction)
            conds = [c for c in conds if c.get("type") != DEACTIVATION_TARGET]
        status: MergePatch = {"conditions": conds}
        if requeue_state is not None:
            status["requeueState"] = dict(requeue_state)
        elif reason.startswith("Deactivated"):
            status["requeueState"] = None  # Kueue forgets past requeues of a deactivated Workload
        set_condition(conds, "Evicted", "True", "Preempted" if kind == "Preempted" else reason, message, now)
        if admission_checks.states(w.raw):  # Kueue: every eviction sends the checks back to Pending
            status["admissionChecks"] = admission_checks.reset(admission_checks.states(w.raw), now)
        if kind == "Preempted":
            set_condition(conds, "Preempted", "True", reason, message, now)
        if not _owned_by_job(w):  # nothing to stop: the quota goes back at once
            status["admission"] = None
            set_condition(conds, "QuotaReserved", "False", "Pending", message, now)
            set_condition(conds, "Admitted", "False", "NoReservation", "The workload has no reservation", now)
            # deactivated: out until reactivated; timed out or a check's Retry: out until its backoff is over
            held = reason.startswith("Deactivated") or reason in (TIMEOUT_REASON, admission_checks.REASON)
            requeued = "False" if held else "True"
            set_condition(conds, "Requeued", requeued, "Preempted" if kind == "Preempted" else reason, message, now)
        if self._write(w, status):
            self.writer.event(w.raw, "Workload", "Preempted" if kind == "Preempted" else "Evicted", message)
            self.audit.submit("preempted" if kind == "Preempted" else "evicted", w, w.cluster_queue or "", w.flavors,
                              now, reason=reason, message=message, times={"created": w.created, "evicted": now})
            if self.metrics is not None:
                self.metrics.evicted(w, kind, reason, message)

    def _admit(self, w: LiveWorkload, cq: str, flavors: Flavors, checks: tuple[str, ...], now: float,  # noqa: PLR0917
               counts: Mapping[str, int] | None = None) -> None:
        conds = self._conditions(w)
        pod_sets = with_counts(w.pod_sets, counts) if counts else w.pod_sets  # partial admission: as admitted
        status: MergePatch = {"admission": admission_status(cq, pod_sets, flavors), "conditions": conds}
        set_condition(conds, "QuotaReserved", "True", "QuotaReserved", f"Quota reserved in ClusterQueue {cq}", now)
        for kind in ("Evicted", "Preempted"):
            old = condition(w.raw, kind)
            if old is not None and old.get("status") == "True":
                set_condition(conds, kind, "False", "QuotaReserved", f"Previously: {old.get('message', '')}", now)
        if checks:
            status["admissionChecks"] = [{"name": c, "state": "Pending", "message": "",
                                          "lastTransitionTime": iso(now)} for c in checks]
            set_condition(conds, "Admitted", "False", "UnsatisfiedAdmissionChecks",
                          "The workload has not all checks ready", now)
        else:
            set_condition(conds, "Admitted", "True", "Admitted", "The workload is admitted", now)
        if not self._write(w, status):
            return
        milestones = {"created": w.created, "quotaReserved": now} | ({} if checks else {"admitted": now})
        if not checks:
            self.audit.submit("admitted", w, cq, flavors, now, reason="Admitted", times=milestones)
        waited = max(0.0, now - queued_at(w))
        self.writer.event(w.raw, "Workload", "QuotaReserved",
                          f"Quota reserved in ClusterQueue {cq}, wait time since queued was {round(waited)}s")
        if not checks:
            self.writer.event(w.raw, "Workload", "Admitted",
                              f"Admitted by ClusterQueue {cq}, wait time since reservation was 0s")
        if self.metrics is not None:
            self.metrics.admitted(w, cq, waited, checks=bool(checks))

    def _checks_ready(self, w: LiveWorkload, now: float) -> None:
        """Every admission check of a quota-reserving Workload is Ready: it is Admitted (Kueue)."""
        conds = self._conditions(w)
        set_condition(conds, "Admitted", "True", "Admitted", "The workload is admitted", now)
        if self._write(w, {"conditions": conds}):
            cq = w.cluster_queue or ""
            self.writer.event(w.raw, "Workload", "Admitted", f"Admitted by ClusterQueue {cq}")
            self.audit.submit("admitted", w, cq, w.flavors, now, reason="Admitted",
                              times={"created": w.created, "quotaReserved": w.reserved_at, "admitted": now})
            if self.metrics is not None:
                self.metrics.admitted(w, cq, max(0.0, now - queued_at(w)), checks=False, reserved=False,
                                      checks_waited=max(0.0, now - w.reserved_at))

    def _pending_due(self, w: LiveWorkload, reason: str, message: str, now: float) -> bool:
        """Whether the pending condition needs a write: a new reason, or a new message once per refresh."""
        old = condition(w.raw, "QuotaReserved")
        if old is not None and old.get("status") == "False" and old.get("reason") == reason:
            if old.get("message") == message:
                return False
            last = self._message_written.get(w.key, 0.0)
            return now - last >= self.options.message_refresh  # same reason: no churn for a changed count
        return True

    def _pending(self, w: LiveWorkload, reason: str, message: str, now: float) -> None:
        old = condition(w.raw, "QuotaReserved")
        conds = self._conditions(w)
        set_condition(conds, "QuotaReserved", "False", reason, message, now)
        if self._write(w, {"conditions": conds}):
            self._message_written[w.key] = now
            if old is None or old.get("reason") != reason:
                self.writer.event(w.raw, "Workload", reason, message, warning=True)

