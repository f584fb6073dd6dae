"""Rules about Budgets that look across the revision (pure): conflicts, priority classes, teams, capacity.

Unknown flavors need no rule here: the compiled ClusterQueue's flavor references are checked like any other
(gitopsq.manifests.references), and its field lines are the Budget's, so that finding names the Budget's line.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence

from gitopsq.api import findings
from gitopsq.api.findings import Finding
from gitopsq.errors import Location
from gitopsq.manifests.budget_compile import BUDGET_LABEL, SOURCE_ANNOTATION
from gitopsq.manifests.budgets import LoadedBudget
from gitopsq.manifests.check_report import LoadedObject
from gitopsq.manifests.config_model import RepoConfig


def _error(b: LoadedBudget, path: tuple[str | int, ...], code: str, message: str) -> Finding:
    return findings.error(code, message, location=Location(b.path, b.line_of(path)), obj=b.label)


def compiled_from(entry: LoadedObject, budgets: Mapping[tuple[str, str], LoadedBudget]) -> LoadedBudget | None:
    """The Budget an entry was compiled from, by (name, file) (None: written by hand, even if it copies the label
    and annotation: a compiled entry sits in its Budget's file)."""
    name = entry.obj.meta.labels.get(BUDGET_LABEL)
    if name is None or entry.obj.meta.annotations.get(SOURCE_ANNOTATION) != f"Budget/{name}":
        return None
    return budgets.get((name, entry.path))


def conflicts(entries: Sequence[LoadedObject], budgets: Sequence[LoadedBudget]) -> tuple[list[Finding], set[str]]:
    """A compiled object that another file (or another Budget) also defines: one error naming both files.

    Returns the findings and the object names (``Kind/ns/name``) they cover, whose generic ``duplicate-object``
    findings the caller drops.
    """
    by_place = {(b.budget.name, b.path): b for b in budgets}
    first: dict[str, LoadedObject] = {}
    out: list[Finding] = []
    covered: set[str] = set()
    for entry in sorted(entries, key=lambda e: (compiled_from(e, by_place) is not None, e.path, e.line)):
        name = str(entry.key)
        other = first.setdefault(name, entry)
        if other is entry:
            continue
        budget, theirs = compiled_from(entry, by_place), compiled_from(other, by_place)
        if budget is None:
            continue  # two hand-written objects: references.duplicates says so
        where = f"{other.path}:{other.line}"
        source = (f"Budget {theirs.budget.name!r} at {theirs.path}:{theirs.line}" if theirs is not None
                  else f"{where} (written by hand)")
        mine = budget.budget.name
        out.append(_error(budget, ("metadata", "name") if entry.key.kind == "ClusterQueue" else ("spec", "namespaces"),
                          "budget-conflict", f"Budget {mine!r} ({budget.path}:{budget.line}) compiles into {name}, "
                          f"which is also defined by {source}: rename the Budget (or its queueName) or remove the "
                          "other definition"))
        covered.add(name)
    return out, covered


def revision_rules(entries: Sequence[LoadedObject], budgets: Sequence[LoadedBudget],
                   config: RepoConfig | None) -> Iterator[Finding]:
    """Priority classes named by Budgets exist; teams are declared; resources are ones the flavor's capacity
    declares (when gitopsq.yaml declares that flavor's capacity)."""
    priority_classes = {e.obj.meta.name for e in entries if e.obj.KIND == "WorkloadPriorityClass"}
    for b in budgets:
        budget = b.budget
        if budget.priority_class and budget.priority_class not in priority_classes:
            yield _error(b, ("spec", "priorityClass"), "unknown-priority-class",
                         f"WorkloadPriorityClass {budget.priority_class!r} is not defined in this revision")
        if config is None:
            continue
        if config.teams and config.team(budget.team) is None:
            yield _error(b, ("spec", "team"), "budget-unknown-team",
                         f"team {budget.team!r} is not declared in gitopsq.yaml (teams: "
                         f"{', '.join(t.name for t in config.teams)})")
        for j, flavor in enumerate(budget.flavors):
            declared = config.capacity.get(flavor.name)
            if declared is None:
                continue
            for field, amounts in (("committed", flavor.committed), ("burst", flavor.burst)):
                for resource in amounts:
                    if resource not in declared:
                        yield _error(b, ("spec", "flavors", j, field, resource), "budget-unknown-resource",
                                     f"resource {resource!r} is not part of flavor {flavor.name!r}: gitopsq.yaml "
                                     f"declares its capacity as {', '.join(declared) or 'nothing'}")


def budget_findings(entries: Sequence[LoadedObject], budgets: Sequence[LoadedBudget], config: RepoConfig | None,
                    revision_findings: Sequence[Finding]) -> list[Finding]:
    """The revision's cross-object findings with the Budget rules added; a conflict a Budget causes replaces the
    generic ``duplicate-object`` finding for that object."""
    if not budgets:
        return list(revision_findings)
    found, covered = conflicts(entries, budgets)
    kept = [f for f in revision_findings if not (f.code == "duplicate-object" and f.obj in covered)]
    return [*kept, *found, *revision_rules(entries, budgets, config)]
