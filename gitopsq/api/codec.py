"""Wire dicts ⇄ model objects: the only module that knows the shape of Kueue manifests.

`decode` accepts ``kueue.x-k8s.io/v1beta1`` and ``v1beta2`` (plus ``v1`` Namespace and
``scheduling.k8s.io/v1`` PriorityClass) and normalises to v1beta2 (shared/research/kueue.md §4):

1. ClusterQueue ``spec.cohort`` → ``cohortName``;
2. ClusterQueue ``spec.admissionChecks: [name]`` → ``admissionChecksStrategy.admissionChecks: [{name}]``;
3. flavorFungibility ``Borrow`` / ``Preempt`` → ``MayStopSearch``;
4. Workload ``priorityClassSource`` + ``priorityClassName`` → ``priorityClassRef``;
5. AdmissionCheck ``retryDelayMinutes`` (removed in v1beta2) is dropped with a warning.

Unknown fields are reported as errors (a misspelt field would otherwise silently do nothing); ``status`` and
server-populated metadata are ignored with a warning. `encode` prints v1beta2.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from gitopsq.api import model as m
from gitopsq.api.findings import Finding
from gitopsq.api.frozenmap import FrozenMap
from gitopsq.api.quantity import Quantity
from gitopsq.api.reader import FieldPath, LineOf, Reader, as_mapping, render_path
from gitopsq.api.workload_codec import decode_pod_sets, encode_pod_set
from gitopsq.errors import Location

SUPPORTED_VERSIONS: Final[Mapping[str, frozenset[str]]] = {
    "ResourceFlavor": frozenset({m.KUEUE_V1BETA1, m.KUEUE_V1BETA2}),
    "ClusterQueue": frozenset({m.KUEUE_V1BETA1, m.KUEUE_V1BETA2}),
    "Cohort": frozenset({m.KUEUE_V1BETA1, m.KUEUE_V1BETA2}),
    "LocalQueue": frozenset({m.KUEUE_V1BETA1, m.KUEUE_V1BETA2}),
    "WorkloadPriorityClass": frozenset({m.KUEUE_V1BETA1, m.KUEUE_V1BETA2}),
    "AdmissionCheck": frozenset({m.KUEUE_V1BETA1, m.KUEUE_V1BETA2}),
    "Workload": frozenset({m.KUEUE_V1BETA1, m.KUEUE_V1BETA2}),
    "Namespace": frozenset({"v1"}),
    "PriorityClass": frozenset({"scheduling.k8s.io/v1"}),
}
ENCODE_VERSION: Final[Mapping[str, str]] = {kind: (m.KUEUE_V1BETA2 if m.KUEUE_V1BETA2 in versions else
                                                   next(iter(versions)))
                                            for kind, versions in SUPPORTED_VERSIONS.items()}

_META_FIELDS = ("name", "namespace", "labels", "annotations")
_SERVER_META = ("uid", "resourceVersion", "generation", "creationTimestamp", "managedFields", "selfLink",
                "deletionTimestamp", "deletionGracePeriodSeconds", "finalizers", "ownerReferences",
                "generateName")
_FUNGIBILITY_V1BETA1 = {"Borrow": "MayStopSearch", "Preempt": "MayStopSearch"}


@dataclass(frozen=True, slots=True)
class Decoded:
    """The result of decoding one document: the object (None if it could not be built) and the findings."""

    obj: m.AnyObject | None
    findings: tuple[Finding, ...]
    api_version: str = ""


def describe(doc: Mapping[str, Any]) -> str:
    """A short object name for messages, from whatever the document holds ("ClusterQueue/team-a")."""
    kind = doc.get("kind") if isinstance(doc.get("kind"), str) else "object"
    meta = as_mapping(doc.get("metadata"))
    name = meta.get("name") if isinstance(meta.get("name"), str) else "<unnamed>"
    ns = meta.get("namespace") if isinstance(meta.get("namespace"), str) else None
    return f"{kind}/{ns}/{name}" if ns else f"{kind}/{name}"


def decode(doc: Any, *, file: str | None = None, line: int | None = None, line_of: LineOf | None = None,
           allow_status: bool = False) -> Decoded:
    """Decode one manifest document into a model object, normalised to v1beta2.

    ``line_of`` maps a field path (``("spec", "resourceGroups", 0)``) to its 1-based line, so findings point at
    the field; without it every finding carries the document's line.
    """
    if not isinstance(doc, Mapping):
        r = Reader(file=file, doc_line=line, obj="document", line_of=line_of)
        r.error((), "wrong-type", "a manifest must be a mapping with apiVersion, kind and metadata")
        return Decoded(None, tuple(r.findings))
    r = Reader(file=file, doc_line=line, obj=describe(doc), line_of=line_of)
    api_version = r.string(doc.get("apiVersion"), ("apiVersion",), required=True)
    kind = r.string(doc.get("kind"), ("kind",), required=True)
    if not api_version or not kind:
        return Decoded(None, tuple(r.findings), api_version)
    versions = SUPPORTED_VERSIONS.get(kind)
    if versions is None:
        r.error(("kind",), "unknown-kind", f"unknown kind {kind!r} (supported: {', '.join(SUPPORTED_VERSIONS)})")
        return Decoded(None, tuple(r.findings), api_version)
    if api_version not in versions:
        r.error(("apiVersion",), "unknown-version",
                f"{kind} is not served in {api_version!r} (use {' or '.join(sorted(versions))})")
        return Decoded(None, tuple(r.findings), api_version)
    v1beta1 = api_version == m.KUEUE_V1BETA1
    top_fields = {"apiVersion", "kind", "metadata", "spec"}
    if kind == "WorkloadPriorityClass":
        top_fields = {"apiVersion", "kind", "metadata", "value", "description"}
    elif kind == "PriorityClass":
        top_fields = {"apiVersion", "kind", "metadata", "value", "description", "globalDefault", "preemptionPolicy"}
    r.mapping(doc, (), allowed=top_fields, ignored=("status",))
    if "status" in doc and not allow_status:
        r.warn(("status",), "ignored-status", "status is written by the controller; the repository's copy is ignored")
    meta = _meta(r, doc.get("metadata"), namespaced=m.KINDS[kind][1])
    if meta is None:
        return Decoded(None, tuple(r.findings), api_version)
    source = Location(file, line) if file is not None else None
    spec = doc.get("spec")
    obj: m.AnyObject | None
    if kind == "ResourceFlavor":
        obj = _resource_flavor(r, meta, spec, source)
    elif kind == "ClusterQueue":
        obj = _cluster_queue(r, meta, spec, source, v1beta1=v1beta1)
    elif kind == "Cohort":
        obj = _cohort(r, meta, spec, source)
    elif kind == "LocalQueue":
        obj = _local_queue(r, meta, spec, source)
    elif kind == "WorkloadPriorityClass":
        obj = m.WorkloadPriorityClass(meta=meta, value=r.integer(doc.get("value"), ("value",), required=True,
                                                                  default=0) or 0,
                                      description=r.string(doc.get("description"), ("description",)),
                                      source=source)
    elif kind == "AdmissionCheck":
        obj = _admission_check(r, meta, spec, source)
    elif kind == "Namespace":
        r.mapping(spec, ("spec",), allowed=("finalizers",))
        obj = m.Namespace(meta=meta, source=source)
    elif kind == "PriorityClass":
        obj = m.PriorityClass(
            meta=meta, value=r.integer(doc.get("value"), ("value",), required=True, default=0) or 0,
            global_default=r.boolean(doc.get("globalDefault"), ("globalDefault",), default=False),
            description=r.string(doc.get("description"), ("description",)),
            preemption_policy=r.string(doc.get("preemptionPolicy"), ("preemptionPolicy",),
                                       default="PreemptLowerPriority",
                                       choices=("PreemptLowerPriority", "Never")),
            source=source)
    else:  # Workload
        obj = _workload(r, meta, spec, source, v1beta1=v1beta1)
    has_errors = any(f.is_error for f in r.findings)
    return Decoded(None if has_errors else obj, tuple(r.findings), api_version)


# --- metadata ---------------------------------------------------------------------------------------------------


def _meta(r: Reader, raw: Any, *, namespaced: bool) -> m.ObjectMeta | None:
    path: FieldPath = ("metadata",)
    if raw is None:
        r.error(path, "missing-field", "metadata.name is required")
        return None
    data = r.mapping(raw, path, allowed=_META_FIELDS, ignored=_SERVER_META)
    name = r.string(data.get("name"), (*path, "name"), required=True)
    namespace = r.optional_string(data.get("namespace"), (*path, "namespace"))
    if namespaced and not namespace:
        r.error((*path, "namespace"), "wrong-scope", "metadata.namespace is required: this kind is namespaced")
    if not namespaced and namespace:
        r.error((*path, "namespace"), "wrong-scope",
                f"metadata.namespace {namespace!r} must not be set: this kind is cluster-scoped")
        namespace = None
    if not name:
        return None
    return m.ObjectMeta(name=name, namespace=namespace,
                        labels=r.string_map(data.get("labels"), (*path, "labels")),
                        annotations=r.string_map(data.get("annotations"), (*path, "annotations")))


# --- ResourceFlavor ---------------------------------------------------------------------------------------------


def _resource_flavor(r: Reader, meta: m.ObjectMeta, raw: Any, source: Location | None) -> m.ResourceFlavor:
    path: FieldPath = ("spec",)
    spec = r.mapping(raw, path, allowed=("nodeLabels", "nodeTaints", "tolerations", "topologyName"))
    taints = []
    for i, item in enumerate(r.sequence(spec.get("nodeTaints"), (*path, "nodeTaints"))):
        p = (*path, "nodeTaints", i)
        t = r.mapping(item, p, allowed=("key", "value", "effect", "timeAdded"))
        taints.append(m.Taint(key=r.string(t.get("key"), (*p, "key"), required=True),
                              value=r.string(t.get("value"), (*p, "value")),
                              effect=r.string(t.get("effect"), (*p, "effect"), required=True,
                                              choices=("NoSchedule", "PreferNoSchedule", "NoExecute"))))
    return m.ResourceFlavor(meta=meta, node_labels=r.string_map(spec.get("nodeLabels"), (*path, "nodeLabels")),
                            node_taints=tuple(taints),
                            tolerations=decode_tolerations(r, spec.get("tolerations"), (*path, "tolerations")),
                            topology_name=r.optional_string(spec.get("topologyName"), (*path, "topologyName")),
                            source=source)


def decode_tolerations(r: Reader, raw: Any, path: FieldPath) -> tuple[m.Toleration, ...]:
    out = []
    for i, item in enumerate(r.sequence(raw, path)):
        p = (*path, i)
        t = r.mapping(item, p, allowed=("key", "operator", "value", "effect", "tolerationSeconds"))
        out.append(m.Toleration(
            key=r.string(t.get("key"), (*p, "key")),
            operator=r.string(t.get("operator"), (*p, "operator"), default="Equal", choices=("Equal", "Exists")),
            value=r.string(t.get("value"), (*p, "value")),
            effect=r.string(t.get("effect"), (*p, "effect"),
                            choices=("", "NoSchedule", "PreferNoSchedule", "NoExecute")),
            toleration_seconds=r.integer(t.get("tolerationSeconds"), (*p, "tolerationSeconds"))))
    return tuple(out)


# --- quotas -----------------------------------------------------------------------------------------------------


def _resource_groups(r: Reader, raw: Any, path: FieldPath) -> tuple[m.ResourceGroup, ...]:
    groups = []
    for i, item in enumerate(r.sequence(raw, path)):
        p = (*path, i)
        g = r.mapping(item, p, allowed=("coveredResources", "flavors"))
        covered = r.string_list(g.get("coveredResources"), (*p, "coveredResources"))
        if "coveredResources" not in g:
            r.error((*p, "coveredResources"), "missing-field", f"{_render(p)}.coveredResources is required")
        flavors = []
        for j, fitem in enumerate(r.sequence(g.get("flavors"), (*p, "flavors"))):
            fp = (*p, "flavors", j)
            f = r.mapping(fitem, fp, allowed=("name", "resources"))
            resources = []
            for k, ritem in enumerate(r.sequence(f.get("resources"), (*fp, "resources"))):
                rp = (*fp, "resources", k)
                res = r.mapping(ritem, rp, allowed=("name", "nominalQuota", "borrowingLimit", "lendingLimit"))
                nominal = r.quantity(res.get("nominalQuota"), (*rp, "nominalQuota"), required=True)
                resources.append(m.ResourceQuota(
                    name=r.string(res.get("name"), (*rp, "name"), required=True),
                    nominal_quota=nominal if nominal is not None else Quantity(0),
                    borrowing_limit=r.quantity(res.get("borrowingLimit"), (*rp, "borrowingLimit")),
                    lending_limit=r.quantity(res.get("lendingLimit"), (*rp, "lendingLimit"))))
            flavors.append(m.FlavorQuotas(name=r.string(f.get("name"), (*fp, "name"), required=True),
                                          resources=tuple(resources)))
        groups.append(m.ResourceGroup(covered_resources=covered, flavors=tuple(flavors)))
    return tuple(groups)


def _render(path: FieldPath) -> str:
    return render_path(path)


def _fair_sharing(r: Reader, raw: Any, path: FieldPath) -> m.FairSharing | None:
    if raw is None:
        return None
    data = r.mapping(raw, path, allowed=("weight",))
    return m.FairSharing(weight=r.quantity(data.get("weight"), (*path, "weight")))


def _selector(r: Reader, raw: Any, path: FieldPath) -> m.LabelSelector | None:
    if raw is None:
        return None
    data = r.mapping(raw, path, allowed=("matchLabels", "matchExpressions"))
    exprs = []
    for i, item in enumerate(r.sequence(data.get("matchExpressions"), (*path, "matchExpressions"))):
        p = (*path, "matchExpressions", i)
        e = r.mapping(item, p, allowed=("key", "operator", "values"))
        exprs.append(m.LabelSelectorRequirement(
            key=r.string(e.get("key"), (*p, "key"), required=True),
            operator=r.string(e.get("operator"), (*p, "operator"), required=True,
                              choices=("In", "NotIn", "Exists", "DoesNotExist")),
            values=r.string_list(e.get("values"), (*p, "values"))))
    return m.LabelSelector(match_labels=r.string_map(data.get("matchLabels"), (*path, "matchLabels")),
                           match_expressions=tuple(exprs))


# --- ClusterQueue -----------------------------------------------------------------------------------------------

_CQ_FIELDS = ("cohortName", "resourceGroups", "namespaceSelector", "queueingStrategy", "preemption",
              "flavorFungibility", "fairSharing", "admissionChecksStrategy", "stopPolicy", "admissionScope")


def _cluster_queue(r: Reader, meta: m.ObjectMeta, raw: Any, source: Location | None, *,
                   v1beta1: bool) -> m.ClusterQueue:
    path: FieldPath = ("spec",)
    allowed = (*_CQ_FIELDS, "cohort", "admissionChecks") if v1beta1 else _CQ_FIELDS
    spec = r.mapping(raw, path, allowed=allowed)
    cohort = r.optional_string(spec.get("cohortName"), (*path, "cohortName"))
    if v1beta1 and spec.get("cohort") is not None:
        if cohort is not None:
            r.error((*path, "cohort"), "conflicting-fields", "set either spec.cohort (v1beta1) or spec.cohortName")
        cohort = r.optional_string(spec.get("cohort"), (*path, "cohort"))
    checks = list(_admission_checks_strategy(r, spec.get("admissionChecksStrategy"),
                                             (*path, "admissionChecksStrategy")))
    if v1beta1 and spec.get("admissionChecks") is not None:
        if checks:
            r.error((*path, "admissionChecks"), "conflicting-fields",
                    "set either spec.admissionChecks or spec.admissionChecksStrategy, not both")
        checks = [m.AdmissionCheckRule(name=n) for n in
                  r.string_list(spec.get("admissionChecks"), (*path, "admissionChecks"))]
    return m.ClusterQueue(
        meta=meta, cohort_name=cohort,
        resource_groups=_resource_groups(r, spec.get("resourceGroups"), (*path, "resourceGroups")),
        namespace_selector=_selector(r, spec.get("namespaceSelector"), (*path, "namespaceSelector")),
        queueing_strategy=r.string(spec.get("queueingStrategy"), (*path, "queueingStrategy"),
                                   default="BestEffortFIFO", choices=("BestEffortFIFO", "StrictFIFO")),
        preemption=_preemption(r, spec.get("preemption"), (*path, "preemption")),
        flavor_fungibility=_fungibility(r, spec.get("flavorFungibility"), (*path, "flavorFungibility"),
                                        v1beta1=v1beta1),
        fair_sharing=_fair_sharing(r, spec.get("fairSharing"), (*path, "fairSharing")),
        admission_checks=tuple(checks),
        stop_policy=r.string(spec.get("stopPolicy"), (*path, "stopPolicy"), default="None",
                             choices=("None", "Hold", "HoldAndDrain")),
        source=source)


def _admission_checks_strategy(r: Reader, raw: Any, path: FieldPath) -> tuple[m.AdmissionCheckRule, ...]:
    data = r.mapping(raw, path, allowed=("admissionChecks",))
    out = []
    for i, item in enumerate(r.sequence(data.get("admissionChecks"), (*path, "admissionChecks"))):
        p = (*path, "admissionChecks", i)
        c = r.mapping(item, p, allowed=("name", "onFlavors"))
        out.append(m.AdmissionCheckRule(name=r.string(c.get("name"), (*p, "name"), required=True),
                                        on_flavors=r.string_list(c.get("onFlavors"), (*p, "onFlavors"))))
    return tuple(out)


def _preemption(r: Reader, raw: Any, path: FieldPath) -> m.Preemption:
    data = r.mapping(raw, path, allowed=("withinClusterQueue", "reclaimWithinCohort", "borrowWithinCohort"))
    bwc = None
    if data.get("borrowWithinCohort") is not None:
        bp = (*path, "borrowWithinCohort")
        b = r.mapping(data["borrowWithinCohort"], bp, allowed=("policy", "maxPriorityThreshold"))
        bwc = m.BorrowWithinCohort(
            policy=r.string(b.get("policy"), (*bp, "policy"), default="Never", choices=("Never", "LowerPriority")),
            max_priority_threshold=r.integer(b.get("maxPriorityThreshold"), (*bp, "maxPriorityThreshold")))
    return m.Preemption(
        within_cluster_queue=r.string(data.get("withinClusterQueue"), (*path, "withinClusterQueue"),
                                      default="Never", choices=("Never", "LowerPriority",
                                                                "LowerOrNewerEqualPriority")),
        reclaim_within_cohort=r.string(data.get("reclaimWithinCohort"), (*path, "reclaimWithinCohort"),
                                       default="Never", choices=("Never", "LowerPriority", "Any")),
        borrow_within_cohort=bwc)


def _fungibility(r: Reader, raw: Any, path: FieldPath, *, v1beta1: bool) -> m.FlavorFungibility:
    data = r.mapping(raw, path, allowed=("whenCanBorrow", "whenCanPreempt", "preference"))
    modes = ("MayStopSearch", "TryNextFlavor", *(_FUNGIBILITY_V1BETA1 if v1beta1 else ()))
    borrow = r.string(data.get("whenCanBorrow"), (*path, "whenCanBorrow"), default="MayStopSearch", choices=modes)
    preempt = r.string(data.get("whenCanPreempt"), (*path, "whenCanPreempt"), default="TryNextFlavor",
                       choices=modes)
    return m.FlavorFungibility(
        when_can_borrow=_FUNGIBILITY_V1BETA1.get(borrow, borrow),
        when_can_preempt=_FUNGIBILITY_V1BETA1.get(preempt, preempt),
        preference=r.string(data.get("preference"), (*path, "preference"),
                            choices=("BorrowingOverPreemption", "PreemptionOverBorrowing")) or None)


# --- Cohort, LocalQueue, AdmissionCheck -------------------------------------------------------------------------


def _cohort(r: Reader, meta: m.ObjectMeta, raw: Any, source: Location | None) -> m.Cohort:
    path: FieldPath = ("spec",)
    spec = r.mapping(raw, path, allowed=("parentName", "resourceGroups", "fairSharing"))
    return m.Cohort(meta=meta, parent_name=r.optional_string(spec.get("parentName"), (*path, "parentName")),
                    resource_groups=_resource_groups(r, spec.get("resourceGroups"), (*path, "resourceGroups")),
                    fair_sharing=_fair_sharing(r, spec.get("fairSharing"), (*path, "fairSharing")),
                    source=source)


def _local_queue(r: Reader, meta: m.ObjectMeta, raw: Any, source: Location | None) -> m.LocalQueue:
    path: FieldPath = ("spec",)
    spec = r.mapping(raw, path, allowed=("clusterQueue", "stopPolicy", "fairSharing"))
    return m.LocalQueue(meta=meta, cluster_queue=r.string(spec.get("clusterQueue"), (*path, "clusterQueue"),
                                                          required=True),
                        stop_policy=r.string(spec.get("stopPolicy"), (*path, "stopPolicy"), default="None",
                                             choices=("None", "Hold", "HoldAndDrain")),
                        fair_sharing=_fair_sharing(r, spec.get("fairSharing"), (*path, "fairSharing")),
                        source=source)


def _admission_check(r: Reader, meta: m.ObjectMeta, raw: Any, source: Location | None) -> m.AdmissionCheck:
    path: FieldPath = ("spec",)
    spec = r.mapping(raw, path, allowed=("controllerName", "parameters"), ignored=("retryDelayMinutes",))
    if isinstance(raw, Mapping) and "retryDelayMinutes" in raw:
        r.warn((*path, "retryDelayMinutes"), "dropped-field",
               "spec.retryDelayMinutes was removed in v1beta2 and is ignored")
    params = None
    if spec.get("parameters") is not None:
        pp = (*path, "parameters")
        p = r.mapping(spec["parameters"], pp, allowed=("apiGroup", "kind", "name"))
        params = FrozenMap({k: r.string(p.get(k), (*pp, k), required=True) for k in ("apiGroup", "kind", "name")})
    return m.AdmissionCheck(meta=meta, controller_name=r.string(spec.get("controllerName"),
                                                                (*path, "controllerName"), required=True),
                            parameters=params, source=source)


# --- Workload ---------------------------------------------------------------------------------------------------


def _workload(r: Reader, meta: m.ObjectMeta, raw: Any, source: Location | None, *, v1beta1: bool) -> m.Workload:
    path: FieldPath = ("spec",)
    allowed = ["podSets", "queueName", "priority", "priorityClassRef", "active", "maximumExecutionTimeSeconds",
               "preemptionGates"]
    if v1beta1:
        allowed += ["priorityClassName", "priorityClassSource"]
    spec = r.mapping(raw, path, allowed=allowed)
    ref = None
    if spec.get("priorityClassRef") is not None:
        rp = (*path, "priorityClassRef")
        data = r.mapping(spec["priorityClassRef"], rp, allowed=("group", "kind", "name"))
        ref = m.PriorityClassRef(group=r.string(data.get("group"), (*rp, "group"), required=True),
                                 kind=r.string(data.get("kind"), (*rp, "kind"), required=True,
                                               choices=("WorkloadPriorityClass", "PriorityClass")),
                                 name=r.string(data.get("name"), (*rp, "name"), required=True))
    elif v1beta1 and spec.get("priorityClassName"):
        source_kind = r.string(spec.get("priorityClassSource"), (*path, "priorityClassSource"),
                               default="scheduling.k8s.io/priorityclass")
        wpc = source_kind == "kueue.x-k8s.io/workloadpriorityclass"
        ref = m.PriorityClassRef(group=m.KUEUE_GROUP if wpc else "scheduling.k8s.io",
                                 kind="WorkloadPriorityClass" if wpc else "PriorityClass",
                                 name=r.string(spec.get("priorityClassName"), (*path, "priorityClassName")))
    return m.Workload(meta=meta, queue_name=r.string(spec.get("queueName"), (*path, "queueName")),
                      pod_sets=decode_pod_sets(r, spec.get("podSets"), (*path, "podSets")),
                      priority=r.integer(spec.get("priority"), (*path, "priority")), priority_class_ref=ref,
                      active=r.boolean(spec.get("active"), (*path, "active"), default=True),
                      maximum_execution_time_seconds=r.integer(spec.get("maximumExecutionTimeSeconds"),
                                                               (*path, "maximumExecutionTimeSeconds"), minimum=1),
                      source=source)


# --- encode -----------------------------------------------------------------------------------------------------


def encode(obj: m.AnyObject) -> dict[str, Any]:
    """Print a model object as a v1beta2 (or core) manifest; defaults are written out explicitly."""
    doc: dict[str, Any] = {"apiVersion": ENCODE_VERSION[obj.KIND], "kind": obj.KIND,
                           "metadata": _encode_meta(obj.meta)}
    if isinstance(obj, m.ResourceFlavor):
        spec: dict[str, Any] = {}
        if obj.node_labels:
            spec["nodeLabels"] = dict(obj.node_labels)
        if obj.node_taints:
            spec["nodeTaints"] = [_drop_empty({"key": t.key, "value": t.value, "effect": t.effect})
                                  for t in obj.node_taints]
        if obj.tolerations:
            spec["tolerations"] = [encode_toleration(t) for t in obj.tolerations]
        if obj.topology_name:
            spec["topologyName"] = obj.topology_name
        doc["spec"] = spec
    elif isinstance(obj, m.ClusterQueue):
        doc["spec"] = _encode_cq(obj)
    elif isinstance(obj, m.Cohort):
        doc["spec"] = _drop_none({"parentName": obj.parent_name,
                                  "resourceGroups": _encode_groups(obj.resource_groups) or None,
                                  "fairSharing": _encode_fair(obj.fair_sharing)})
    elif isinstance(obj, m.LocalQueue):
        doc["spec"] = _drop_none({"clusterQueue": obj.cluster_queue, "stopPolicy": obj.stop_policy,
                                  "fairSharing": _encode_fair(obj.fair_sharing)})
    elif isinstance(obj, m.WorkloadPriorityClass):
        doc["value"] = obj.value
        if obj.description:
            doc["description"] = obj.description
    elif isinstance(obj, m.AdmissionCheck):
        doc["spec"] = _drop_none({"controllerName": obj.controller_name,
                                  "parameters": dict(obj.parameters) if obj.parameters else None})
    elif isinstance(obj, m.PriorityClass):
        doc["value"] = obj.value
        doc["globalDefault"] = obj.global_default
        if obj.description:
            doc["description"] = obj.description
        doc["preemptionPolicy"] = obj.preemption_policy
    elif isinstance(obj, m.Workload):
        doc["spec"] = _drop_none({
            "queueName": obj.queue_name or None, "priority": obj.priority,
            "priorityClassRef": {"group": obj.priority_class_ref.group, "kind": obj.priority_class_ref.kind,
                                 "name": obj.priority_class_ref.name} if obj.priority_class_ref else None,
            "active": obj.active, "maximumExecutionTimeSeconds": obj.maximum_execution_time_seconds,
            "podSets": [encode_pod_set(ps) for ps in obj.pod_sets]})
    return doc


def _encode_meta(meta: m.ObjectMeta) -> dict[str, Any]:
    return _drop_none({"name": meta.name, "namespace": meta.namespace, "labels": dict(meta.labels) or None,
                       "annotations": dict(meta.annotations) or None})


def _encode_cq(cq: m.ClusterQueue) -> dict[str, Any]:
    preemption: dict[str, Any] = {"withinClusterQueue": cq.preemption.within_cluster_queue,
                                  "reclaimWithinCohort": cq.preemption.reclaim_within_cohort}
    if cq.preemption.borrow_within_cohort is not None:
        bwc = cq.preemption.borrow_within_cohort
        preemption["borrowWithinCohort"] = _drop_none({"policy": bwc.policy,
                                                       "maxPriorityThreshold": bwc.max_priority_threshold})
    ff = cq.flavor_fungibility
    return _drop_none({
        "cohortName": cq.cohort_name,
        "resourceGroups": _encode_groups(cq.resource_groups),
        "namespaceSelector": _encode_selector(cq.namespace_selector),
        "queueingStrategy": cq.queueing_strategy,
        "preemption": preemption,
        "flavorFungibility": _drop_none({"whenCanBorrow": ff.when_can_borrow, "whenCanPreempt": ff.when_can_preempt,
                                         "preference": ff.preference}),
        "fairSharing": _encode_fair(cq.fair_sharing),
        "admissionChecksStrategy": {"admissionChecks": [
            _drop_empty({"name": c.name, "onFlavors": list(c.on_flavors)}) for c in cq.admission_checks]}
        if cq.admission_checks else None,
        "stopPolicy": cq.stop_policy,
    })


def _encode_groups(groups: tuple[m.ResourceGroup, ...]) -> list[dict[str, Any]]:
    return [{"coveredResources": list(g.covered_resources),
             "flavors": [{"name": f.name, "resources": [_drop_none({
                 "name": q.name, "nominalQuota": str(q.nominal_quota),
                 "borrowingLimit": str(q.borrowing_limit) if q.borrowing_limit is not None else None,
                 "lendingLimit": str(q.lending_limit) if q.lending_limit is not None else None})
                 for q in f.resources]} for f in g.flavors]} for g in groups]


def _encode_selector(sel: m.LabelSelector | None) -> dict[str, Any] | None:
    if sel is None:
        return None
    out: dict[str, Any] = {}
    if sel.match_labels:
        out["matchLabels"] = dict(sel.match_labels)
    if sel.match_expressions:
        out["matchExpressions"] = [_drop_empty({"key": e.key, "operator": e.operator, "values": list(e.values)})
                                   for e in sel.match_expressions]
    return out


def _encode_fair(fs: m.FairSharing | None) -> dict[str, Any] | None:
    if fs is None:
        return None
    return {"weight": str(fs.weight)} if fs.weight is not None else {}


def encode_toleration(t: m.Toleration) -> dict[str, Any]:
    return _drop_empty({"key": t.key, "operator": t.operator, "value": t.value, "effect": t.effect,
                        "tolerationSeconds": t.toleration_seconds})


def _drop_none(d: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in d.items() if v is not None}


def _drop_empty(d: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in d.items() if v not in (None, "", [])}
