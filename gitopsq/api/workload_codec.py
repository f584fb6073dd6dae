"""A Workload's spec, and its pod sets (or a Job's pod template), ⇄ `Workload` and `PodSet`.

Only what admission needs is read from a pod template: per-pod requests, node selector, tolerations and
required node affinity. Per-pod requests follow Kubernetes' rule: the larger of the sum over containers and the
largest init container, per resource, plus pod overhead; a container's limit stands in for a missing request.
Other template fields are not ours to judge and are passed over without findings.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gitopsq.api import model as m
from gitopsq.api.frozenmap import FrozenMap
from gitopsq.api.quantity import Quantity
from gitopsq.api.reader import FieldPath, Reader, as_list, as_mapping
from gitopsq.api.shared_fields import decode_tolerations, drop_none, encode_toleration
from gitopsq.errors import Location


def decode_pod_sets(r: Reader, raw: Any, path: FieldPath) -> tuple[m.PodSet, ...]:
    items = r.sequence(raw, path)
    if not items:
        r.error(path, "missing-field", "spec.podSets needs at least one pod set")
    if len(items) > 18:
        r.error(path, "too-many", f"spec.podSets has {len(items)} pod sets; Kueue allows at most 18")
    out = []
    for i, item in enumerate(items):
        p = (*path, i)
        data = r.mapping(item, p, allowed=("name", "count", "minCount", "template", "topologyRequest",
                                           "podSetGroupName"))
        out.append(decode_pod_template(r, data.get("template"), (*p, "template"),
                                       name=r.string(data.get("name"), (*p, "name"), default="main"),
                                       count=r.integer(data.get("count"), (*p, "count"), default=1, minimum=0) or 0,
                                       min_count=r.integer(data.get("minCount"), (*p, "minCount"), minimum=1)))
    return tuple(out)


def decode_pod_template(r: Reader, raw: Any, path: FieldPath, *, name: str, count: int,
                        min_count: int | None) -> m.PodSet:
    spec = as_mapping(as_mapping(raw).get("spec"))
    sp: FieldPath = (*path, "spec")
    total = _sum_containers(r, spec.get("containers"), (*sp, "containers"))
    for resource, amount in _max_containers(r, spec.get("initContainers"), (*sp, "initContainers")).items():
        if amount > total.get(resource, Quantity(0)):
            total[resource] = amount
    overhead = spec.get("overhead")
    if isinstance(overhead, Mapping):
        for resource, value in overhead.items():
            q = r.quantity(value, (*sp, "overhead", resource))
            if q is not None:
                total[resource] = total.get(resource, Quantity(0)) + q
    return m.PodSet(name=name, count=count, min_count=min_count, requests=FrozenMap(total),
                    node_selector=r.string_map(spec.get("nodeSelector"), (*sp, "nodeSelector")),
                    tolerations=decode_tolerations(r, spec.get("tolerations"), (*sp, "tolerations")),
                    required_affinity=_required_affinity(r, spec.get("affinity"), (*sp, "affinity")))


def _container_requests(r: Reader, container: Any, path: FieldPath) -> dict[str, Quantity]:
    if not isinstance(container, Mapping):
        return {}
    resources = as_mapping(container.get("resources"))
    out: dict[str, Quantity] = {}
    for source in ("limits", "requests"):  # requests override limits
        values = resources.get(source)
        if isinstance(values, Mapping):
            for resource, value in values.items():
                q = r.quantity(value, (*path, "resources", source, resource))
                if q is not None:
                    out[str(resource)] = q
    return out


def _sum_containers(r: Reader, raw: Any, path: FieldPath) -> dict[str, Quantity]:
    total: dict[str, Quantity] = {}
    for i, container in enumerate(as_list(raw)):
        for resource, q in _container_requests(r, container, (*path, i)).items():
            total[resource] = total.get(resource, Quantity(0)) + q
    return total


def _max_containers(r: Reader, raw: Any, path: FieldPath) -> dict[str, Quantity]:
    most: dict[str, Quantity] = {}
    for i, container in enumerate(as_list(raw)):
        for resource, q in _container_requests(r, container, (*path, i)).items():
            if q > most.get(resource, Quantity(0)):
                most[resource] = q
    return most


def _required_affinity(r: Reader, raw: Any, path: FieldPath) -> tuple[tuple[m.LabelSelectorRequirement, ...], ...]:
    node = as_mapping(as_mapping(raw).get("nodeAffinity"))
    terms = as_mapping(node.get("requiredDuringSchedulingIgnoredDuringExecution")).get("nodeSelectorTerms")
    out = []
    for term in as_list(terms):
        reqs = []
        for e in as_list(as_mapping(term).get("matchExpressions")):
            if isinstance(e, Mapping) and isinstance(e.get("key"), str):
                reqs.append(m.LabelSelectorRequirement(key=e["key"], operator=str(e.get("operator", "In")),
                                                       values=tuple(str(v) for v in as_list(e.get("values")))))
        out.append(tuple(reqs))
    return tuple(out)


def encode_pod_set(ps: m.PodSet) -> dict[str, Any]:
    """A pod set with a one-container template carrying the per-pod requests and scheduling constraints."""
    spec: dict[str, Any] = {"restartPolicy": "Never", "containers": [{
        "name": "main", "image": "registry.k8s.io/pause:3.10",
        "resources": {"requests": {k: str(v) for k, v in ps.requests.items()}}}]}
    if ps.node_selector:
        spec["nodeSelector"] = dict(ps.node_selector)
    if ps.tolerations:
        spec["tolerations"] = [encode_toleration(t) for t in ps.tolerations]
    if ps.required_affinity:
        spec["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [
                {"key": e.key, "operator": e.operator, **({"values": list(e.values)} if e.values else {})}
                for e in term]} for term in ps.required_affinity]}}}
    out: dict[str, Any] = {"name": ps.name, "count": ps.count, "template": {"spec": spec}}
    if ps.min_count is not None:
        out["minCount"] = ps.min_count
    return out


def decode_workload(r: Reader, meta: m.ObjectMeta, raw: Any, source: Location | None, *, v1beta1: bool) -> m.Workload:
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


def encode_workload_spec(obj: m.Workload) -> dict[str, Any]:
    ref = obj.priority_class_ref
    return drop_none({
        "queueName": obj.queue_name or None, "priority": obj.priority,
        "priorityClassRef": {"group": ref.group, "kind": ref.kind, "name": ref.name} if ref else None,
        "active": obj.active, "maximumExecutionTimeSeconds": obj.maximum_execution_time_seconds,
        "podSets": [encode_pod_set(ps) for ps in obj.pod_sets]})
