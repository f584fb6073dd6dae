"""Kueue's rules for one configuration object at a time: Topology, ProvisioningRequestConfig, MultiKueueConfig,
MultiKueueCluster and an AdmissionCheck's parameters (their CRDs' validations), plus the ClusterQueue fields whose
admission behaviour gitopsq's own engine does not simulate.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import datetime
from typing import Final

from gitopsq.api import findings
from gitopsq.api import model as m
from gitopsq.api.findings import Finding
from gitopsq.api.reader import FieldPath
from gitopsq.manifests import names
from gitopsq.manifests.check_report import LoadedObject

MAX_TOPOLOGY_LEVELS: Final = 16
HOSTNAME_LABEL: Final = "kubernetes.io/hostname"
MAX_MULTIKUEUE_CLUSTERS: Final = 20
MAX_PROVISIONING_PARAMETERS: Final = 100
MAX_MANAGED_RESOURCES: Final = 100
MAX_NODE_SELECTOR_UPDATES: Final = 8
_KIND = re.compile(r"[A-Za-z]([-A-Za-z0-9]*[A-Za-z0-9])?")
_RFC3339 = re.compile(r"\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})")


def _error(entry: LoadedObject, path: FieldPath, code: str, message: str) -> Finding:
    return findings.error(code, message, location=entry.location(path), obj=str(entry.key))


def _too_long(value: str, limit: int) -> str | None:
    return f"must be at most {limit} characters (it has {len(value)})" if len(value) > limit else None


def topology_levels(entry: LoadedObject) -> Iterator[Finding]:
    """1 to 16 levels, each a distinct node label key; kubernetes.io/hostname only as the lowest level."""
    obj = entry.obj
    if not isinstance(obj, m.Topology):
        return
    levels: FieldPath = ("spec", "levels")
    if not obj.levels or len(obj.levels) > MAX_TOPOLOGY_LEVELS:
        yield _error(entry, levels, "invalid-topology",
                     f"a Topology has 1 to {MAX_TOPOLOGY_LEVELS} levels, this one has {len(obj.levels)}")
    for i, label in enumerate(obj.levels):
        problem = names.qualified_name(label)
        if problem:
            yield _error(entry, (*levels, i, "nodeLabel"), "invalid-label", f"level {i}: node label {label!r} "
                         f"{problem}")
        if label in obj.levels[:i]:
            yield _error(entry, (*levels, i, "nodeLabel"), "invalid-topology",
                         f"level {i}: node label {label!r} is already level {obj.levels.index(label)}; levels "
                         "must be unique")
        if label == HOSTNAME_LABEL and i != len(obj.levels) - 1:
            yield _error(entry, (*levels, i, "nodeLabel"), "invalid-topology",
                         f"level {i}: {HOSTNAME_LABEL} can only be the lowest level of a topology")


def provisioning_request_config(entry: LoadedObject) -> Iterator[Finding]:
    obj = entry.obj
    if not isinstance(obj, m.ProvisioningRequestConfig):
        return
    spec: FieldPath = ("spec",)
    problem = names.dns_subdomain(obj.provisioning_class_name)
    if problem:
        yield _error(entry, (*spec, "provisioningClassName"), "invalid-name",
                     f"provisioningClassName {obj.provisioning_class_name!r} {problem}")
    if len(obj.parameters) > MAX_PROVISIONING_PARAMETERS:
        yield _error(entry, (*spec, "parameters"), "too-many", f"{len(obj.parameters)} parameters; Kueue allows at "
                     f"most {MAX_PROVISIONING_PARAMETERS}")
    for key, value in obj.parameters.items():
        problem = _too_long(value, 255)
        if problem:
            yield _error(entry, (*spec, "parameters", key), "invalid-value", f"parameter {key!r} {problem}")
    if len(obj.managed_resources) > MAX_MANAGED_RESOURCES:
        yield _error(entry, (*spec, "managedResources"), "too-many", f"{len(obj.managed_resources)} managed "
                     f"resources; Kueue allows at most {MAX_MANAGED_RESOURCES}")
    for i, resource in enumerate(obj.managed_resources):
        if resource in obj.managed_resources[:i]:
            yield _error(entry, (*spec, "managedResources", i), "duplicate-value",
                         f"managed resource {resource!r} is listed twice")
    selectors: FieldPath = (*spec, "podSetUpdates", "nodeSelector")
    if len(obj.pod_set_updates) > MAX_NODE_SELECTOR_UPDATES:
        yield _error(entry, selectors, "too-many", f"{len(obj.pod_set_updates)} node selector updates; Kueue "
                     f"allows at most {MAX_NODE_SELECTOR_UPDATES}")
    keys = [key for key, _ in obj.pod_set_updates]
    for i, (key, value) in enumerate(obj.pod_set_updates):
        problem = names.qualified_name(key)
        if problem:
            yield _error(entry, (*selectors, i, "key"), "invalid-label", f"node selector key {key!r} {problem}")
        if key in keys[:i]:
            yield _error(entry, (*selectors, i, "key"), "duplicate-value", f"node selector key {key!r} is "
                         "listed twice")
        if not value or len(value) > 32768:
            yield _error(entry, (*selectors, i, "valueFromProvisioningClassDetail"), "invalid-value",
                         "valueFromProvisioningClassDetail must hold 1 to 32768 characters")


def multikueue(entry: LoadedObject) -> Iterator[Finding]:
    obj = entry.obj
    if isinstance(obj, m.MultiKueueConfig):
        clusters: FieldPath = ("spec", "clusters")
        if not obj.clusters or len(obj.clusters) > MAX_MULTIKUEUE_CLUSTERS:
            yield _error(entry, clusters, "invalid-value", f"a MultiKueueConfig lists 1 to "
                         f"{MAX_MULTIKUEUE_CLUSTERS} clusters, this one lists {len(obj.clusters)}")
        for i, cluster in enumerate(obj.clusters):
            problem = names.dns_subdomain(cluster)
            if problem:
                yield _error(entry, (*clusters, i), "invalid-name", f"cluster {cluster!r} {problem}")
            if cluster in obj.clusters[:i]:
                yield _error(entry, (*clusters, i), "duplicate-value", f"cluster {cluster!r} is listed twice")
    if isinstance(obj, m.MultiKueueCluster):
        source: FieldPath = ("spec", "clusterSource") if entry.api_version == m.KUEUE_V1BETA2 else ("spec",)
        for path, value in (((*source, "kubeConfig", "location"), obj.kubeconfig_location),
                            ((*source, "clusterProfileRef", "name"), obj.cluster_profile)):
            if value is not None and (not value or len(value) > 256):
                yield _error(entry, path, "invalid-value", f"{path[-2]}.{path[-1]} must hold 1 to 256 characters")


def admission_check_parameters(entry: LoadedObject) -> Iterator[Finding]:
    """The parameters reference: apiGroup a DNS subdomain, kind a kind name, name a DNS label."""
    obj = entry.obj
    if not isinstance(obj, m.AdmissionCheck):
        return
    problem = _too_long(obj.controller_name, 253) or ("must not be empty" if not obj.controller_name else None)
    if problem:
        yield _error(entry, ("spec", "controllerName"), "invalid-value", f"controllerName {problem}")
    if obj.parameters is None:
        return
    params: FieldPath = ("spec", "parameters")
    group, kind, name = (obj.parameters.get(k, "") for k in ("apiGroup", "kind", "name"))
    problem = names.dns_subdomain(group)
    if problem:
        yield _error(entry, (*params, "apiGroup"), "invalid-name", f"parameters.apiGroup {group!r} {problem}")
    if not _KIND.fullmatch(kind) or len(kind) > 63:
        yield _error(entry, (*params, "kind"), "invalid-name", f"parameters.kind {kind!r} must be a kind name: "
                     "a letter, then letters, digits or '-', at most 63 characters")
    problem = names.dns_label(name)
    if problem:
        yield _error(entry, (*params, "name"), "invalid-name", f"parameters.name {name!r} {problem}")


def flavor_fields(entry: LoadedObject) -> Iterator[Finding]:
    """Kueue's flavor webhook: a topologyName needs nodeLabels; tolerations as Kubernetes validates them;
    nodeTaints[].timeAdded an RFC 3339 date-time."""
    obj = entry.obj
    if not isinstance(obj, m.ResourceFlavor):
        return
    if obj.topology_name and not obj.node_labels:
        yield _error(entry, ("spec", "topologyName"), "topology-needs-node-labels",
                     f"topologyName {obj.topology_name!r} needs at least one nodeLabel to select the flavor's nodes")
    for i, toleration in enumerate(obj.tolerations):
        path: FieldPath = ("spec", "tolerations", i)
        if not toleration.key and toleration.operator != "Exists":
            yield _error(entry, (*path, "operator"), "invalid-toleration",
                         f"toleration {i} has no key, so its operator must be Exists")
        if toleration.toleration_seconds is not None and toleration.effect != "NoExecute":
            yield _error(entry, (*path, "tolerationSeconds"), "invalid-toleration",
                         f"toleration {i}: tolerationSeconds only applies to the NoExecute effect")
        if toleration.operator == "Exists" and toleration.value:
            yield _error(entry, (*path, "value"), "invalid-toleration",
                         f"toleration {i}: the Exists operator takes no value")
    for i, taint in enumerate(obj.node_taints):
        if taint.time_added is not None and not _is_rfc3339(taint.time_added):
            yield _error(entry, ("spec", "nodeTaints", i, "timeAdded"), "invalid-value",
                         f"timeAdded {taint.time_added!r} is not an RFC 3339 date-time (2006-01-02T15:04:05Z)")


def _is_rfc3339(text: str) -> bool:
    if not _RFC3339.fullmatch(text):
        return False
    try:
        datetime.fromisoformat(text.upper().replace("Z", "+00:00"))
    except ValueError:
        return False
    return True


def concurrent_admission(entry: LoadedObject) -> Iterator[Finding]:
    """Kueue's ClusterQueue webhook on concurrentAdmissionPolicy: one resource group of at most 16 flavors,
    constraints only with TryPreferredFlavors, a lastAcceptableFlavorName among the queue's flavors, no
    StrictFIFO."""
    obj = entry.obj
    if not isinstance(obj, m.ClusterQueue) or obj.concurrent_admission is None:
        return
    policy = obj.concurrent_admission
    base: FieldPath = ("spec", "concurrentAdmissionPolicy", "migration")
    if len(obj.resource_groups) != 1:
        yield _error(entry, ("spec", "resourceGroups"), "invalid-concurrent-admission",
                     f"concurrentAdmissionPolicy needs exactly one resource group, this queue has "
                     f"{len(obj.resource_groups)}")
    elif len(obj.resource_groups[0].flavors) > 16:
        yield _error(entry, ("spec", "resourceGroups", 0, "flavors"), "invalid-concurrent-admission",
                     "concurrentAdmissionPolicy allows at most 16 flavors in the resource group")
    if policy.last_acceptable_flavor is not None:
        if policy.mode != "TryPreferredFlavors":
            yield _error(entry, (*base, "constraints"), "invalid-concurrent-admission",
                         f"migration.constraints only apply to mode TryPreferredFlavors, not {policy.mode}")
        elif policy.last_acceptable_flavor not in obj.flavor_names():
            yield _error(entry, (*base, "constraints", "lastAcceptableFlavorName"), "invalid-concurrent-admission",
                         f"lastAcceptableFlavorName {policy.last_acceptable_flavor!r} is not one of this queue's "
                         f"flavors ({', '.join(obj.flavor_names()) or 'none'})")
    if obj.queueing_strategy == "StrictFIFO":
        yield _error(entry, ("spec", "queueingStrategy"), "invalid-concurrent-admission",
                     "StrictFIFO cannot be used with concurrentAdmissionPolicy")


def unsimulated_admission(entry: LoadedObject) -> Iterator[Finding]:
    """Kept and applied, but gitopsq's own admission engine (and so ``plan``'s impact) does not model them."""
    obj = entry.obj
    if not isinstance(obj, m.ClusterQueue):
        return
    if obj.admission_mode == "UsageBasedAdmissionFairSharing":
        yield findings.warning(
            "not-simulated", "admissionScope UsageBasedAdmissionFairSharing is applied as written, but gitopsq's "
            "admission loop and plan impact order workloads without admission fair sharing",
            location=entry.location(("spec", "admissionScope", "admissionMode")), obj=str(entry.key))
    if obj.concurrent_admission is not None:
        yield findings.warning(
            "not-simulated", "concurrentAdmissionPolicy is applied as written, but gitopsq's admission loop and "
            "plan impact do not migrate workloads between flavors",
            location=entry.location(("spec", "concurrentAdmissionPolicy")), obj=str(entry.key))
