"""Kueue's rules for one object at a time (CRD validation and webhooks, shared/research/kueue.md §1.3).

One function per rule; each yields findings with its own code. Rules that look across objects (references,
duplicates, cohort cycles) live in `gitopsq.manifests.references`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Final

from gitopsq.api import findings
from gitopsq.api import model as m
from gitopsq.api.findings import Finding
from gitopsq.api.reader import FieldPath
from gitopsq.manifests import names
from gitopsq.manifests.check_report import LoadedObject
from gitopsq.manifests.config_kind_rules import (
    admission_check_parameters,
    concurrent_admission,
    flavor_fields,
    multikueue,
    provisioning_request_config,
    topology_levels,
    unsimulated_admission,
)

MAX_RESOURCE_GROUPS: Final = 16
MAX_COVERED_PER_GROUP: Final = 64
MAX_FLAVORS_PER_GROUP: Final = 64
MAX_FLAVORS_TOTAL: Final = 256
MAX_COVERED_TOTAL: Final = 256
QUEUE_NAME_LABEL: Final = "kueue.x-k8s.io/queue-name"

Rule = Callable[[LoadedObject], Iterator[Finding]]
_GROUPS: Final[FieldPath] = ("spec", "resourceGroups")


def _error(entry: LoadedObject, path: FieldPath, code: str, message: str) -> Finding:
    return findings.error(code, message, location=entry.location(path), obj=str(entry.key))


def _warning(entry: LoadedObject, path: FieldPath, code: str, message: str) -> Finding:
    return findings.warning(code, message, location=entry.location(path), obj=str(entry.key))


def object_name(entry: LoadedObject) -> Iterator[Finding]:
    """Namespaces are DNS labels; every other kind is a DNS subdomain, and so is a namespace reference."""
    meta = entry.obj.meta
    check = names.dns_label if isinstance(entry.obj, m.Namespace) else names.dns_subdomain
    problem = check(meta.name)
    if problem:
        yield _error(entry, ("metadata", "name"), "invalid-name", f"name {meta.name!r} {problem}")
    if meta.namespace is not None:
        problem = names.dns_label(meta.namespace)
        if problem:
            yield _error(entry, ("metadata", "namespace"), "invalid-name",
                         f"namespace {meta.namespace!r} {problem}")


def queue_name_fits_label(entry: LoadedObject) -> Iterator[Finding]:
    """Jobs name their LocalQueue in a label value, which holds at most 63 characters."""
    if isinstance(entry.obj, m.LocalQueue) and names.label_value(entry.obj.meta.name):
        yield _warning(entry, ("metadata", "name"), "queue-name-too-long",
                       f"LocalQueue name is longer than 63 characters, so no Job can name it in the "
                       f"{QUEUE_NAME_LABEL} label")


def labels_and_annotations(entry: LoadedObject) -> Iterator[Finding]:
    meta = entry.obj.meta
    yield from _label_map(entry, meta.labels, ("metadata", "labels"), values=True)
    for key in meta.annotations:
        problem = names.qualified_name(key)
        if problem:
            yield _error(entry, ("metadata", "annotations", key), "invalid-label",
                         f"annotation key {key!r} {problem}")
    if isinstance(entry.obj, m.ResourceFlavor):
        yield from _label_map(entry, entry.obj.node_labels, ("spec", "nodeLabels"), values=True)
        for i, taint in enumerate(entry.obj.node_taints):
            problem = names.qualified_name(taint.key)
            if problem:
                yield _error(entry, ("spec", "nodeTaints", i, "key"), "invalid-label",
                             f"taint key {taint.key!r} {problem}")
            problem = names.label_value(taint.value)
            if problem:
                yield _error(entry, ("spec", "nodeTaints", i, "value"), "invalid-label",
                             f"taint value {taint.value!r} {problem}")


def _label_map(entry: LoadedObject, labels: Mapping[str, str], path: FieldPath, *,
               values: bool) -> Iterator[Finding]:
    for key, value in labels.items():
        problem = names.qualified_name(key)
        if problem:
            yield _error(entry, (*path, key), "invalid-label", f"label key {key!r} {problem}")
        problem = names.label_value(value) if values else None
        if problem:
            yield _error(entry, (*path, key), "invalid-label", f"label value {value!r} of {key!r} {problem}")


def _groups(entry: LoadedObject) -> tuple[m.ResourceGroup, ...]:
    obj = entry.obj
    return obj.resource_groups if isinstance(obj, m.ClusterQueue | m.Cohort) else ()


def reference_names(entry: LoadedObject) -> Iterator[Finding]:
    """Names that point at other objects must be valid names themselves."""
    obj = entry.obj
    refs: list[tuple[FieldPath, str, str]] = []
    if isinstance(obj, m.ClusterQueue) and obj.cohort_name:
        refs.append((("spec", "cohortName"), obj.cohort_name, "cohortName"))
    if isinstance(obj, m.Cohort) and obj.parent_name:
        refs.append((("spec", "parentName"), obj.parent_name, "parentName"))
    if isinstance(obj, m.LocalQueue):
        refs.append((("spec", "clusterQueue"), obj.cluster_queue, "clusterQueue"))
    for i, group in enumerate(_groups(entry)):
        for j, flavor in enumerate(group.flavors):
            refs.append(((*_GROUPS, i, "flavors", j, "name"), flavor.name, "flavor name"))
        for j, resource in enumerate(group.covered_resources):
            problem = names.qualified_name(resource)
            if problem:
                yield _error(entry, (*_GROUPS, i, "coveredResources", j), "invalid-resource-name",
                             f"resource name {resource!r} {problem}")
    for path, value, what in refs:
        problem = names.dns_subdomain(value)
        if problem:
            yield _error(entry, path, "invalid-name", f"{what} {value!r} {problem}")


def group_sizes(entry: LoadedObject) -> Iterator[Finding]:
    """At most 16 resource groups, 64 covered resources and 64 flavors per group, 256 of each in total."""
    groups = _groups(entry)
    if len(groups) > MAX_RESOURCE_GROUPS:
        yield _error(entry, _GROUPS, "too-many", f"{len(groups)} resource groups; Kueue allows at most "
                     f"{MAX_RESOURCE_GROUPS}")
    for i, group in enumerate(groups):
        if len(group.covered_resources) > MAX_COVERED_PER_GROUP:
            yield _error(entry, (*_GROUPS, i, "coveredResources"), "too-many",
                         f"resource group {i} covers {len(group.covered_resources)} resources; Kueue allows at "
                         f"most {MAX_COVERED_PER_GROUP}")
        if len(group.flavors) > MAX_FLAVORS_PER_GROUP:
            yield _error(entry, (*_GROUPS, i, "flavors"), "too-many",
                         f"resource group {i} has {len(group.flavors)} flavors; Kueue allows at most "
                         f"{MAX_FLAVORS_PER_GROUP}")
    flavors = sum(len(g.flavors) for g in groups)
    covered = sum(len(g.covered_resources) for g in groups)
    if flavors > MAX_FLAVORS_TOTAL:
        yield _error(entry, _GROUPS, "too-many", f"{flavors} flavors across resource groups; Kueue allows at most "
                     f"{MAX_FLAVORS_TOTAL}")
    if covered > MAX_COVERED_TOTAL:
        yield _error(entry, _GROUPS, "too-many", f"{covered} covered resources across resource groups; Kueue "
                     f"allows at most {MAX_COVERED_TOTAL}")


def groups_not_empty(entry: LoadedObject) -> Iterator[Finding]:
    """A resource group covers at least one resource and lists at least one flavor."""
    for i, group in enumerate(_groups(entry)):
        if not group.covered_resources or not group.flavors:
            missing = "coveredResources" if not group.covered_resources else "flavors"
            yield _error(entry, (*_GROUPS, i, missing), "empty-resource-group",
                         f"resource group {i} has no {missing}; Kueue needs at least one")


def flavor_resources_match(entry: LoadedObject) -> Iterator[Finding]:
    """Each flavor lists exactly its group's coveredResources, in the same order."""
    for i, group in enumerate(_groups(entry)):
        covered = list(group.covered_resources)
        for j, flavor in enumerate(group.flavors):
            listed = [r.name for r in flavor.resources]
            if listed != covered:
                yield _error(entry, (*_GROUPS, i, "flavors", j, "resources"), "flavor-resources-mismatch",
                             f"flavor {flavor.name!r} lists resources [{', '.join(listed)}] but its group covers "
                             f"[{', '.join(covered)}]: each flavor must list exactly the covered resources, in "
                             "that order")


def one_group_each(entry: LoadedObject) -> Iterator[Finding]:
    """A resource is covered by one group only, and a flavor appears in one group only (and once)."""
    resource_group: dict[str, int] = {}
    flavor_group: dict[str, int] = {}
    for i, group in enumerate(_groups(entry)):
        for j, resource in enumerate(group.covered_resources):
            first = resource_group.setdefault(resource, i)
            if first != i or group.covered_resources.index(resource) != j:
                yield _error(entry, (*_GROUPS, i, "coveredResources", j), "resource-in-several-groups",
                             f"resource {resource!r} is already covered by resource group {first}; a resource "
                             "belongs to one group only")
        for j, flavor in enumerate(group.flavors):
            first = flavor_group.setdefault(flavor.name, i)
            earlier = [f.name for f in group.flavors[:j]]
            if first != i or flavor.name in earlier:
                yield _error(entry, (*_GROUPS, i, "flavors", j, "name"), "flavor-in-several-groups",
                             f"flavor {flavor.name!r} already appears in resource group {first}; a flavor "
                             "appears once, in one group only")


def quota_values(entry: LoadedObject) -> Iterator[Finding]:
    """Quotas are non-negative; lendingLimit ≤ nominalQuota; limits need a cohort (or, for a Cohort, a parent)."""
    obj = entry.obj
    if isinstance(obj, m.ClusterQueue):
        parent, where = obj.cohort_name, "the ClusterQueue has no cohortName"
    elif isinstance(obj, m.Cohort):
        parent, where = obj.parent_name, "the Cohort has no parentName"
    else:
        return
    for i, group in enumerate(_groups(entry)):
        for j, flavor in enumerate(group.flavors):
            for k, quota in enumerate(flavor.resources):
                base = (*_GROUPS, i, "flavors", j, "resources", k)
                what = f"{flavor.name}/{quota.name}"
                for field, value in (("nominalQuota", quota.nominal_quota), ("borrowingLimit", quota.borrowing_limit),
                                     ("lendingLimit", quota.lending_limit)):
                    if value is not None and value.milli < 0:
                        yield _error(entry, (*base, field), "negative-quota",
                                     f"{field} of {what} is {value}; quotas must not be negative")
                lending = quota.lending_limit
                if lending is not None and lending > quota.nominal_quota:
                    yield _error(entry, (*base, "lendingLimit"), "lending-limit-exceeds-nominal",
                                 f"lendingLimit of {what} is {lending}, more than its nominalQuota "
                                 f"{quota.nominal_quota}")
                for field, value in (("borrowingLimit", quota.borrowing_limit),
                                     ("lendingLimit", quota.lending_limit)):
                    if value is not None and not parent:
                        yield _error(entry, (*base, field), "limit-without-cohort",
                                     f"{field} of {what} is set but {where}: there is nothing to "
                                     f"{'borrow from' if field == 'borrowingLimit' else 'lend to'}")


def preemption_policy(entry: LoadedObject) -> Iterator[Finding]:
    """reclaimWithinCohort: Never forbids borrowWithinCohort other than Never."""
    obj = entry.obj
    if not isinstance(obj, m.ClusterQueue):
        return
    bwc = obj.preemption.borrow_within_cohort
    if obj.preemption.reclaim_within_cohort == "Never" and bwc is not None and bwc.policy != "Never":
        yield _error(entry, ("spec", "preemption", "borrowWithinCohort", "policy"), "borrow-needs-reclaim",
                     f"borrowWithinCohort.policy is {bwc.policy} but reclaimWithinCohort is Never; set "
                     "reclaimWithinCohort to LowerPriority or Any, or borrowWithinCohort.policy to Never")


def fungibility_preference(entry: LoadedObject) -> Iterator[Finding]:
    """flavorFungibility.preference needs whenCanBorrow and whenCanPreempt both TryNextFlavor."""
    obj = entry.obj
    if not isinstance(obj, m.ClusterQueue):
        return
    ff = obj.flavor_fungibility
    if ff.preference and (ff.when_can_borrow != "TryNextFlavor" or ff.when_can_preempt != "TryNextFlavor"):
        yield _error(entry, ("spec", "flavorFungibility", "preference"), "preference-needs-try-next-flavor",
                     f"flavorFungibility.preference {ff.preference} only applies when whenCanBorrow and "
                     f"whenCanPreempt are both TryNextFlavor (they are {ff.when_can_borrow} and "
                     f"{ff.when_can_preempt})")


RULES: Final[tuple[Rule, ...]] = (object_name, queue_name_fits_label, labels_and_annotations, reference_names,
                                  group_sizes, groups_not_empty, flavor_resources_match, one_group_each, quota_values,
                                  preemption_policy, fungibility_preference, topology_levels,
                                  provisioning_request_config, multikueue, admission_check_parameters, flavor_fields,
                                  concurrent_admission, unsimulated_admission)


def validate_object(entry: LoadedObject) -> list[Finding]:
    return [f for rule in RULES for f in rule(entry)]
