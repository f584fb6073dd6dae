"""Kueue's per-queue state series (pending, reserving, quotas, usage, status, shares), rendered when scraped.

The admission loop hands over its tallies after every pass (`QueueState.observe`: one attribute set, nothing
else); the series are built from the latest of them only when Prometheus asks (`collect`). A pass used to clear
and set every labelled child of two dozen gauges instead (about 25 per ClusterQueue and 10 per LocalQueue, every
pass, several passes a second), which cost more CPU than the scrapes themselves and grew with the queue count.
Names, help texts and labels are the gauges' (docs/metrics.md).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from prometheus_client import CollectorRegistry
from prometheus_client.core import GaugeMetricFamily

_CQ_RES = ["cohort", "cluster_queue", "flavor", "resource", "replica_role"]
_LQ_RES = ["name", "namespace", "flavor", "resource", "replica_role"]
_UNIT = 1000.0  # tallies count milli-units


@dataclass(frozen=True, slots=True)
class Snapshot:
    """One pass's view of the queues (queue_status.py's tallies and the pass's pending reasons)."""

    topology: Any
    cq_tally: Mapping[str, Any]
    lq_tally: Mapping[str, Any]
    reasons: Iterable[tuple[str, str]]  # (ClusterQueue, pending reason) per waiting Workload
    active: Mapping[str, int] = field(default_factory=dict)  # pending, still in the admission queue, per CQ
    lq_active: Mapping[str, int] = field(default_factory=dict)  # the same per LocalQueue (namespace/name)
    # fair sharing's weighted shares: ClusterQueue -> (cohort, share), cohort -> share; None without fair sharing
    shares: tuple[Mapping[str, tuple[str, float]], Mapping[str, float]] | None = None


@dataclass(frozen=True, slots=True)
class _NoQueues:
    queues: Mapping[str, Any] = field(default_factory=dict)
    local_queues: Mapping[tuple[str, str], Any] = field(default_factory=dict)
    cohort_parents: Mapping[str, str | None] = field(default_factory=dict)


_EMPTY = Snapshot(_NoQueues(), {}, {}, ())  # every family named, none with a sample


def _lq_active(topology: Any, lq: Any) -> bool:
    """A LocalQueue's ``Active`` condition as queue_status.py writes it: not stopped, its ClusterQueue active."""
    spec = topology.queues.get(lq.cluster_queue)
    return lq.stop_policy == "None" and spec is not None and spec.active


class QueueState:
    """A collector without ``describe`` (the registry then checks no names): its families are those of the last
    snapshot, and none before the first or after `clear` (a follower serves no queue state)."""

    def __init__(self, registry: CollectorRegistry, role: str) -> None:
        self.role = role
        self.snapshot: Snapshot | None = None
        registry.register(self)

    def observe(self, snapshot: Snapshot) -> None:
        self.snapshot = snapshot  # one reference swap: a scrape sees the old snapshot or the new, never a mix

    def clear(self) -> None:
        self.snapshot = None

    def collect(self) -> Iterator[GaugeMetricFamily]:
        """Every family, with no samples before the first snapshot or after `clear` (as a cleared gauge)."""
        s = self.snapshot or _EMPTY
        role = self.role
        yield from _cluster_queue_families(s, role)
        yield from _local_queue_families(s, role)
        cq_share = GaugeMetricFamily("kueue_cluster_queue_weighted_share", "Weighted dominant resource share",
                                     labels=["cluster_queue", "cohort", "replica_role"])
        cohort_share = GaugeMetricFamily("kueue_cohort_weighted_share", "Weighted dominant resource share",
                                         labels=["cohort", "replica_role"])
        if s.shares is not None:  # samples only with fair sharing on, as Kueue
            queues, cohorts = s.shares
            for name, (cohort, share) in queues.items():
                cq_share.add_metric([name, cohort, role], share)
            for name, share in cohorts.items():
                cohort_share.add_metric([name, role], share)
        yield cq_share
        yield cohort_share


def _family(name: str, doc: str, labels: list[str]) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, doc, labels=labels)


def _cluster_queue_families(s: Snapshot, role: str) -> Iterator[GaugeMetricFamily]:
    topology = s.topology
    pending = _family("kueue_pending_workloads", "Pending workloads", ["cluster_queue", "status", "replica_role"])
    alias_pending = _family("kueue_workload_pending_total", "Alias: pending workloads (kueue_pending_workloads "
                            "summed over status)", ["clusterqueue"])
    reserving = _family("kueue_reserving_active_workloads", "Workloads holding quota",
                        ["cluster_queue", "replica_role"])
    admitted = _family("kueue_admitted_active_workloads", "Admitted, unfinished workloads",
                       ["cluster_queue", "replica_role"])
    status = _family("kueue_cluster_queue_status", "ClusterQueue status (1 = current)",
                     ["cluster_queue", "status", "replica_role"])
    info = _family("kueue_cluster_queue_info", "ClusterQueue placement in the cohort tree",
                   ["cluster_queue", "parent_cohort", "root_cohort", "replica_role"])
    nominal = _family("kueue_cluster_queue_nominal_quota", "Nominal quota", _CQ_RES)
    borrowing = _family("kueue_cluster_queue_borrowing_limit", "Borrowing limit", _CQ_RES)
    lending = _family("kueue_cluster_queue_lending_limit", "Lending limit", _CQ_RES)
    reservation = _family("kueue_cluster_queue_resource_reservation", "Reserved quota", _CQ_RES)
    usage = _family("kueue_cluster_queue_resource_usage", "Quota used by admitted workloads", _CQ_RES)
    alias_used = _family("kueue_clusterqueue_used_resources", "Alias: quota reserved "
                         "(kueue_cluster_queue_resource_reservation)", ["clusterqueue", "flavor", "resource"])
    alias_available = _family("kueue_clusterqueue_available_resources", "Alias: nominal quota not reserved "
                              "(nominal - reservation, at least 0)", ["clusterqueue", "flavor", "resource"])
    for name, spec in topology.queues.items():
        t = s.cq_tally[name]
        fresh = min(t.pending, s.active.get(name, 0))
        pending.add_metric([name, "inadmissible", role], t.pending - fresh)
        pending.add_metric([name, "active", role], fresh)
        alias_pending.add_metric([name], t.pending)
        reserving.add_metric([name, role], t.reserving)
        admitted.add_metric([name, role], t.admitted)
        current = "active" if spec.active else "pending"
        for state in ("pending", "active", "terminating"):
            status.add_metric([name, state, role], int(state == current))
        cohort = spec.cohort or ""
        root = cohort
        while root and topology.cohort_parents.get(root):
            root = topology.cohort_parents[root] or root
        info.add_metric([name, cohort, root, role], 1)
        for (flavor, res), lim in spec.limits.items():
            labels = [cohort, name, flavor, res, role]
            reserved = t.reserved.get((flavor, res), 0)
            nominal.add_metric(labels, lim.nominal / _UNIT)
            if lim.borrowing is not None:
                borrowing.add_metric(labels, lim.borrowing / _UNIT)
            if lim.lending is not None:
                lending.add_metric(labels, lim.lending / _UNIT)
            reservation.add_metric(labels, reserved / _UNIT)
            usage.add_metric(labels, t.used.get((flavor, res), 0) / _UNIT)
            alias_used.add_metric([name, flavor, res], reserved / _UNIT)
            alias_available.add_metric([name, flavor, res], max(0, lim.nominal - reserved) / _UNIT)
    counts: dict[tuple[str, str], int] = {}
    for cq, reason in s.reasons:
        counts[(cq, reason)] = counts.get((cq, reason), 0) + 1
    unadmitted = _family("kueue_unadmitted_workloads", "Pending workloads by reason",
                         ["cluster_queue", "reason", "underlying_cause", "replica_role"])
    for (cq, reason), n in counts.items():
        unadmitted.add_metric([cq, reason, "", role], n)
    yield from (pending, alias_pending, reserving, admitted, status, info, nominal, borrowing, lending, reservation,
                usage, alias_used, alias_available, unadmitted)


def _local_queue_families(s: Snapshot, role: str) -> Iterator[GaugeMetricFamily]:
    lq = ["name", "namespace"]
    pending = _family("kueue_local_queue_pending_workloads", "Pending workloads", [*lq, "status", "replica_role"])
    reserving = _family("kueue_local_queue_reserving_active_workloads", "Workloads holding quota",
                        [*lq, "replica_role"])
    admitted = _family("kueue_local_queue_admitted_active_workloads", "Admitted workloads", [*lq, "replica_role"])
    reservation = _family("kueue_local_queue_resource_reservation", "Reserved quota", _LQ_RES)
    usage = _family("kueue_local_queue_resource_usage", "Quota used by admitted workloads", _LQ_RES)
    status = _family("kueue_local_queue_status", "LocalQueue Active condition (1 = current)",
                     [*lq, "active", "replica_role"])
    for key, t in s.lq_tally.items():
        ns, _, name = key.partition("/")
        fresh = min(t.pending, s.lq_active.get(key, 0))
        pending.add_metric([name, ns, "inadmissible", role], t.pending - fresh)
        pending.add_metric([name, ns, "active", role], fresh)
        reserving.add_metric([name, ns, role], t.reserving)
        admitted.add_metric([name, ns, role], t.admitted)
        for (flavor, res), milli in t.reserved.items():
            reservation.add_metric([name, ns, flavor, res, role], milli / _UNIT)
        for (flavor, res), milli in t.used.items():
            usage.add_metric([name, ns, flavor, res, role], milli / _UNIT)
    for (ns, name), local in s.topology.local_queues.items():
        status.add_metric([name, ns, "True" if _lq_active(s.topology, local) else "False", role], 1)
    yield from (pending, reserving, admitted, reservation, usage, status)
