"""The `Budget` kind (``gitopsq.dev/v1alpha1``, docs/budgets.md): a team's GPU pool budget, read from YAML.

A Budget is gitopsq's own kind and never reaches the cluster: `gitopsq.manifests.budget_compile` turns it into a
ClusterQueue and LocalQueues, which are what ``render`` prints and ``sync`` applies. It is cluster-scoped, like
the ClusterQueue it becomes (its name is that ClusterQueue's name, unique in the cluster, and it serves several
namespaces, so no one namespace could hold it).

Every problem is a finding on the Budget's own line (the field at fault), never on compiled output.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from gitopsq.api.findings import Finding
from gitopsq.api.frozenmap import FrozenMap
from gitopsq.api.quantity import Quantity
from gitopsq.api.reader import FieldPath, Reader
from gitopsq.errors import Location
from gitopsq.manifests import names

BUDGET_GROUP: Final = "gitopsq.dev"
BUDGET_API_VERSION: Final = "gitopsq.dev/v1alpha1"
BUDGET_KIND: Final = "Budget"
_SPEC: Final = ("team", "workspace", "namespaces", "queueName", "cohort", "priorityClass", "fairShareWeight",
                "flavors")
_FLAVOR: Final = ("name", "committed", "burst")


@dataclass(frozen=True, slots=True, kw_only=True)
class BudgetFlavor:
    """One flavor of the preferred order: committed (nominal) and burst (ceiling) per resource."""

    name: str
    committed: FrozenMap[str, Quantity]
    burst: FrozenMap[str, Quantity]  # only the resources whose burst was written

    def ceiling(self, resource: str) -> Quantity | None:
        """The burst of ``resource``, defaulting to its committed amount (no borrowing)."""
        return self.burst.get(resource, self.committed.get(resource))


@dataclass(frozen=True, slots=True, kw_only=True)
class Budget:
    name: str
    team: str
    workspace: str = ""
    namespaces: tuple[str, ...] = ()
    queue_name: str = ""  # the LocalQueue name in every served namespace; empty: the Budget's name
    cohort: str | None = None
    priority_class: str | None = None
    fair_share_weight: Quantity | None = None
    flavors: tuple[BudgetFlavor, ...] = ()
    labels: FrozenMap[str, str] = field(default_factory=FrozenMap)

    @property
    def local_queue(self) -> str:
        return self.queue_name or self.name

    def resources(self) -> tuple[str, ...]:
        """Every resource any flavor names (committed or burst), sorted: reordering a map is not a change."""
        return tuple(sorted({r for f in self.flavors for r in (*f.committed, *f.burst)}))


@dataclass(frozen=True, slots=True)
class LoadedBudget:
    """A Budget with the file and line it came from, its field lines and its document as written."""

    budget: Budget
    path: str
    line: int
    doc: Mapping[str, Any] = field(compare=False, repr=False)
    lines: Mapping[FieldPath, int] = field(default_factory=dict, compare=False, repr=False)
    # A kustomize-rendered Budget: where each field was written (its base file or the patch that set it).
    sources: Mapping[FieldPath, Location] | None = field(default=None, compare=False, repr=False)

    @property
    def label(self) -> str:
        return f"{BUDGET_KIND}/{self.budget.name}"

    def line_of(self, path: FieldPath) -> int:
        """The line of ``path`` or of its nearest parent that has one."""
        probe = path
        while probe:
            found = self.lines.get(probe)
            if found is not None:
                return found
            probe = probe[:-1]
        return self.line

    def location(self, path: FieldPath = ()) -> Location:
        """Where ``path`` (or its nearest parent that has a place) was written: a patch's line for a field a
        kustomize patch set, else this file's."""
        probe = path
        while probe and self.sources is not None:
            found = self.sources.get(probe)
            if found is not None:
                return found
            probe = probe[:-1]
        return Location(self.path, self.line_of(path))


def is_budget(doc: Mapping[str, Any]) -> bool:
    return doc.get("kind") == BUDGET_KIND and str(doc.get("apiVersion", "")).startswith(f"{BUDGET_GROUP}/")


def parse_budget(doc: Mapping[str, Any], *, path: str, line: int,
                 lines: Mapping[FieldPath, int]) -> tuple[LoadedBudget | None, list[Finding]]:
    """Read one Budget document; None (with the findings saying why) when it cannot be compiled."""
    meta_raw = doc.get("metadata")
    raw_name = meta_raw.get("name") if isinstance(meta_raw, Mapping) else None
    r = Reader(file=path, doc_line=line, obj=f"{BUDGET_KIND}/{raw_name if isinstance(raw_name, str) else '<unnamed>'}",
               line_of=lines.get)
    r.mapping(doc, (), allowed=("apiVersion", "kind", "metadata", "spec"), ignored=("status",))
    r.string(doc.get("apiVersion"), ("apiVersion",), choices=(BUDGET_API_VERSION,))
    meta = r.mapping(meta_raw, ("metadata",), allowed=("name", "labels", "annotations", "namespace"))
    name = r.string(meta.get("name"), ("metadata", "name"), required=True)
    if meta.get("namespace") is not None:
        r.error(("metadata", "namespace"), "wrong-scope", f"metadata.namespace {meta.get('namespace')!r} must not "
                "be set: a Budget is cluster-scoped, like the ClusterQueue it compiles into (spec.namespaces lists "
                "the namespaces it serves)")
    _name(r, name, ("metadata", "name"), names.dns_subdomain, "name")
    labels = r.string_map(meta.get("labels"), ("metadata", "labels"))
    r.string_map(meta.get("annotations"), ("metadata", "annotations"))
    spec = r.mapping(doc.get("spec"), ("spec",), allowed=_SPEC)
    if doc.get("spec") is None:
        r.error(("spec",), "missing-field", "spec is required")
    team = r.string(spec.get("team"), ("spec", "team"), required=True)
    _name(r, team, ("spec", "team"), names.dns_label, "team")
    workspace = r.string(spec.get("workspace"), ("spec", "workspace"))
    if workspace:
        _name(r, workspace, ("spec", "workspace"), names.label_value, "workspace")
    namespaces = _namespaces(r, spec.get("namespaces"))
    queue_name = r.string(spec.get("queueName"), ("spec", "queueName"))
    if queue_name:
        _name(r, queue_name, ("spec", "queueName"), names.dns_subdomain, "queueName")
    cohort = r.optional_string(spec.get("cohort"), ("spec", "cohort"))
    if cohort:
        _name(r, cohort, ("spec", "cohort"), names.dns_subdomain, "cohort")
    priority = r.optional_string(spec.get("priorityClass"), ("spec", "priorityClass"))
    if priority:
        _name(r, priority, ("spec", "priorityClass"), names.dns_subdomain, "priorityClass")
    weight = r.quantity(spec.get("fairShareWeight"), ("spec", "fairShareWeight"))
    if weight is not None and weight.milli < 0:
        r.error(("spec", "fairShareWeight"), "invalid-quantity", f"fairShareWeight must not be negative, got {weight}")
    flavors = _flavors(r, spec.get("flavors"), cohort)
    if flavors and not any(f.committed or f.burst for f in flavors):
        r.error(("spec", "flavors"), "invalid-value", "the Budget commits and bursts nothing: name at least one "
                "resource (nvidia.com/gpu, cpu, memory …) under committed or burst")
    budget = Budget(name=name, team=team, workspace=workspace, namespaces=namespaces, queue_name=queue_name,
                    cohort=cohort, priority_class=priority, fair_share_weight=weight, flavors=flavors, labels=labels)
    if any(f.is_error for f in r.findings) or not name:
        return None, r.findings
    return LoadedBudget(budget, path, line, doc, dict(lines)), r.findings


def _name(r: Reader, value: str, path: FieldPath, check: Callable[[str], str | None], what: str) -> None:
    problem = check(value) if value else None
    if problem:
        r.error(path, "invalid-name", f"{what} {value!r} {problem}")


def _namespaces(r: Reader, raw: Any) -> tuple[str, ...]:
    path: FieldPath = ("spec", "namespaces")
    found = r.string_list(raw, path)
    if raw is None:
        r.error(path, "missing-field", "spec.namespaces is required: the namespaces whose LocalQueue draws on this "
                "budget")
    elif not found:
        r.error(path, "invalid-value", "spec.namespaces must list at least one namespace")
    for i, namespace in enumerate(found):
        _name(r, namespace, (*path, i), names.dns_label, "namespace")
        if namespace in found[:i]:
            r.error((*path, i), "invalid-value", f"namespace {namespace!r} is listed twice")
    return found


def _flavors(r: Reader, raw: Any, cohort: str | None) -> tuple[BudgetFlavor, ...]:
    path: FieldPath = ("spec", "flavors")
    items = r.sequence(raw, path)
    if not items:
        r.error(path, "missing-field" if raw is None else "invalid-value",
                "spec.flavors must list at least one flavor (in order of preference) with its committed quota")
    out: list[BudgetFlavor] = []
    for i, item in enumerate(items):
        p: FieldPath = (*path, i)
        body = r.mapping(item, p, allowed=_FLAVOR)
        name = r.string(body.get("name"), (*p, "name"), required=True)
        _name(r, name, (*p, "name"), names.dns_subdomain, "flavor name")
        if name and name in [f.name for f in out]:
            r.error((*p, "name"), "invalid-value", f"flavor {name!r} is listed twice; list each flavor once, in "
                    "order of preference")
        if body.get("committed") is None:
            r.error((*p, "committed"), "missing-field", f"spec.flavors[{i}].committed is required (write {{}} "
                    "for a flavor the team may only burst into)")
        committed = _amounts(r, body.get("committed"), (*p, "committed"))
        burst = _amounts(r, body.get("burst"), (*p, "burst"))
        for resource, ceiling in burst.items():
            floor = committed.get(resource)
            if floor is not None and ceiling < floor:
                r.error((*p, "burst", resource), "budget-burst-below-committed",
                        f"burst of {name}/{resource} is {ceiling}, less than its committed {floor}: burst is the "
                        "ceiling (committed plus what may be borrowed)")
            elif cohort is None and ceiling > (floor or Quantity(0)):
                r.error((*p, "burst", resource), "budget-burst-without-cohort",
                        f"burst of {name}/{resource} is {ceiling}, above its committed {floor or 0}, but the Budget "
                        "has no spec.cohort: there is nothing to borrow from")
        out.append(BudgetFlavor(name=name, committed=FrozenMap(committed), burst=FrozenMap(burst)))
    return tuple(out)


def _amounts(r: Reader, raw: Any, path: FieldPath) -> dict[str, Quantity]:
    body = r.mapping(raw, path, allowed=raw.keys() if isinstance(raw, Mapping) else ())
    out: dict[str, Quantity] = {}
    for resource, value in body.items():
        p: FieldPath = (*path, resource)
        problem = names.qualified_name(str(resource))
        if problem:
            r.error(p, "invalid-resource-name", f"resource name {resource!r} {problem}")
            continue
        q = r.quantity(value, p, required=True)
        if q is not None and q.milli < 0:
            r.error(p, "negative-quota", f"{resource} is {q}; quotas must not be negative")
        elif q is not None:
            out[str(resource)] = q
    return out
