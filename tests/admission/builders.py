"""Builders for admission tests: queue definitions as short calls, decoded through the real codec.

    cq("team-a", cohort="shared", quotas={"default": {"cpu": ("8", None, None)}},
       preemption={"reclaimWithinCohort": "Any"})

A quota tuple is (nominal, borrowingLimit, lendingLimit); ``None`` leaves the field out.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from gitopsq.admission.engine import Engine
from gitopsq.admission.topology import Settings, Topology, build_topology
from gitopsq.api import model as m
from gitopsq.api.codec import decode
from gitopsq.api.frozenmap import FrozenMap
from gitopsq.api.quantity import quantity

V = "kueue.x-k8s.io/v1beta2"
Quota = tuple[str, str | None, str | None] | str


def _resources(per_res: Mapping[str, Quota]) -> list[dict[str, Any]]:
    out = []
    for res, q in per_res.items():
        nominal, borrowing, lending = (q, None, None) if isinstance(q, str) else q
        entry: dict[str, Any] = {"name": res, "nominalQuota": nominal}
        if borrowing is not None:
            entry["borrowingLimit"] = borrowing
        if lending is not None:
            entry["lendingLimit"] = lending
        out.append(entry)
    return out


def groups(quotas: Mapping[str, Mapping[str, Quota]]) -> list[dict[str, Any]]:
    """One resource group per distinct set of resources, flavors in the order given."""
    by_resources: dict[tuple[str, ...], list[dict[str, Any]]] = {}
    for flavor, per_res in quotas.items():
        by_resources.setdefault(tuple(per_res), []).append({"name": flavor, "resources": _resources(per_res)})
    return [{"coveredResources": list(res), "flavors": flavors} for res, flavors in by_resources.items()]


def _obj(doc: dict[str, Any]) -> m.QueueObject:
    decoded = decode(doc)
    assert decoded.obj is not None, [str(f) for f in decoded.findings]
    assert not isinstance(decoded.obj, m.Workload)
    return decoded.obj


def flavor(name: str, *, labels: Mapping[str, str] | None = None, taints: list[dict[str, str]] | None = None,
           tolerations: list[dict[str, str]] | None = None) -> m.QueueObject:
    spec: dict[str, Any] = {}
    if labels:
        spec["nodeLabels"] = dict(labels)
    if taints:
        spec["nodeTaints"] = taints
    if tolerations:
        spec["tolerations"] = tolerations
    return _obj({"apiVersion": V, "kind": "ResourceFlavor", "metadata": {"name": name}, "spec": spec})


def tas_flavor(name: str = "tas-default", topology_name: str = "tas-single-level") -> m.QueueObject:
    """A TAS flavor: nodes labelled tas-node=true, placed by the named topology."""
    return _obj({"apiVersion": V, "kind": "ResourceFlavor", "metadata": {"name": name},
                 "spec": {"nodeLabels": {"tas-node": "true"}, "topologyName": topology_name}})


def cq(name: str, *, quotas: Mapping[str, Mapping[str, Quota]], cohort: str | None = None,
       preemption: Mapping[str, Any] | None = None, strategy: str | None = None,
       fungibility: Mapping[str, str] | None = None, selector: Mapping[str, Any] | None = None,
       weight: str | None = None, checks: list[str] | None = None, stop: str | None = None) -> m.QueueObject:
    spec: dict[str, Any] = {"resourceGroups": groups(quotas),
                            "namespaceSelector": dict(selector) if selector is not None else {}}
    if cohort:
        spec["cohortName"] = cohort
    if preemption:
        spec["preemption"] = dict(preemption)
    if strategy:
        spec["queueingStrategy"] = strategy
    if fungibility:
        spec["flavorFungibility"] = dict(fungibility)
    if weight is not None:
        spec["fairSharing"] = {"weight": weight}
    if checks:
        spec["admissionChecksStrategy"] = {"admissionChecks": [{"name": c} for c in checks]}
    if stop:
        spec["stopPolicy"] = stop
    return _obj({"apiVersion": V, "kind": "ClusterQueue", "metadata": {"name": name}, "spec": spec})


def cohort(name: str, *, parent: str | None = None, quotas: Mapping[str, Mapping[str, Quota]] | None = None,
           weight: str | None = None) -> m.QueueObject:
    spec: dict[str, Any] = {}
    if parent:
        spec["parentName"] = parent
    if quotas:
        spec["resourceGroups"] = groups(quotas)
    if weight is not None:
        spec["fairSharing"] = {"weight": weight}
    return _obj({"apiVersion": V, "kind": "Cohort", "metadata": {"name": name}, "spec": spec})


def lq(namespace: str, name: str, cluster_queue: str, *, stop: str | None = None) -> m.QueueObject:
    spec: dict[str, Any] = {"clusterQueue": cluster_queue}
    if stop:
        spec["stopPolicy"] = stop
    return _obj({"apiVersion": V, "kind": "LocalQueue", "metadata": {"name": name, "namespace": namespace},
                 "spec": spec})


def namespace(name: str, labels: Mapping[str, str]) -> m.QueueObject:
    return _obj({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": dict(labels)}})


def check(name: str) -> m.QueueObject:
    return _obj({"apiVersion": V, "kind": "AdmissionCheck", "metadata": {"name": name},
                 "spec": {"controllerName": "example.com/check"}})


def pod_sets(*sets: tuple[str, int, Mapping[str, str]], selector: Mapping[str, str] | None = None,
             tolerations: tuple[m.Toleration, ...] = ()) -> tuple[m.PodSet, ...]:
    """Pod sets from (name, count, per-pod requests)."""
    return tuple(m.PodSet(name=n, count=c, requests=FrozenMap({r: quantity(q) for r, q in req.items()}),
                          node_selector=FrozenMap(dict(selector or {})), tolerations=tolerations)
                 for n, c, req in sets)


def one(cpu: str, count: int = 1, **extra: str) -> tuple[m.PodSet, ...]:
    """One pod set ``main`` of ``count`` pods requesting ``cpu`` each (and ``extra`` resources)."""
    return pod_sets(("main", count, {"cpu": cpu, **{k.replace("_", "/"): v for k, v in extra.items()}}))


def topology(*objects: m.QueueObject, fair: bool = False, strategies: tuple[str, ...] | None = None,
             **settings: object) -> Topology:
    """The topology of ``objects``; ``settings`` are further `Settings` fields (e.g. fair_sharing_look_ahead)."""
    base = Settings(fair_sharing=fair) if strategies is None else Settings(fair, strategies)
    return build_topology(objects, replace(base, **settings))


class Sim:
    """An engine plus short helpers: submit, admit as initial state, schedule, look."""

    def __init__(self, *objects: m.QueueObject, fair: bool = False,
                 strategies: tuple[str, ...] | None = None, **settings: object) -> None:
        self.engine = Engine(topology(*objects, fair=fair, strategies=strategies, **settings))
        self.clock = 0.0

    def submit(self, key: str, queue: str, pods: tuple[m.PodSet, ...], *, priority: int = 0,
               created: float | None = None) -> None:
        ns = key.split("/", maxsplit=1)[0]
        self.clock += 1
        self.engine.submit(key=key, namespace=ns, queue=queue, priority=priority,
                           created=self.clock if created is None else created, pod_sets=pods)

    def running(self, key: str, queue: str, pods: tuple[m.PodSet, ...], *, cq: str, flavor: str = "default",
                priority: int = 0, at: float = 0.0) -> None:
        """An already admitted workload, every resource of every pod set in ``flavor``."""
        self.submit(key, queue, pods, priority=priority)
        self.engine.restore(key, cluster_queue=cq, flavors={ps.name: dict.fromkeys(ps.requests, flavor)
                                                            for ps in pods}, at=at)

    def schedule(self, now: float = 100.0) -> list[tuple[str, str, str]]:
        self.engine.schedule(now)
        return [(e.type, e.workload, e.reason) for e in self.engine.take_events()]

    def state(self, key: str) -> str:
        return self.engine.view(key).state

    def why(self, key: str) -> tuple[str, str]:
        v = self.engine.view(key)
        return v.reason, v.message

    def flavors(self, key: str) -> dict[str, dict[str, str]]:
        return {ps: dict(per) for ps, per in self.engine.view(key).flavors}


def workload_priority_class(name: str, value: int) -> m.QueueObject:
    return _obj({"apiVersion": V, "kind": "WorkloadPriorityClass", "metadata": {"name": name}, "value": value})
