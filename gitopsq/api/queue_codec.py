"""The quota kinds ⇄ model objects: ResourceFlavor, ClusterQueue, Cohort, LocalQueue and AdmissionCheck (their
specs; `codec` reads the envelope and dispatches here). v1beta1 ClusterQueue fields are normalised to v1beta2
(``cohort``, ``admissionChecks``, the ``Borrow``/``Preempt`` fungibility modes)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gitopsq.api import model as m
from gitopsq.api.frozenmap import FrozenMap
from gitopsq.api.quantity import Quantity
from gitopsq.api.reader import FieldPath, Reader, render_path
from gitopsq.api.shared_fields import (
    decode_fair_sharing,
    decode_selector,
    decode_tolerations,
    drop_empty,
    drop_none,
    encode_fair_sharing,
    encode_selector,
    encode_toleration,
)
from gitopsq.errors import Location

_FUNGIBILITY_V1BETA1 = {"Borrow": "MayStopSearch", "Preempt": "MayStopSearch"}


def decode_resource_flavor(r: Reader, meta: m.ObjectMeta, raw: Any, source: Location | None) -> m.ResourceFlavor:
    path: FieldPath = ("spec",)
    spec = r.mapping(raw, path, allowed=("nodeLabels", "nodeTaints", "tolerations", "topologyName"))
    taints = []
    for i, item in enumerate(r.sequence(spec.get("nodeTaints"), (*path, "nodeTaints"))):
        p = (*path, "nodeTaints", i)
        t = r.mapping(item, p, allowed=("key", "value", "effect", "timeAdded"))
        taints.append(m.Taint(key=r.string(t.get("key"), (*p, "key"), required=True),
                              value=r.string(t.get("value"), (*p, "value")),
                              effect=r.string(t.get("effect"), (*p, "effect"), required=True,
                                              choices=("NoSchedule", "PreferNoSchedule", "NoExecute")),
                              time_added=r.optional_string(t.get("timeAdded"), (*p, "timeAdded"))))
    return m.ResourceFlavor(meta=meta, node_labels=r.string_map(spec.get("nodeLabels"), (*path, "nodeLabels")),
                            node_taints=tuple(taints),
                            tolerations=decode_tolerations(r, spec.get("tolerations"), (*path, "tolerations")),
                            topology_name=r.optional_string(spec.get("topologyName"), (*path, "topologyName")),
                            source=source)


def _resource_groups(r: Reader, raw: Any, path: FieldPath) -> tuple[m.ResourceGroup, ...]:
    groups = []
    for i, item in enumerate(r.sequence(raw, path)):
        p = (*path, i)
        g = r.mapping(item, p, allowed=("coveredResources", "flavors"))
        covered = r.string_list(g.get("coveredResources"), (*p, "coveredResources"))
        if "coveredResources" not in g:
            r.error((*p, "coveredResources"), "missing-field", f"{render_path(p)}.coveredResources is required")
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


_CQ_FIELDS = ("cohortName", "resourceGroups", "namespaceSelector", "queueingStrategy", "preemption",
              "flavorFungibility", "fairSharing", "admissionChecksStrategy", "stopPolicy", "admissionScope")
_ADMISSION_MODES = ("UsageBasedAdmissionFairSharing", "NoAdmissionFairSharing")


def decode_cluster_queue(r: Reader, meta: m.ObjectMeta, raw: Any, source: Location | None, *,
                   v1beta1: bool) -> m.ClusterQueue:
    path: FieldPath = ("spec",)
    allowed = (*_CQ_FIELDS, "cohort", "admissionChecks") if v1beta1 else (*_CQ_FIELDS, "concurrentAdmissionPolicy")
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
        names = r.string_list(spec.get("admissionChecks"), (*path, "admissionChecks"))
        for i, name in enumerate(names):
            if name in names[:i]:  # v1beta2 keys the converted list by name: it could not be stored
                r.error((*path, "admissionChecks", i), "duplicate-value", f"admission check {name!r} is listed twice")
        checks = [m.AdmissionCheckRule(name=n) for n in names]
    return m.ClusterQueue(
        meta=meta, cohort_name=cohort,
        resource_groups=_resource_groups(r, spec.get("resourceGroups"), (*path, "resourceGroups")),
        namespace_selector=decode_selector(r, spec.get("namespaceSelector"), (*path, "namespaceSelector")),
        queueing_strategy=r.string(spec.get("queueingStrategy"), (*path, "queueingStrategy"),
                                   default="BestEffortFIFO", choices=("BestEffortFIFO", "StrictFIFO")),
        preemption=_preemption(r, spec.get("preemption"), (*path, "preemption")),
        flavor_fungibility=_fungibility(r, spec.get("flavorFungibility"), (*path, "flavorFungibility"),
                                        v1beta1=v1beta1),
        fair_sharing=decode_fair_sharing(r, spec.get("fairSharing"), (*path, "fairSharing")),
        admission_checks=tuple(checks),
        stop_policy=r.string(spec.get("stopPolicy"), (*path, "stopPolicy"), default="None",
                             choices=("None", "Hold", "HoldAndDrain")),
        admission_mode=_admission_mode(r, spec.get("admissionScope"), (*path, "admissionScope")),
        concurrent_admission=_concurrent_admission(r, spec.get("concurrentAdmissionPolicy"),
                                                   (*path, "concurrentAdmissionPolicy")),
        source=source)


def _admission_mode(r: Reader, raw: Any, path: FieldPath) -> str | None:
    if raw is None:
        return None
    scope = r.mapping(raw, path, allowed=("admissionMode",))
    return r.string(scope.get("admissionMode"), (*path, "admissionMode"), required=True, choices=_ADMISSION_MODES)


def _concurrent_admission(r: Reader, raw: Any, path: FieldPath) -> m.ConcurrentAdmission | None:
    if raw is None:
        return None
    policy = r.mapping(raw, path, allowed=("migration",))
    mp = (*path, "migration")
    migration = r.mapping(policy.get("migration"), mp, allowed=("mode", "constraints"))
    if "migration" not in policy:
        r.error(mp, "missing-field", f"{render_path(mp)} is required")
    constraints = r.mapping(migration.get("constraints"), (*mp, "constraints"), allowed=("lastAcceptableFlavorName",))
    return m.ConcurrentAdmission(
        mode=r.string(migration.get("mode"), (*mp, "mode"), required="migration" in policy,
                      choices=("TryPreferredFlavors", "RetainFirstAdmission")),
        last_acceptable_flavor=r.optional_string(constraints.get("lastAcceptableFlavorName"),
                                                 (*mp, "constraints", "lastAcceptableFlavorName")))


def _admission_checks_strategy(r: Reader, raw: Any, path: FieldPath) -> tuple[m.AdmissionCheckRule, ...]:
    data = r.mapping(raw, path, allowed=("admissionChecks",))
    out: list[m.AdmissionCheckRule] = []
    for i, item in enumerate(r.sequence(data.get("admissionChecks"), (*path, "admissionChecks"))):
        p = (*path, "admissionChecks", i)
        c = r.mapping(item, p, allowed=("name", "onFlavors"))
        rule = m.AdmissionCheckRule(name=r.string(c.get("name"), (*p, "name"), required=True),
                                    on_flavors=r.string_list(c.get("onFlavors"), (*p, "onFlavors")))
        # The CRD keys this list by name and makes onFlavors a set: the API server refuses repeats.
        if any(earlier.name == rule.name for earlier in out):
            r.error((*p, "name"), "duplicate-value", f"admission check {rule.name!r} is listed twice")
        for j, flavor in enumerate(rule.on_flavors):
            if flavor in rule.on_flavors[:j]:
                r.error((*p, "onFlavors", j), "duplicate-value", f"flavor {flavor!r} is listed twice")
        out.append(rule)
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


def decode_cohort(r: Reader, meta: m.ObjectMeta, raw: Any, source: Location | None) -> m.Cohort:
    path: FieldPath = ("spec",)
    spec = r.mapping(raw, path, allowed=("parentName", "resourceGroups", "fairSharing"))
    return m.Cohort(meta=meta, parent_name=r.optional_string(spec.get("parentName"), (*path, "parentName")),
                    resource_groups=_resource_groups(r, spec.get("resourceGroups"), (*path, "resourceGroups")),
                    fair_sharing=decode_fair_sharing(r, spec.get("fairSharing"), (*path, "fairSharing")),
                    source=source)


def decode_local_queue(r: Reader, meta: m.ObjectMeta, raw: Any, source: Location | None) -> m.LocalQueue:
    path: FieldPath = ("spec",)
    spec = r.mapping(raw, path, allowed=("clusterQueue", "stopPolicy", "fairSharing"))
    return m.LocalQueue(meta=meta, cluster_queue=r.string(spec.get("clusterQueue"), (*path, "clusterQueue"),
                                                          required=True),
                        stop_policy=r.string(spec.get("stopPolicy"), (*path, "stopPolicy"), default="None",
                                             choices=("None", "Hold", "HoldAndDrain")),
                        fair_sharing=decode_fair_sharing(r, spec.get("fairSharing"), (*path, "fairSharing")),
                        source=source)


def decode_admission_check(r: Reader, meta: m.ObjectMeta, raw: Any, source: Location | None) -> m.AdmissionCheck:
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


# --- encode -----------------------------------------------------------------------------------------------------


def encode_resource_flavor_spec(obj: m.ResourceFlavor) -> dict[str, Any]:
    spec: dict[str, Any] = {}
    if obj.node_labels:
        spec["nodeLabels"] = dict(obj.node_labels)
    if obj.node_taints:
        spec["nodeTaints"] = [drop_empty({"key": t.key, "value": t.value, "effect": t.effect,
                                          "timeAdded": t.time_added}) for t in obj.node_taints]
    if obj.tolerations:
        spec["tolerations"] = [encode_toleration(t) for t in obj.tolerations]
    if obj.topology_name:
        spec["topologyName"] = obj.topology_name
    return spec


def encode_cohort_spec(obj: m.Cohort) -> dict[str, Any]:
    return drop_none({"parentName": obj.parent_name, "resourceGroups": encode_groups(obj.resource_groups) or None,
                      "fairSharing": encode_fair_sharing(obj.fair_sharing)})


def encode_local_queue_spec(obj: m.LocalQueue) -> dict[str, Any]:
    return drop_none({"clusterQueue": obj.cluster_queue, "stopPolicy": obj.stop_policy,
                      "fairSharing": encode_fair_sharing(obj.fair_sharing)})


def encode_admission_check_spec(obj: m.AdmissionCheck) -> dict[str, Any]:
    return drop_none({"controllerName": obj.controller_name,
                      "parameters": dict(obj.parameters) if obj.parameters else None})


def encode_cluster_queue_spec(cq: m.ClusterQueue) -> dict[str, Any]:
    preemption: dict[str, Any] = {"withinClusterQueue": cq.preemption.within_cluster_queue,
                                  "reclaimWithinCohort": cq.preemption.reclaim_within_cohort}
    if cq.preemption.borrow_within_cohort is not None:
        bwc = cq.preemption.borrow_within_cohort
        preemption["borrowWithinCohort"] = drop_none({"policy": bwc.policy,
                                                       "maxPriorityThreshold": bwc.max_priority_threshold})
    ff = cq.flavor_fungibility
    return drop_none({
        "cohortName": cq.cohort_name,
        "resourceGroups": encode_groups(cq.resource_groups),
        "namespaceSelector": encode_selector(cq.namespace_selector),
        "queueingStrategy": cq.queueing_strategy,
        "preemption": preemption,
        "flavorFungibility": drop_none({"whenCanBorrow": ff.when_can_borrow, "whenCanPreempt": ff.when_can_preempt,
                                         "preference": ff.preference}),
        "fairSharing": encode_fair_sharing(cq.fair_sharing),
        "admissionChecksStrategy": {"admissionChecks": [
            drop_empty({"name": c.name, "onFlavors": list(c.on_flavors)}) for c in cq.admission_checks]}
        if cq.admission_checks else None,
        "stopPolicy": cq.stop_policy,
        "admissionScope": {"admissionMode": cq.admission_mode} if cq.admission_mode is not None else None,
        "concurrentAdmissionPolicy": _encode_concurrent_admission(cq.concurrent_admission),
    })


def _encode_concurrent_admission(policy: m.ConcurrentAdmission | None) -> dict[str, Any] | None:
    if policy is None:
        return None
    migration: dict[str, Any] = {"mode": policy.mode}
    if policy.last_acceptable_flavor is not None:
        migration["constraints"] = {"lastAcceptableFlavorName": policy.last_acceptable_flavor}
    return {"migration": migration}


def encode_groups(groups: tuple[m.ResourceGroup, ...]) -> list[dict[str, Any]]:
    return [{"coveredResources": list(g.covered_resources),
             "flavors": [{"name": f.name, "resources": [drop_none({
                 "name": q.name, "nominalQuota": str(q.nominal_quota),
                 "borrowingLimit": str(q.borrowing_limit) if q.borrowing_limit is not None else None,
                 "lendingLimit": str(q.lending_limit) if q.lending_limit is not None else None})
                 for q in f.resources]} for f in g.flavors]} for g in groups]
