"""Quota before → after: per ClusterQueue (and Cohort), per flavor, per resource; cohort capacity.

Amounts are milli-units (gitopsq.api.quantity). A cell is absent (None) on the side where the queue does not
offer that flavor-resource; inside a cell a ``None`` borrowing or lending limit means "no limit", as in Kueue.

Cohort capacity is the cohort's subtree quota as Kueue computes it (research/kueue.md §1.3, the admission
core's quota tree): the cohort's own nominal quota plus, for every member, its subtree quota minus the part
its lending limit keeps local. Only queues and cohorts whose numbers or membership change are listed.

Order: ClusterQueues by name, then Cohorts by name; inside one, rows by flavor then resource.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Literal

from gitopsq.admission.quota import FlavorResource, Limits
from gitopsq.admission.topology import build_topology
from gitopsq.api import model as m

QueueStatus = Literal["added", "removed", "changed"]


@dataclass(frozen=True, slots=True)
class QuotaRow:
    """One flavor-resource of one queue, before and after (None: not offered on that side)."""

    flavor: str
    resource: str
    before: Limits | None
    after: Limits | None

    @property
    def nominal_delta(self) -> int:
        return (self.after.nominal if self.after else 0) - (self.before.nominal if self.before else 0)

    @property
    def changed(self) -> bool:
        return self.before != self.after


@dataclass(frozen=True, slots=True)
class QueueQuota:
    """The quota of one ClusterQueue or Cohort that differs between base and head."""

    kind: str  # ClusterQueue | Cohort
    name: str
    status: QueueStatus
    cohort_before: str | None  # a ClusterQueue's cohort, a Cohort's parent
    cohort_after: str | None
    rows: tuple[QuotaRow, ...]


@dataclass(frozen=True, slots=True)
class CapacityCell:
    flavor: str
    resource: str
    before: int
    after: int

    @property
    def delta(self) -> int:
        return self.after - self.before


@dataclass(frozen=True, slots=True)
class CohortCapacity:
    """A cohort whose capacity or membership changes; ``members`` are its ClusterQueues and child cohorts."""

    name: str
    members_before: tuple[str, ...]
    members_after: tuple[str, ...]
    cells: tuple[CapacityCell, ...]


def limits_of(groups: Iterable[m.ResourceGroup]) -> dict[FlavorResource, Limits]:
    out: dict[FlavorResource, Limits] = {}
    for rg in groups:
        for fq in rg.flavors:
            for rq in fq.resources:
                out[(fq.name, rq.name)] = Limits(
                    nominal=rq.nominal_quota.milli,
                    borrowing=rq.borrowing_limit.milli if rq.borrowing_limit is not None else None,
                    lending=rq.lending_limit.milli if rq.lending_limit is not None else None)
    return out


_QuotaHolder = m.ClusterQueue | m.Cohort


def _holders(objects: Iterable[m.QueueObject], kind: type[_QuotaHolder]) -> dict[str, _QuotaHolder]:
    return {o.meta.name: o for o in objects if isinstance(o, kind)}


def _parent(obj: _QuotaHolder | None) -> str | None:
    if obj is None:
        return None
    return obj.cohort_name if isinstance(obj, m.ClusterQueue) else obj.parent_name


def quota_changes(base: Iterable[m.QueueObject], head: Iterable[m.QueueObject]) -> tuple[QueueQuota, ...]:
    """Every ClusterQueue and Cohort whose quotas or cohort differ, with all of its rows (changed or not)."""
    base_list, head_list = list(base), list(head)
    out: list[QueueQuota] = []
    for kind in (m.ClusterQueue, m.Cohort):
        old, new = _holders(base_list, kind), _holders(head_list, kind)
        for name in sorted(old.keys() | new.keys()):
            before_obj, after_obj = old.get(name), new.get(name)
            before = limits_of(before_obj.resource_groups) if before_obj else {}
            after = limits_of(after_obj.resource_groups) if after_obj else {}
            parents = (_parent(before_obj), _parent(after_obj))
            if before_obj is not None and after_obj is not None and before == after and parents[0] == parents[1]:
                continue
            status: QueueStatus = "added" if before_obj is None else "removed" if after_obj is None else "changed"
            rows = tuple(QuotaRow(f, r, before.get((f, r)), after.get((f, r)))
                         for f, r in sorted(before.keys() | after.keys()))
            if status == "changed" and not rows and parents[0] == parents[1]:
                continue
            out.append(QueueQuota(kind.KIND, name, status, parents[0], parents[1], rows))
    return tuple(out)


def _members(parents: Mapping[str, str | None], queues: Mapping[str, str | None]) -> dict[str, tuple[str, ...]]:
    out: dict[str, list[str]] = {}
    for child, parent in [*queues.items(), *parents.items()]:
        if parent is not None:
            out.setdefault(parent, []).append(child)
    return {k: tuple(sorted(v)) for k, v in out.items()}


def cohort_capacity(base: Iterable[m.QueueObject], head: Iterable[m.QueueObject]) -> tuple[CohortCapacity, ...]:
    """Cohorts whose subtree quota (Kueue's arithmetic) or members differ between base and head, by name."""
    before, after = build_topology(base), build_topology(head)
    members_before = _members(before.cohort_parents, {n: q.cohort for n, q in before.queues.items()})
    members_after = _members(after.cohort_parents, {n: q.cohort for n, q in after.queues.items()})
    out = []
    for name in sorted(before.tree.cohorts.keys() | after.tree.cohorts.keys()):
        old_node, new_node = before.tree.cohorts.get(name), after.tree.cohorts.get(name)
        old = old_node.subtree if old_node else {}
        new = new_node.subtree if new_node else {}
        cells = tuple(CapacityCell(f, r, old.get((f, r), 0), new.get((f, r), 0))
                      for f, r in sorted(old.keys() | new.keys()))
        was, now = members_before.get(name, ()), members_after.get(name, ())
        if any(c.delta for c in cells) or was != now:
            out.append(CohortCapacity(name, was, now, cells))
    return tuple(out)
