"""A scenario file (shared/interfaces.md §4) as the Kubernetes objects upstream Kueue reads.

minimalkueue runs without webhooks, so everything Kueue's webhooks and job integration would fill in is written
here: a Workload's priority and priority class reference, full pod templates, and for already-admitted workloads
the whole `status.admission` with its resource usage and the QuotaReserved/Admitted conditions at the scenario's
times. CRD defaults (queueingStrategy, preemption, flavorFungibility) are left to the API server's schema.

Queue objects in v1beta2 are sent verbatim, so the oracle does not depend on gitopsq's codec; v1beta1 objects
(Kueue's CRDs convert between versions only with a webhook, which minimalkueue lacks) go through gitopsq's
codec to v1beta2 — the one place where our own code shapes the oracle's input.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from kubernetes.utils import parse_quantity

GROUP = "kueue.x-k8s.io"
VERSION = "v1beta2"
QUEUE_KINDS = ("ResourceFlavor", "Cohort", "ClusterQueue", "LocalQueue", "WorkloadPriorityClass", "AdmissionCheck")
PLURALS = {
    "ResourceFlavor": "resourceflavors", "Cohort": "cohorts", "ClusterQueue": "clusterqueues",
    "LocalQueue": "localqueues", "WorkloadPriorityClass": "workloadpriorityclasses",
    "AdmissionCheck": "admissionchecks", "Workload": "workloads",
}
NAMESPACED = {"LocalQueue", "Workload"}


class UnsupportedScenarioError(ValueError):
    """The scenario uses something the oracle cannot reproduce on minimalkueue (say which)."""


@dataclass(frozen=True, slots=True)
class Plan:
    """What to create, in order, and the facts the driver needs while it plays the clock."""

    namespaces: dict[str, dict[str, str]]  # name -> labels
    priority_classes: list[dict[str, Any]]
    queue_objects: list[dict[str, Any]]  # v1beta2, in dependency order
    workloads: list[dict[str, Any]]  # the scenario's `workloads` entries, list order
    local_queues: dict[str, str] = field(default_factory=dict)  # "ns/lq" -> cq
    cluster_queues: list[str] = field(default_factory=list)
    fair_sharing: bool = False
    strategies: tuple[str, ...] = ()
    horizon: float | None = None


def _to_v1beta2(obj: dict[str, Any]) -> dict[str, Any]:
    if obj.get("apiVersion") == f"{GROUP}/{VERSION}":
        return obj
    from gitopsq.api.codec import decode, encode

    decoded = decode(obj, file="<scenario>")
    if decoded.obj is None:
        raise UnsupportedScenarioError(f"cannot convert {obj.get('kind')} {obj.get('apiVersion')}: {decoded.findings}")
    out: dict[str, Any] = encode(decoded.obj)
    return out


def plan(scenario: dict[str, Any]) -> Plan:
    """Sort a parsed scenario into the objects to create; raise UnsupportedScenarioError for what the oracle lacks."""
    settings = scenario.get("settings") or {}
    if settings.get("admissionChecks"):
        raise UnsupportedScenarioError("admission checks need a check controller the oracle does not play")
    fair = settings.get("fairSharing")
    fair_on = fair is not None and fair.get("enable", True) is not False
    namespaces: dict[str, dict[str, str]] = {}
    pcs: list[dict[str, Any]] = []
    objects: list[dict[str, Any]] = []
    for raw in scenario.get("objects") or []:
        kind = raw.get("kind")
        if kind == "Namespace":
            namespaces[raw["metadata"]["name"]] = dict(raw["metadata"].get("labels") or {})
        elif kind == "PriorityClass":
            pcs.append(raw)
        elif kind in QUEUE_KINDS:
            objects.append(_to_v1beta2(raw))
        else:
            raise UnsupportedScenarioError(f"object kind {kind} is not supported by the oracle")
    for o in objects:
        if o["kind"] == "AdmissionCheck" or (o.get("spec") or {}).get("admissionChecksStrategy"):
            raise UnsupportedScenarioError("admission checks need a check controller the oracle does not play")
    order = {k: i for i, k in enumerate(QUEUE_KINDS)}
    objects.sort(key=lambda o: order[o["kind"]])
    workloads = list(scenario.get("workloads") or [])
    for w in workloads:
        if w.get("admissionChecks"):
            raise UnsupportedScenarioError("admission checks need a check controller the oracle does not play")
    for o in objects:
        if o["kind"] == "LocalQueue":
            namespaces.setdefault(o["metadata"]["namespace"], {})
    for w in workloads:
        namespaces.setdefault(w.get("namespace", "default"), {})
    lqs = {f"{o['metadata']['namespace']}/{o['metadata']['name']}": o["spec"]["clusterQueue"]
           for o in objects if o["kind"] == "LocalQueue"}
    cqs = [o["metadata"]["name"] for o in objects if o["kind"] == "ClusterQueue"]
    return Plan(namespaces, pcs, objects, workloads, lqs, cqs, fair_on,
                tuple((fair or {}).get("preemptionStrategies") or ()), scenario.get("horizon"))


def priority_fields(entry: dict[str, Any], scenario_objects: list[dict[str, Any]]) -> dict[str, Any]:
    """spec.priority and spec.priorityClassRef as Kueue's job integration would set them."""
    name = entry.get("priorityClass")
    if name is not None:
        for o in scenario_objects:
            if o.get("kind") == "WorkloadPriorityClass" and o["metadata"]["name"] == name:
                return {"priority": int(o["value"]),
                        "priorityClassRef": {"group": GROUP, "kind": "WorkloadPriorityClass", "name": name}}
            if o.get("kind") == "PriorityClass" and o["metadata"]["name"] == name:
                return {"priority": int(o["value"]),
                        "priorityClassRef": {"group": "scheduling.k8s.io", "kind": "PriorityClass", "name": name}}
    if entry.get("priority") is not None:
        return {"priority": int(entry["priority"])}
    defaults = [o for o in scenario_objects if o.get("kind") == "PriorityClass" and o.get("globalDefault")]
    if defaults:
        low = min(defaults, key=lambda o: int(o["value"]))
        return {"priority": int(low["value"]),
                "priorityClassRef": {"group": "scheduling.k8s.io", "kind": "PriorityClass",
                                     "name": low["metadata"]["name"]}}
    return {}


def _pod_template(ps: dict[str, Any]) -> dict[str, Any]:
    if ps.get("template") is not None:
        template: dict[str, Any] = ps["template"]
        return template
    requests = {str(k): str(v) for k, v in (ps.get("requests") or {}).items()}
    spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10", "resources": {"requests": requests}}],
    }
    if ps.get("nodeSelector"):
        spec["nodeSelector"] = dict(ps["nodeSelector"])
    if ps.get("tolerations"):
        spec["tolerations"] = list(ps["tolerations"])
    return {"spec": spec}


def workload(entry: dict[str, Any], scenario_objects: list[dict[str, Any]]) -> dict[str, Any]:
    """The Workload object for one `workloads` entry, without status."""
    pod_sets = []
    for ps in entry["podSets"]:
        item: dict[str, Any] = {"name": ps.get("name", "main"), "count": int(ps.get("count", 1)),
                                "template": _pod_template(ps)}
        if ps.get("minCount") is not None:
            item["minCount"] = int(ps["minCount"])
        pod_sets.append(item)
    spec: dict[str, Any] = {"queueName": entry["queue"], "active": True, "podSets": pod_sets,
                            **priority_fields(entry, scenario_objects)}
    return {"apiVersion": f"{GROUP}/{VERSION}", "kind": "Workload",
            "metadata": {"name": entry["name"], "namespace": entry.get("namespace", "default")}, "spec": spec}


def _requests(ps: dict[str, Any]) -> dict[str, Decimal]:
    if ps.get("template") is not None:
        total: dict[str, Decimal] = {}
        for c in ps["template"].get("spec", {}).get("containers", []):
            for res, q in ((c.get("resources") or {}).get("requests") or {}).items():
                total[res] = total.get(res, Decimal(0)) + parse_quantity(q)
        return total
    return {str(k): parse_quantity(v) for k, v in (ps.get("requests") or {}).items()}


def quantity(value: Decimal) -> str:
    """A Decimal as a Kubernetes quantity string (milli-units when fractional)."""
    if value == value.to_integral_value():
        return str(int(value))
    return f"{int(value * 1000)}m"


def admission_status(entry: dict[str, Any], base: dt.datetime) -> dict[str, Any]:
    """status.admission and the QuotaReserved/Admitted conditions of an already-admitted workload."""
    admitted = entry["admitted"]
    cq = admitted["clusterQueue"]
    flavors = admitted.get("flavors") or {}
    assignments = []
    for ps in entry["podSets"]:
        name, count = ps.get("name", "main"), int(ps.get("count", 1))
        per_pod = {r: q for r, q in _requests(ps).items() if q != 0}
        chosen = flavors.get(name) or {}
        missing = sorted(set(per_pod) - set(chosen))
        if missing:
            raise UnsupportedScenarioError(f"{entry['name']}: admitted.flavors.{name} lacks {', '.join(missing)}")
        assignments.append({"name": name, "count": count, "flavors": {r: chosen[r] for r in sorted(per_pod)},
                            "resourceUsage": {r: quantity(q * count) for r, q in sorted(per_pod.items())}})
    when = (base + dt.timedelta(seconds=float(admitted.get("at", 0)))).strftime("%Y-%m-%dT%H:%M:%SZ")
    conditions = [
        {"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved",
         "message": f"Quota reserved in ClusterQueue {cq}", "lastTransitionTime": when},
        {"type": "Admitted", "status": "True", "reason": "Admitted", "message": "The workload is admitted",
         "lastTransitionTime": when},
    ]
    return {"admission": {"clusterQueue": cq, "podSetAssignments": assignments}, "conditions": conditions}
