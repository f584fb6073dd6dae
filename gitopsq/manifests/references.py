"""Kueue's rules across the objects of one revision: duplicates, references (queues, flavors, admission checks
and their parameters, topologies, MultiKueue clusters), cohort cycles, namespaces.

Cohorts are implicit, as in Kueue: a cohortName or parentName need not name a Cohort object. A Cohort object
that nothing joins is only a warning.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from typing import Final

from gitopsq.api import findings
from gitopsq.api import model as m
from gitopsq.api.findings import Finding
from gitopsq.errors import Location
from gitopsq.manifests.check_report import LoadedObject, PassThrough

Rule = Callable[["Index"], Iterator[Finding]]


class Index:
    """The revision's objects by kind and name (first occurrence wins for lookups)."""

    def __init__(self, entries: Sequence[LoadedObject]) -> None:
        self.entries = entries
        self.by_kind: dict[str, dict[str, LoadedObject]] = defaultdict(dict)
        for entry in entries:
            name = entry.obj.meta.name if not entry.obj.meta.namespace else \
                f"{entry.obj.meta.namespace}/{entry.obj.meta.name}"
            self.by_kind[entry.obj.KIND].setdefault(name, entry)

    def of(self, kind: str) -> list[LoadedObject]:
        return list(self.by_kind[kind].values())

    def names(self, kind: str) -> set[str]:
        return set(self.by_kind[kind])


def _error(entry: LoadedObject, path: tuple[str | int, ...], code: str, message: str) -> Finding:
    return findings.error(code, message, location=entry.location(path), obj=str(entry.key))


def _warning(entry: LoadedObject, path: tuple[str | int, ...], code: str, message: str) -> Finding:
    return findings.warning(code, message, location=entry.location(path), obj=str(entry.key))


def duplicates(entries: Sequence[LoadedObject], passthrough: Sequence[PassThrough] = ()) -> Iterator[Finding]:
    """The same object (kind, namespace, name) declared twice: both places are named."""
    seen: dict[tuple[str, str, str, str], tuple[str, int]] = {}
    for entry in entries:
        key = entry.key
        where = (entry.path, entry.line)
        first = seen.setdefault((key.group, key.kind, key.namespace, key.name), where)
        if first != where:
            yield _error(entry, (), "duplicate-object", f"{key} is declared twice: here and at "
                         f"{first[0]}:{first[1]}")
    for item in passthrough:
        pkey = (item.api_version.rpartition("/")[0], item.kind, item.namespace, item.name)
        where = (item.path, item.line)
        first = seen.setdefault(pkey, where)
        if first != where:
            obj = f"{item.kind}/{item.namespace}/{item.name}" if item.namespace else f"{item.kind}/{item.name}"
            yield findings.error("duplicate-object", f"{obj} is declared twice: here and at {first[0]}:{first[1]}",
                                 location=Location(item.path, item.line),
                                 obj=obj)


def local_queue_targets(index: Index) -> Iterator[Finding]:
    cluster_queues = index.names("ClusterQueue")
    for entry in index.of("LocalQueue"):
        assert isinstance(entry.obj, m.LocalQueue)
        if entry.obj.cluster_queue and entry.obj.cluster_queue not in cluster_queues:
            yield _error(entry, ("spec", "clusterQueue"), "unknown-cluster-queue",
                         f"clusterQueue {entry.obj.cluster_queue!r} is not defined in this revision"
                         + _suggest(entry.obj.cluster_queue, cluster_queues))


def flavor_references(index: Index) -> Iterator[Finding]:
    flavors = index.names("ResourceFlavor")
    for entry in (*index.of("ClusterQueue"), *index.of("Cohort")):
        assert isinstance(entry.obj, m.ClusterQueue | m.Cohort)
        for i, group in enumerate(entry.obj.resource_groups):
            for j, flavor in enumerate(group.flavors):
                if flavor.name not in flavors:
                    yield _error(entry, ("spec", "resourceGroups", i, "flavors", j, "name"), "unknown-flavor",
                                 f"ResourceFlavor {flavor.name!r} is not defined in this revision"
                                 + _suggest(flavor.name, flavors))


def admission_check_references(index: Index) -> Iterator[Finding]:
    checks = index.names("AdmissionCheck")
    for entry in index.of("ClusterQueue"):
        assert isinstance(entry.obj, m.ClusterQueue)
        own_flavors = set(entry.obj.flavor_names())
        for i, rule in enumerate(entry.obj.admission_checks):
            path: tuple[str | int, ...] = ("spec", "admissionChecksStrategy", "admissionChecks", i)
            if entry.api_version == m.KUEUE_V1BETA1 and entry.lines.get(("spec", "admissionChecks", i)):
                path = ("spec", "admissionChecks", i)
            if rule.name not in checks:
                yield _error(entry, path, "unknown-admission-check",
                             f"AdmissionCheck {rule.name!r} is not defined in this revision" + _suggest(rule.name,
                                                                                                      checks))
            for flavor in rule.on_flavors:
                if flavor not in own_flavors:
                    yield _warning(entry, (*path, "onFlavors"), "unknown-flavor",
                                   f"admission check {rule.name!r} is limited to flavor {flavor!r}, which this "
                                   "ClusterQueue does not use")


def topology_references(index: Index) -> Iterator[Finding]:
    topologies = index.names("Topology")
    for entry in index.of("ResourceFlavor"):
        assert isinstance(entry.obj, m.ResourceFlavor)
        name = entry.obj.topology_name
        if name and name not in topologies:
            yield _error(entry, ("spec", "topologyName"), "unknown-topology",
                         f"Topology {name!r} is not defined in this revision" + _suggest(name, topologies))


# Kueue's own admission check controllers and the one parameters kind each reads.
CHECK_PARAMETERS: Final = {"kueue.x-k8s.io/provisioning-request": "ProvisioningRequestConfig",
                           "kueue.x-k8s.io/multikueue": "MultiKueueConfig"}


def admission_check_parameters(index: Index) -> Iterator[Finding]:
    """Kueue's controllers need parameters of their kind in kueue.x-k8s.io, naming an object of this revision."""
    for entry in index.of("AdmissionCheck"):
        check = entry.obj
        assert isinstance(check, m.AdmissionCheck)
        wanted = CHECK_PARAMETERS.get(check.controller_name)
        params = check.parameters
        path: tuple[str | int, ...] = ("spec", "parameters")
        if params is None:
            if wanted:
                yield _warning(entry, ("spec", "controllerName"), "missing-parameters",
                             f"controller {check.controller_name} needs spec.parameters naming a {wanted} "
                             f"({m.KUEUE_GROUP}); without them Kueue keeps the check inactive")
            continue
        group, kind, name = params.get("apiGroup", ""), params.get("kind", ""), params.get("name", "")
        if wanted and (group, kind) != (m.KUEUE_GROUP, wanted):
            yield _error(entry, (*path, "kind"), "wrong-parameters-kind",
                         f"controller {check.controller_name} reads parameters of kind {wanted} in "
                         f"{m.KUEUE_GROUP}, not {kind} in {group!r}")
            continue
        if group != m.KUEUE_GROUP:
            continue  # another controller's own kind: not ours to resolve
        if kind not in CHECK_PARAMETERS.values():
            yield _error(entry, (*path, "kind"), "wrong-parameters-kind",
                         f"parameters name kind {kind!r} in {m.KUEUE_GROUP}, which holds no admission check "
                         f"parameters (use {' or '.join(sorted(CHECK_PARAMETERS.values()))})")
        elif name not in (known := index.names(kind)):
            yield _error(entry, (*path, "name"), "unknown-parameters",
                         f"{kind} {name!r} is not defined in this revision" + _suggest(name, known))


def multikueue_clusters(index: Index) -> Iterator[Finding]:
    clusters = index.names("MultiKueueCluster")
    for entry in index.of("MultiKueueConfig"):
        assert isinstance(entry.obj, m.MultiKueueConfig)
        for i, name in enumerate(entry.obj.clusters):
            if name not in clusters:
                yield _error(entry, ("spec", "clusters", i), "unknown-multikueue-cluster",
                             f"MultiKueueCluster {name!r} is not defined in this revision" + _suggest(name, clusters))


def cohort_cycles(index: Index) -> Iterator[Finding]:
    """A Cohort that is its own ancestor; Kueue disables every member. Each cycle is reported once."""
    parent = {name: e.obj.parent_name for name, e in index.by_kind["Cohort"].items()
              if isinstance(e.obj, m.Cohort) and e.obj.parent_name}
    reported: set[frozenset[str]] = set()
    for start in sorted(parent):
        path = [start]
        node = parent.get(start)
        while node is not None and node not in path:
            path.append(node)
            node = parent.get(node)
        if node is None:
            continue
        cycle = path[path.index(node):]
        if frozenset(cycle) in reported:
            continue
        reported.add(frozenset(cycle))
        first = min(cycle)
        ordered = cycle[cycle.index(first):] + cycle[: cycle.index(first)]
        entry = index.by_kind["Cohort"][first]
        yield _error(entry, ("spec", "parentName"), "cohort-cycle",
                     "cohorts form a cycle: " + " → ".join([*ordered, first])
                     + "; Kueue stops admitting to every ClusterQueue in it")


def unused_cohorts(index: Index) -> Iterator[Finding]:
    used = {e.obj.cohort_name for e in index.of("ClusterQueue") if isinstance(e.obj, m.ClusterQueue)}
    used |= {e.obj.parent_name for e in index.of("Cohort") if isinstance(e.obj, m.Cohort)}
    for entry in index.of("Cohort"):
        if entry.obj.meta.name not in used:
            yield _warning(entry, ("metadata", "name"), "unused-cohort",
                           f"no ClusterQueue or Cohort joins cohort {entry.obj.meta.name!r}")


def local_queue_namespaces(index: Index) -> Iterator[Finding]:
    declared = index.names("Namespace")
    for entry in index.of("LocalQueue"):
        namespace = entry.obj.meta.namespace or ""
        if namespace not in declared:
            yield _warning(entry, ("metadata", "namespace"), "undeclared-namespace",
                           f"namespace {namespace!r} is not declared in this repository (add a Namespace object, "
                           "or make sure it exists in the cluster)")


def queue_namespace_selected(index: Index) -> Iterator[Finding]:
    """A LocalQueue's namespace must be one its ClusterQueue selects, or its workloads stay pending.

    A ClusterQueue without namespaceSelector selects no namespace (``{}`` selects all). A namespace's labels are
    known only when the repository declares it; Kubernetes adds ``kubernetes.io/metadata.name`` itself.
    """
    cluster_queues = index.by_kind["ClusterQueue"]
    namespaces = index.by_kind["Namespace"]
    for entry in index.of("LocalQueue"):
        lq = entry.obj
        assert isinstance(lq, m.LocalQueue)
        target = cluster_queues.get(lq.cluster_queue)
        if target is None or not isinstance(target.obj, m.ClusterQueue):
            continue
        namespace = lq.meta.namespace or ""
        selector = target.obj.namespace_selector
        if selector is None:
            yield _warning(entry, ("spec", "clusterQueue"), "namespace-not-selected",
                           f"ClusterQueue {lq.cluster_queue!r} has no namespaceSelector, so Kueue admits nothing "
                           f"from namespace {namespace!r} (namespaceSelector: {{}} selects every namespace)")
            continue
        declared = namespaces.get(namespace)
        if declared is None:
            continue
        labels = {**declared.obj.meta.labels, "kubernetes.io/metadata.name": namespace}
        if not selector.matches(labels):
            yield _warning(entry, ("spec", "clusterQueue"), "namespace-not-selected",
                           f"the namespaceSelector of ClusterQueue {lq.cluster_queue!r} does not select namespace "
                           f"{namespace!r}; its workloads would stay pending (Misconfigured)")


RULES: Final[tuple[Rule, ...]] = (local_queue_targets, flavor_references, admission_check_references,
                                  topology_references, admission_check_parameters, multikueue_clusters, cohort_cycles,
                                  unused_cohorts, local_queue_namespaces, queue_namespace_selected)


def validate_revision(entries: Sequence[LoadedObject], passthrough: Sequence[PassThrough] = ()) -> list[Finding]:
    index = Index(entries)
    return [*duplicates(entries, passthrough), *(f for rule in RULES for f in rule(index))]


def _suggest(name: str, known: set[str]) -> str:
    close = sorted(k for k in known if _close(name, k))
    return f" (did you mean {close[0]!r}?)" if close else ""


def _close(a: str, b: str) -> bool:
    if abs(len(a) - len(b)) > 2:
        return False
    previous = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        current = [i]
        for j, cb in enumerate(b, 1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (ca != cb)))
        previous = current
    return previous[-1] <= 2
