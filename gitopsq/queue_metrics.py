"""Kueue's per-queue state series (pending, reserving, quotas, usage, status, shares), rendered when scraped.

The admission loop hands over its tallies after every pass (`QueueState.observe`: one attribute set, nothing
else); the series are built from the latest of them only when Prometheus asks (`collect`). A pass used to clear
and set every labelled child of two dozen gauges instead (about 25 per ClusterQueue and 10 per LocalQueue, every
pass, several passes a second), which cost more CPU than the scrapes themselves and grew with the queue count.

A scrape a second still rebuilt all of those lines (35,000 with a thousand queues, about a twelfth of the
controller's CPU at that scale) while most queues had not changed since the last one. So each queue's rows and
their text are kept with the values they came from (`KeptRows`) and reused while those are equal; the families
keep their own text for `exposition.render`, as kept_series.py does, and give samples to every other reader.
Names, help texts and labels are the gauges' (docs/metrics.md).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from prometheus_client import CollectorRegistry
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.metrics_core import Metric
from prometheus_client.samples import Sample
from prometheus_client.utils import floatToGoString

from gitopsq.exposition import label_text

_number = cast(Callable[[float], str], floatToGoString)
_UNIT = 1000.0  # tallies count milli-units

Row = tuple[tuple[str, ...], float]  # label values in the family's order, value
Rows = tuple[list[Row], ...]  # one list per family of a group


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


@dataclass(frozen=True, slots=True)
class FamilyName:
    """A family: its name, help text and label names."""

    name: str
    doc: str
    labels: tuple[str, ...]


_CQ_RES = ("cohort", "cluster_queue", "flavor", "resource", "replica_role")
_LQ_RES = ("name", "namespace", "flavor", "resource", "replica_role")
_ALIAS_RES = ("clusterqueue", "flavor", "resource")
_CQ = (  # the order `_cq_rows` fills them in
    FamilyName("kueue_pending_workloads", "Pending workloads", ("cluster_queue", "status", "replica_role")),
    FamilyName("kueue_workload_pending_total", "Alias: pending workloads (kueue_pending_workloads summed over status)",
               ("clusterqueue",)),
    FamilyName("kueue_reserving_active_workloads", "Workloads holding quota", ("cluster_queue", "replica_role")),
    FamilyName("kueue_admitted_active_workloads", "Admitted, unfinished workloads", ("cluster_queue", "replica_role")),
    FamilyName("kueue_cluster_queue_status", "ClusterQueue status (1 = current)",
               ("cluster_queue", "status", "replica_role")),
    FamilyName("kueue_cluster_queue_info", "ClusterQueue placement in the cohort tree",
               ("cluster_queue", "parent_cohort", "root_cohort", "replica_role")),
    FamilyName("kueue_cluster_queue_nominal_quota", "Nominal quota", _CQ_RES),
    FamilyName("kueue_cluster_queue_borrowing_limit", "Borrowing limit", _CQ_RES),
    FamilyName("kueue_cluster_queue_lending_limit", "Lending limit", _CQ_RES),
    FamilyName("kueue_cluster_queue_resource_reservation", "Reserved quota", _CQ_RES),
    FamilyName("kueue_cluster_queue_resource_usage", "Quota used by admitted workloads", _CQ_RES),
    FamilyName("kueue_clusterqueue_used_resources", "Alias: quota reserved (kueue_cluster_queue_resource_reservation)",
               _ALIAS_RES),
    FamilyName("kueue_clusterqueue_available_resources", "Alias: nominal quota not reserved (nominal - reservation, at "
               "least 0)", _ALIAS_RES),
)
_UNADMITTED = FamilyName("kueue_unadmitted_workloads", "Pending workloads by reason",
                         ("cluster_queue", "reason", "underlying_cause", "replica_role"))
_LQ = (  # the order `_lq_rows` fills them in
    FamilyName("kueue_local_queue_pending_workloads", "Pending workloads",
               ("name", "namespace", "status", "replica_role")),
    FamilyName("kueue_local_queue_reserving_active_workloads", "Workloads holding quota",
               ("name", "namespace", "replica_role")),
    FamilyName("kueue_local_queue_admitted_active_workloads", "Admitted workloads",
               ("name", "namespace", "replica_role")),
    FamilyName("kueue_local_queue_resource_reservation", "Reserved quota", _LQ_RES),
    FamilyName("kueue_local_queue_resource_usage", "Quota used by admitted workloads", _LQ_RES),
)
_LQ_STATUS = (FamilyName("kueue_local_queue_status", "LocalQueue Active condition (1 = current)",
                         ("name", "namespace", "active", "replica_role")),)


def _lq_active(topology: Any, lq: Any) -> bool:
    """A LocalQueue's ``Active`` condition as queue_status.py writes it: not stopped, its ClusterQueue active."""
    spec = topology.queues.get(lq.cluster_queue)
    return lq.stop_policy == "None" and spec is not None and spec.active


class Family(Metric):
    """One scrape's gauge family: ``text`` (the kept lines) for `exposition.render`, ``samples`` (built on first
    use) for every other reader of the registry."""

    def __init__(self, name: FamilyName, rows: Sequence[Sequence[Row]], text: Sequence[str]) -> None:
        self.name, self.documentation, self.type, self.unit = name.name, name.doc, "gauge", ""
        self._name, self._rows, self._text = name, rows, text
        self._samples: list[Sample] | None = None

    def text(self) -> str:
        return "".join(self._text)

    @property
    def samples(self) -> list[Sample]:
        if self._samples is None:
            labels = self._name.labels
            self._samples = [Sample(self.name, dict(zip(labels, values, strict=True)), value)
                             for rows in self._rows for values, value in rows]
        return self._samples

    @samples.setter
    def samples(self, value: list[Sample]) -> None:
        self._samples = value


class KeptRows:
    """Per queue, its rows in each family of a group and their text, kept with the values they were built from:
    a scrape formats only the queues whose values changed since the one before."""

    def __init__(self, names: tuple[FamilyName, ...]) -> None:
        self.names = names
        self._kept: dict[Hashable, tuple[object, Rows, tuple[str, ...]]] = {}
        self._role = ""

    def families(self, queues: Iterable[tuple[Hashable, object, Callable[[], Rows]]], role: str) -> list[Family]:
        """``queues``: (queue, the values its rows depend on, how to build them); one family per name, queues in
        the order given. Queues not given are forgotten, and all of them when ``replica_role`` changed."""
        kept: dict[Hashable, tuple[object, Rows, tuple[str, ...]]] = {}
        old = self._kept if role == self._role else {}
        self._role = role
        for queue, values, build in queues:
            entry = old.get(queue)
            if entry is None or entry[0] != values:
                rows = build()
                entry = (values, rows, tuple(self._lines(name, r) for name, r in zip(self.names, rows, strict=True)))
            kept[queue] = entry
        self._kept = kept  # two scrapes at once each keep a whole map; either is right
        entries = list(kept.values())
        return [Family(name, [e[1][i] for e in entries], [e[2][i] for e in entries])
                for i, name in enumerate(self.names)]

    @staticmethod
    def _lines(name: FamilyName, rows: list[Row]) -> str:
        return "".join(f"{name.name}{label_text(dict(zip(name.labels, values, strict=True)))} {_number(value)}\n"
                       for values, value in rows)


class QueueState:
    """A collector without ``describe`` (the registry then checks no names): its families are those of the last
    snapshot, and none before the first or after `clear` (a follower serves no queue state)."""

    def __init__(self, registry: CollectorRegistry, role: str) -> None:
        self.role = role
        self.snapshot: Snapshot | None = None
        self._cq = KeptRows(_CQ)
        self._lq = KeptRows(_LQ)
        self._lq_status = KeptRows(_LQ_STATUS)
        registry.register(self)

    def observe(self, snapshot: Snapshot) -> None:
        self.snapshot = snapshot  # one reference swap: a scrape sees the old snapshot or the new, never a mix

    def clear(self) -> None:
        self.snapshot = None

    def collect(self) -> Iterator[Metric]:
        """Every family, with no samples before the first snapshot or after `clear` (as a cleared gauge)."""
        s = self.snapshot or _EMPTY
        role = self.role
        yield from self._cq.families(_cluster_queues(s, role), role)
        yield _unadmitted(s, role)
        yield from self._lq.families(_local_queues(s, role), role)
        yield from self._lq_status.families(_local_queue_statuses(s, role), role)
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


def _cluster_queues(s: Snapshot, role: str) -> Iterator[tuple[Hashable, object, Callable[[], Rows]]]:
    topology = s.topology
    for name, spec in topology.queues.items():
        t = s.cq_tally[name]
        fresh = min(t.pending, s.active.get(name, 0))
        root = spec.cohort or ""
        while root and topology.cohort_parents.get(root):
            root = topology.cohort_parents[root] or root
        values = (spec, root, t.pending, fresh, t.reserving, t.admitted, tuple(t.reserved.items()),
                  tuple(t.used.items()))
        yield name, values, functools.partial(_cq_rows, name, spec, t, fresh, root, role)


def _cq_rows(name: str, spec: Any, t: Any, fresh: int, root: str, role: str) -> Rows:  # noqa: PLR0917
    rows: Rows = tuple([] for _ in _CQ)
    pending, alias_pending, reserving, admitted, status, info, nominal, borrowing, lending, reservation, usage, \
        alias_used, alias_available = rows
    pending += [((name, "inadmissible", role), t.pending - fresh), ((name, "active", role), fresh)]
    alias_pending.append(((name,), t.pending))
    reserving.append(((name, role), t.reserving))
    admitted.append(((name, role), t.admitted))
    current = "active" if spec.active else "pending"
    status += [((name, state, role), int(state == current)) for state in ("pending", "active", "terminating")]
    cohort = spec.cohort or ""
    info.append(((name, cohort, root, role), 1))
    for (flavor, res), lim in spec.limits.items():
        labels = (cohort, name, flavor, res, role)
        reserved = t.reserved.get((flavor, res), 0)
        nominal.append((labels, lim.nominal / _UNIT))
        if lim.borrowing is not None:
            borrowing.append((labels, lim.borrowing / _UNIT))
        if lim.lending is not None:
            lending.append((labels, lim.lending / _UNIT))
        reservation.append((labels, reserved / _UNIT))
        usage.append((labels, t.used.get((flavor, res), 0) / _UNIT))
        alias_used.append(((name, flavor, res), reserved / _UNIT))
        alias_available.append(((name, flavor, res), max(0, lim.nominal - reserved) / _UNIT))
    return rows


def _unadmitted(s: Snapshot, role: str) -> GaugeMetricFamily:
    counts: dict[tuple[str, str], int] = {}
    for cq, reason in s.reasons:
        counts[(cq, reason)] = counts.get((cq, reason), 0) + 1
    family = GaugeMetricFamily(_UNADMITTED.name, _UNADMITTED.doc, labels=list(_UNADMITTED.labels))
    for (cq, reason), n in counts.items():
        family.add_metric([cq, reason, "", role], n)
    return family


def _local_queues(s: Snapshot, role: str) -> Iterator[tuple[Hashable, object, Callable[[], Rows]]]:
    for key, t in s.lq_tally.items():
        fresh = min(t.pending, s.lq_active.get(key, 0))
        values = (t.pending, fresh, t.reserving, t.admitted, tuple(t.reserved.items()), tuple(t.used.items()))
        yield key, values, functools.partial(_lq_rows, key, t, fresh, role)


def _lq_rows(key: str, t: Any, fresh: int, role: str) -> Rows:
    ns, _, name = key.partition("/")
    rows: Rows = tuple([] for _ in _LQ)
    pending, reserving, admitted, reservation, usage = rows
    pending += [((name, ns, "inadmissible", role), t.pending - fresh), ((name, ns, "active", role), fresh)]
    reserving.append(((name, ns, role), t.reserving))
    admitted.append(((name, ns, role), t.admitted))
    reservation += [((name, ns, flavor, res, role), milli / _UNIT) for (flavor, res), milli in t.reserved.items()]
    usage += [((name, ns, flavor, res, role), milli / _UNIT) for (flavor, res), milli in t.used.items()]
    return rows


def _local_queue_statuses(s: Snapshot, role: str) -> Iterator[tuple[Hashable, object, Callable[[], Rows]]]:
    for (ns, name), local in s.topology.local_queues.items():
        active = "True" if _lq_active(s.topology, local) else "False"
        yield (ns, name), active, functools.partial(_lq_status_rows, ns, name, active, role)


def _lq_status_rows(ns: str, name: str, active: str, role: str) -> Rows:
    return ([((name, ns, active, role), 1)],)
