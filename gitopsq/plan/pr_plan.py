"""The pull-request plan (pure): what merging head into base would change, and whether head is acceptable.

`object_changes` pairs the objects of two checked revisions by identity (group, kind, namespace, name — the
API version and the file are not part of it) and diffs the normalised v1beta2 documents field by field
(gitopsq.reconcile.field_diff with quantity-aware equality): reformatting a file, reordering keys, writing ``"1000m"``
for ``"1"`` or moving from v1beta1 to v1beta2 are not changes. An object whose file changed is ``moved``.

An object of base that head still defines but cannot read (a finding names it) is ``invalid``, not removed.

Order of objects: removed, invalid, changed, moved, added; within each by kind (apply order), namespace, name.

`build_plan` assembles the rest — the quota table, cohort capacity, the head's findings and policy verdicts,
the approvals and the impact — into one `PrPlan`. Its exit code follows ``gitopsq check``: 1 when the head
revision has an error finding or a denying verdict, else 0.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from gitopsq.api.codec import encode
from gitopsq.api.findings import Finding
from gitopsq.api.model import ObjectKey
from gitopsq.errors import Location
from gitopsq.manifests.budgets import BUDGET_GROUP, BUDGET_KIND, LoadedBudget
from gitopsq.manifests.check_report import LoadedObject, Report
from gitopsq.manifests.render import KIND_ORDER
from gitopsq.ownership.approval_check import impossible_approvals
from gitopsq.ownership.approvers import GLOBAL_KINDS, Approval, required_approvals
from gitopsq.plan.impact import SnapshotImpact, TraceImpact
from gitopsq.plan.quota_table import CohortCapacity, QueueQuota, cohort_capacity, quota_changes
from gitopsq.policy.revision import PolicyOutcome
from gitopsq.reconcile.field_diff import ByName, FieldChange, FieldPath, diff
from gitopsq.reconcile.normalize import quantity_equal

PLAN_VERSION: Final = 1
ObjectStatus = Literal["removed", "invalid", "changed", "moved", "added"]
STATUS_ORDER: Final[tuple[ObjectStatus, ...]] = ("removed", "invalid", "changed", "moved", "added")
History = Literal["ancestor", "diverged", "unrelated", "unknown"]


@dataclass(frozen=True, slots=True)
class ObjectChange:
    key: ObjectKey
    status: ObjectStatus
    path: str | None  # file in head (None when removed)
    line: int | None
    old_path: str | None  # file in base (None when added)
    old_line: int | None
    fields: tuple[FieldChange, ...] = ()
    # For a kustomize-rendered object: where each field (same order as ``fields``) was written in head, so a
    # diff line names the base or patch line a person edits (docs/kustomize.md). Empty otherwise.
    sources: tuple[Location | None, ...] = ()

    @property
    def name(self) -> str:
        return str(self.key)

    def source(self, index: int) -> Location | None:
        return self.sources[index] if index < len(self.sources) else None


@dataclass(frozen=True, slots=True)
class RevisionSummary:
    ref: str
    sha: str
    ok: bool
    errors: int
    warnings: int
    objects: int


@dataclass(frozen=True, slots=True)
class PrPlan:
    repository: str
    base: RevisionSummary
    head: RevisionSummary
    history: History
    notes: tuple[str, ...]
    objects: tuple[ObjectChange, ...]
    quota: tuple[QueueQuota, ...]
    cohorts: tuple[CohortCapacity, ...]
    findings: tuple[Finding, ...]  # the head's, validation then policy loading
    base_errors: tuple[Finding, ...]
    policies: PolicyOutcome
    approvals: tuple[Approval, ...]
    impact: SnapshotImpact | None = None
    trace: TraceImpact | None = None
    impact_notes: tuple[str, ...] = ()
    version: int = field(default=PLAN_VERSION)

    @property
    def errors(self) -> tuple[Finding, ...]:
        return tuple(f for f in self.findings if f.is_error)

    @property
    def counts(self) -> dict[str, int]:
        """Objects per status, every status present, in `STATUS_ORDER`."""
        return {s: sum(1 for c in self.objects if c.status == s) for s in STATUS_ORDER}

    @property
    def rejected(self) -> bool:
        return bool(self.errors) or bool(self.policies.denied)

    @property
    def exit_code(self) -> int:
        return 1 if self.rejected else 0


@dataclass(frozen=True, slots=True)
class _Placed:
    doc: Mapping[str, Any]
    path: str
    line: int
    same_as: Any  # a value equal across revisions iff the object is unchanged (the decoded model)
    entry: LoadedObject | LoadedBudget | None = None  # set for a kustomize-rendered object (its fields have sources)


def _placed(report: Report | None) -> dict[ObjectKey, _Placed]:
    """Objects of a revision by identity; a duplicate (an error check reports) keeps its first place."""
    out: dict[ObjectKey, _Placed] = {}
    if report is None:
        return out
    for e in sorted(report.entries, key=lambda e: (e.path, e.line)):
        out.setdefault(e.key, _Placed(_Lazy(e.obj), e.path, e.line, e.obj, e if e.sources is not None else None))
    for p in sorted(report.passthrough, key=lambda p: (p.path, p.line)):
        group = p.api_version.rpartition("/")[0]
        key = ObjectKey(group=group, kind=p.kind, namespace=p.namespace or "", name=p.name)
        out.setdefault(key, _Placed(p.doc, p.path, p.line, p.doc))
    for b in report.budgets:  # the Budget as written; the queues it compiles into are entries above
        key = ObjectKey(group=BUDGET_GROUP, kind=BUDGET_KIND, namespace="", name=b.budget.name)
        out.setdefault(key, _Placed(b.doc, b.path, b.line, b.budget, b if b.sources is not None else None))
    return out


class _Lazy(Mapping[str, Any]):
    """A model object's v1beta2 document, encoded only when a diff needs it (most objects do not change)."""

    __slots__ = ("_doc", "_obj")

    def __init__(self, obj: Any) -> None:
        self._obj = obj
        self._doc: dict[str, Any] | None = None

    def _get(self) -> dict[str, Any]:
        if self._doc is None:
            self._doc = encode(self._obj)
        return self._doc

    def __getitem__(self, key: str) -> Any:
        return self._get()[key]

    def __iter__(self) -> Any:
        return iter(self._get())

    def __len__(self) -> int:
        return len(self._get())


# A Budget is listed just before the ClusterQueue and LocalQueues it compiles into.
_PLAN_ORDER: Final = (*KIND_ORDER[:KIND_ORDER.index("ClusterQueue")], BUDGET_KIND,
                      *KIND_ORDER[KIND_ORDER.index("ClusterQueue"):])


def _kind_rank(key: ObjectKey) -> tuple[int, str, str, str, str]:
    rank = _PLAN_ORDER.index(key.kind) if key.kind in _PLAN_ORDER else len(_PLAN_ORDER)
    return (rank, key.kind, key.group, key.namespace, key.name)


def unreadable(report: Report) -> frozenset[str]:
    """Objects (``Kind/ns/name``) an error finding names: defined in the revision but not readable."""
    return frozenset(f.obj for f in report.errors if f.obj)


def leaf_fields(doc: Mapping[str, Any], op: Literal["added", "removed"], path: FieldPath = ()) -> list[FieldChange]:
    """A whole object's fields as leaves (``spec.clusterQueue``), all ``added`` (a new object) or all ``removed``
    (a deleted one), so it reads like the other objects' changes; name-keyed list items are stepped into by name,
    as the diff does."""
    out: list[FieldChange] = []
    for key, val in doc.items():
        step: FieldPath = (*path, key)
        if isinstance(val, Mapping) and val:
            out.extend(leaf_fields(val, op, step))
        elif isinstance(val, list) and val and all(isinstance(i, Mapping) and isinstance(i.get("name"), str)
                                                  for i in val):
            for item in val:
                inner = (*step, ByName(item["name"]))
                out.extend(leaf_fields({k: v for k, v in item.items() if k != "name"}, op, inner)
                           or [_leaf(inner, op, item)])
        elif isinstance(val, list) and val and all(isinstance(i, Mapping) and i for i in val):
            for index, item in enumerate(val):
                out.extend(leaf_fields(item, op, (*step, index)))
        else:
            out.append(_leaf(step, op, val))
    return out


def _leaf(path: FieldPath, op: Literal["added", "removed"], value: Any) -> FieldChange:
    return FieldChange(path, op, None, value) if op == "added" else FieldChange(path, op, value, None)


def object_changes(base: Report | None, head: Report) -> tuple[ObjectChange, ...]:
    """Objects added, changed, moved and removed from ``base`` to ``head`` (see the module docstring)."""
    old, new = _placed(base), _placed(head)
    broken = unreadable(head)
    out: list[ObjectChange] = []
    for key in old.keys() | new.keys():
        a, b = old.get(key), new.get(key)
        if a is None and b is not None:
            added = tuple(leaf_fields(b.doc, "added"))
            out.append(ObjectChange(key, "added", b.path, b.line, None, None, added, _sources(b, added)))
        elif b is None and a is not None:
            status: ObjectStatus = "invalid" if str(key) in broken else "removed"
            out.append(ObjectChange(key, status, None, None, a.path, a.line, tuple(leaf_fields(a.doc, "removed"))))
        elif a is not None and b is not None:
            fields = () if a.same_as == b.same_as else diff(a.doc, b.doc, equal=quantity_equal)
            if a.path != b.path:
                out.append(ObjectChange(key, "moved", b.path, b.line, a.path, a.line, fields, _sources(b, fields)))
            elif fields:
                out.append(ObjectChange(key, "changed", b.path, b.line, a.path, a.line, fields, _sources(b, fields)))
    out.sort(key=lambda c: (STATUS_ORDER.index(c.status), _kind_rank(c.key)))
    return tuple(out)


def _sources(placed: _Placed, fields: tuple[FieldChange, ...]) -> tuple[Location | None, ...]:
    """Where each changed field was written, for a kustomize-rendered object (else nothing)."""
    if placed.entry is None:
        return ()
    return tuple(None if f.op == "removed" else placed.entry.location(_reader_path(placed.doc, f.path))
                 for f in fields)


def _reader_path(doc: Any, path: FieldPath) -> tuple[str | int, ...]:
    """A diff path (name-keyed list items) as the loader's path (list indexes), stepping through ``doc``."""
    out: list[str | int] = []
    for step in path:
        if isinstance(step, ByName):
            items = doc if isinstance(doc, list) else []
            index = next((i for i, item in enumerate(items)
                          if isinstance(item, Mapping) and item.get("name") == step.name), None)
            if index is None:
                break
            out.append(index)
            doc = items[index]
        else:
            out.append(step)
            doc = doc.get(step) if isinstance(doc, Mapping) and isinstance(step, str) else \
                (doc[step] if isinstance(doc, list) and isinstance(step, int) and step < len(doc) else None)
    return tuple(out)


def _summary(ref: str, sha: str, report: Report | None) -> RevisionSummary:
    if report is None:
        return RevisionSummary(ref, sha, False, 0, 0, 0)
    return RevisionSummary(ref, sha, report.ok, len(report.errors), len(report.warnings),
                           len(report.entries) + len(report.passthrough))


def build_plan(*, repository: str, base_ref: str, base_sha: str, base: Report | None, head_ref: str,
               head_sha: str, head: Report, touched_paths: Iterable[str], history: History,
               policies: PolicyOutcome, notes: Iterable[str] = (), impact: SnapshotImpact | None = None,
               trace: TraceImpact | None = None, impact_notes: Iterable[str] = (),
               authors: Iterable[str] = ()) -> PrPlan:
    """One `PrPlan` from two checked revisions, the files the pull request touches and the head's verdicts;
    ``authors`` (the e-mails of the pull request's commits' authors) reveal approvals that can never be given."""
    changes = object_changes(base, head)
    base_objects = base.objects if base is not None else ()
    all_notes = list(notes)
    if base is not None and not base.ok:
        all_notes.append(f"the base revision {base_ref} does not pass check itself ({len(base.errors)} "
                         "error(s)); the diff starts from the objects that could be read")
    trust = base.config if base is not None and base.config is not None else head.config
    global_objects = [c.name for c in changes if c.key.kind in GLOBAL_KINDS]
    return PrPlan(
        repository=repository,
        base=_summary(base_ref, base_sha, base), head=_summary(head_ref, head_sha, head), history=history,
        notes=tuple(all_notes), objects=changes,
        quota=quota_changes(base_objects, head.objects), cohorts=cohort_capacity(base_objects, head.objects),
        findings=(*head.findings, *policies.findings,
                  *impossible_approvals(trust, touched_paths, global_objects, authors)),
        base_errors=base.errors if base is not None else (),
        policies=policies, approvals=required_approvals(trust, touched_paths, global_objects),
        impact=impact, trace=trace, impact_notes=tuple(impact_notes))
