"""ClusterQueue and LocalQueue status as Kueue writes it, written only when it changed.

ClusterQueue: ``Active`` condition (``Ready`` "Can admit new workloads", or the inactive reason and message),
``pendingWorkloads``, ``reservingWorkloads`` (quota reserved), ``admittedWorkloads``, and per flavor and covered
resource the ``total`` and ``borrowed`` (``max(0, total − nominal)``) of ``flavorsReservation`` (every
quota-reserving workload) and ``flavorsUsage`` (admitted ones). LocalQueue: ``Active`` condition, the three
counts, and ``flavorsReservation`` / ``flavorsUsage`` totals of its own workloads.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from typing import cast

from gitopsq import logs
from gitopsq.admission.topology import Topology
from gitopsq.admission_loop.live_workload import ADMITTED, EVICTING, FINISHED, PENDING, LiveWorkload, read_workload
from gitopsq.admission_loop.ports import WatchCache, WorkloadWriter
from gitopsq.admission_loop.rate_limited import TokenBucket
from gitopsq.admission_loop.workload_status import is_true
from gitopsq.admission_loop.workload_status import set_condition as _set
from gitopsq.api.quantity import QuantityFormat, format_milli
from gitopsq.api.queue_objects import ClusterQueueObject, FlavorUsage, LocalQueueObject, QueueStatus, ResourceUsage
from gitopsq.api.raw_objects import Condition
from gitopsq.cluster.kinds import CLUSTER_QUEUE, LOCAL_QUEUE
from gitopsq.errors import ClusterError

_log = logs.get("queue-status")


Usage = dict[tuple[str, str], int]  # (flavor, resource) -> milli


def fmt(resource: str, milli: int) -> str:
    binary = resource in ("memory", "ephemeral-storage") or resource.startswith("hugepages-")
    if binary and milli % 1000 == 0:
        return format_milli(milli, QuantityFormat.BINARY_SI)
    return format_milli(milli)


def _usage(w: LiveWorkload) -> Usage:
    out: Usage = {}
    for ps in w.pod_sets:
        per = w.flavors.get(ps.name, {})
        for res, q in ps.requests.items():
            if res in per:
                out[(per[res], res)] = out.get((per[res], res), 0) + q.milli * ps.count
    return out


class _Tally:
    def __init__(self) -> None:
        self.pending = self.reserving = self.admitted = self.finished = 0
        self.reserved: Usage = {}
        self.used: Usage = {}

    def values(self) -> tuple[object, ...]:
        """What a queue's status is built from (not ``finished``, which only the metrics read)."""
        return self.pending, self.reserving, self.admitted, tuple(self.reserved.items()), tuple(self.used.items())

    def add(self, w: LiveWorkload) -> None:
        if w.state == PENDING:
            self.pending += 1
            return
        usage = _usage(w)
        self.reserving += 1
        for fr, v in usage.items():
            self.reserved[fr] = self.reserved.get(fr, 0) + v
        if is_true(w.raw, "Admitted"):
            self.admitted += 1
            for fr, v in usage.items():
                self.used[fr] = self.used.get(fr, 0) + v


def _flavors(topology: Topology, cq: str, usage: Usage, *, borrowed: bool) -> list[FlavorUsage]:
    spec = topology.queues[cq]
    out: list[FlavorUsage] = []
    for group in spec.groups:
        for flavor in group.flavors:
            resources = []
            for res in group.resources:
                total = usage.get((flavor, res), 0)
                item: ResourceUsage = {"name": res, "total": fmt(res, total)}
                if borrowed:
                    limits = spec.limits.get((flavor, res))
                    item["borrowed"] = fmt(res, max(0, total - (limits.nominal if limits else 0)))
                resources.append(item)
            out.append({"name": flavor, "resources": resources})
    return out


def _lq_flavors(usage: Usage) -> list[FlavorUsage]:
    flavors: dict[str, list[ResourceUsage]] = {}
    for (flavor, res), total in sorted(usage.items()):
        flavors.setdefault(flavor, []).append({"name": res, "total": fmt(res, total)})
    return [{"name": f, "resources": r} for f, r in flavors.items()]


def urgent(old: QueueStatus, new: QueueStatus) -> bool:
    """Whether a queue's new status must not wait for its interval: its ``Active`` condition changed, or it
    turned idle (nothing pending or reserving) or busy. Clients wait for exactly these moments (Kueue's
    benchmark runner stops once no ClusterQueue has pending or reserving workloads); counts and usage in
    between may lag by one interval."""
    def active(status: QueueStatus) -> tuple[object, ...]:
        for c in status.get("conditions") or ():
            if c.get("type") == "Active":
                return (c.get("status"), c.get("reason"))
        return ()

    def idle(status: QueueStatus) -> bool:
        return not status.get("pendingWorkloads") and not status.get("reservingWorkloads")

    return active(old) != active(new) or idle(old) != idle(new)


def _same_conditions(old: list[Condition], new: list[Condition]) -> bool:
    strip = [{k: v for k, v in c.items() if k != "lastTransitionTime"} for c in old]
    return strip == [{k: v for k, v in c.items() if k != "lastTransitionTime"} for c in new]


class QueueStatusWriter:
    """Writes queue status; a queue is written at most once per ``min_interval`` seconds (LocalQueues: per
    ``local_interval``) unless the change is `urgent`, and all queues together within their own share of the
    request budget (``bucket``, non-blocking): a burst of admissions costs one status write per queue, not one
    per workload. Writes that only refresh counts and usage also take a token from ``refresh``, a smaller
    budget: with a thousand busy queues they went out as fast as ``bucket`` allowed, as many as the admissions
    themselves and as much of the API server's CPU, so a queue's counts now lag by up to queues ÷ refresh rate
    when all of them change at once, while turning idle or busy (what clients wait for) still goes out at once.
    ``deferred`` tells the loop to come back. With ``workers`` the writes go out on a small pool and the pass
    does not wait for them (a queue whose previous write is still in flight is left for a later pass), so
    admission passes never queue behind status writes."""

    def __init__(self, cache: WatchCache, writer: WorkloadWriter, *, min_interval: float = 2.0,
                 clock: Callable[[], float] | None = None, bucket: TokenBucket | None = None,
                 refresh: TokenBucket | None = None, local_interval: float | None = None,
                 workers: int = 0) -> None:
        self.cache, self.writer, self.min_interval = cache, writer, min_interval
        self.refresh = refresh
        self.local_interval = min_interval if local_interval is None else local_interval
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="queue-status") if workers else None
        self._in_flight: dict[str, Future[None]] = {}
        self.clock = clock or time.monotonic
        self.bucket = bucket
        self._written: dict[str, float] = {}
        # Per queue path, the inputs (resourceVersion, spec, tally) under which its status was found already
        # written: with a thousand queues, most are idle in a pass, and rebuilding their status to find it
        # unchanged was a sixth of the admission thread's time.
        self._settled: dict[str, tuple[object, ...]] = {}
        self.deferred = False

    def run(self, topology: Topology, now: float, *, count_finished: bool = True
            ) -> tuple[dict[str, _Tally], dict[str, _Tally]]:
        """Write what changed; return the per-ClusterQueue and per-LocalQueue tallies (for metrics; finished
        workloads, which pile up, are counted only with ``count_finished``)."""
        self.deferred = False
        self._due: list[tuple[float, str, str, QueueStatus, bool]] = []
        cq_tally = {name: _Tally() for name in topology.queues}
        lq_tally: dict[str, _Tally] = {}
        # The index (kept by the watch) has the quota holders, the waiting counts and, for metrics, the finished
        # counts: no pass walks every Workload. A cache built without an index (unit tests) is walked instead.
        indexed = self.cache.indexed("workloads", lambda ix: (
            ix.tally(), ix.finished_counts() if count_finished else ({}, {})))
        views = indexed[0][0] if indexed is not None else self.cache.views("workloads", read_workload)
        if indexed is not None:
            (_, waiting), (finished_lq, finished_cq) = indexed
            for (namespace, queue), n in waiting.items():
                lq = topology.local_queues.get((namespace, queue))
                if lq is not None and lq.cluster_queue in cq_tally:
                    cq_tally[lq.cluster_queue].pending += n
                lq_tally.setdefault(f"{namespace}/{queue}", _Tally()).pending += n
            for queue_name, n in finished_cq.items():
                if queue_name in cq_tally:
                    cq_tally[queue_name].finished += n
            for (namespace, queue), n in finished_lq.items():
                lq_tally.setdefault(f"{namespace}/{queue}", _Tally()).finished += n
        for w in views:
            if w is not None and w.state == FINISHED and count_finished:
                if w.cluster_queue in cq_tally:
                    cq_tally[w.cluster_queue].finished += 1
                lq_tally.setdefault(f"{w.namespace}/{w.queue}", _Tally()).finished += 1
            if w is None or w.state not in (ADMITTED, EVICTING, PENDING):
                continue
            lq = topology.local_queues.get((w.namespace, w.queue))
            cq = w.cluster_queue if w.state != PENDING else (lq.cluster_queue if lq else None)
            if cq in cq_tally:
                cq_tally[cq].add(w)
            lq_tally.setdefault(f"{w.namespace}/{w.queue}", _Tally()).add(w)
        seen: set[str] = set()
        for raw in cast(list[ClusterQueueObject], self.cache.items(CLUSTER_QUEUE.plural)):
            name = raw["metadata"]["name"]
            if name in topology.queues:
                seen.add(self._cluster_queue(raw, topology, cq_tally[name], now))
        for local in cast(list[LocalQueueObject], self.cache.items(LOCAL_QUEUE.plural)):
            key = f"{local['metadata']['namespace']}/{local['metadata']['name']}"
            seen.add(self._local_queue(local, topology, lq_tally.get(key) or _Tally(), now))
        if len(self._settled) > len(seen):  # queues gone since: their entries go
            self._settled = {path: inputs for path, inputs in self._settled.items() if path in seen}
        self._flush()
        return cq_tally, lq_tally

    def _cluster_queue(self, raw: ClusterQueueObject, topology: Topology, t: _Tally, now: float) -> str:
        spec = topology.queues[raw["metadata"]["name"]]
        path = CLUSTER_QUEUE.object_path(spec.name)
        inputs = (raw["metadata"].get("resourceVersion"), spec, *t.values())
        if self._settled.get(path) == inputs:
            return path
        old = raw.get("status") or {}
        conds = [c.copy() for c in old.get("conditions") or ()]
        if spec.active:
            _set(conds, "Active", "True", "Ready", "Can admit new workloads", now)
        else:
            _set(conds, "Active", "False", spec.inactive_reason.split(",")[0], spec.inactive_message, now)
        status: QueueStatus = {
            "conditions": conds, "pendingWorkloads": t.pending, "reservingWorkloads": t.reserving,
            "admittedWorkloads": t.admitted,
            "flavorsReservation": _flavors(topology, spec.name, t.reserved, borrowed=True),
            "flavorsUsage": _flavors(topology, spec.name, t.used, borrowed=True)}
        self._write(CLUSTER_QUEUE.plural, raw, old, status, path, inputs)
        return path

    def _local_queue(self, raw: LocalQueueObject, topology: Topology, t: _Tally, now: float) -> str:
        meta = raw["metadata"]
        cq = (raw.get("spec") or {}).get("clusterQueue", "")
        path = LOCAL_QUEUE.object_path(meta["name"], meta["namespace"])
        queue = topology.queues.get(cq)
        inputs = (meta.get("resourceVersion"), None if queue is None else queue.active, *t.values())
        if self._settled.get(path) == inputs:
            return path
        old = raw.get("status") or {}
        conds = [c.copy() for c in old.get("conditions") or ()]
        if ((raw.get("spec") or {}).get("stopPolicy") or "None") != "None":
            _set(conds, "Active", "False", "Stopped", "LocalQueue is stopped", now)
        elif cq not in topology.queues:
            _set(conds, "Active", "False", "ClusterQueueDoesNotExist", "Can't submit new workloads to clusterQueue",
                 now)
        elif not topology.queues[cq].active:
            _set(conds, "Active", "False", "ClusterQueueIsInactive", "Can't submit new workloads to clusterQueue",
                 now)
        else:
            _set(conds, "Active", "True", "Ready", "Can submit new workloads to localQueue", now)
        status: QueueStatus = {
            "conditions": conds, "pendingWorkloads": t.pending, "reservingWorkloads": t.reserving,
            "admittedWorkloads": t.admitted, "flavorsReservation": _lq_flavors(t.reserved),
            "flavorsUsage": _lq_flavors(t.used)}
        self._write(LOCAL_QUEUE.plural, raw, old, status, path, inputs)
        return path

    def _write(self, resource: str, raw: Mapping[str, object], old: QueueStatus, status: QueueStatus,  # noqa: PLR0917
               path: str, inputs: tuple[object, ...]) -> None:
        unchanged = all(old.get(k) == v for k, v in status.items() if k != "conditions")
        if unchanged and _same_conditions(list(old.get("conditions") or ()), status["conditions"]):
            self._settled[path] = inputs
            return
        self._settled.pop(path, None)
        self._due.append((self._written.get(path, -1e9), path, resource, status, urgent(old, status)))

    def _flush(self) -> None:
        """Write the changed queues, longest-unwritten first, within the interval and the budget."""
        tick = self.clock()
        for last, path, resource, status, at_once in sorted(self._due, key=lambda d: (not d[4], d[0], d[1])):
            interval = 0.0 if at_once else self.local_interval if resource == LOCAL_QUEUE.plural else self.min_interval
            flight = self._in_flight.get(path)
            if flight is not None and not flight.done():
                self.deferred = True
                continue
            if tick - last < interval or (not at_once and self.refresh is not None and not self.refresh.try_take()) \
                    or (self.bucket is not None and not self.bucket.try_take()):
                self.deferred = True
                continue
            self._written[path] = tick
            if self._pool is None:
                self._send(resource, path, status)
            else:
                self._in_flight[path] = self._pool.submit(self._send, resource, path, status)
        self._due = []

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)

    def _send(self, resource: str, path: str, status: QueueStatus) -> None:
        try:
            self.writer.queue_status(resource, path, status)
        except ClusterError as err:
            _log.info("queue status not written", queue=path, error=str(err))
