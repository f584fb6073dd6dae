"""Topology-aware scheduling in flavor assignment (Kueue v0.19.2's flavorassigner, TopologyAwareScheduling on).

A pod set *requests* TAS when its annotations ask for a topology, or (implied) when every flavor of its
ClusterQueue is a TAS flavor. While flavors are scanned, `flavor_mismatch` passes over a flavor that cannot serve
the pod set's request (a TAS flavor for a pod set that requests none, a plain flavor for one that does, a flavor
whose topology lacks the requested level). Once quota fits, `place_workload` places every requesting pod set in
its TAS flavor; one that does not fit makes the workload wait for preemption if it would fit on a cluster without
TAS workloads, and not fit at all (``TopologyPlacementFailed``) otherwise.
"""

from __future__ import annotations

from collections.abc import Mapping

from gitopsq.admission.tas_domains import ONE_POD, PODS, DomainTree, TasCluster
from gitopsq.admission.tas_filter import PodConstraints, go_quote
from gitopsq.admission.tas_placement import Placement, PodSetPlacement, has_levels, place
from gitopsq.admission.topology import QueueSpec
from gitopsq.admission.workload import PodSetShape, Shape
from gitopsq.api import model as m
from gitopsq.api.frozenmap import FrozenMap

TOPOLOGY_PLACEMENT_FAILED = "TopologyPlacementFailed"


class Outcome:
    """``failed``: the pod set that did not fit (empty: all did) and why; ``error``: a pod set whose flavors
    cannot be placed at all (Kueue's status error)."""

    __slots__ = ("error", "failed", "placements", "reason")

    def __init__(self, placements: tuple[PodSetPlacement, ...], failed: str = "", reason: str = "",
                 error: str = "") -> None:
        self.placements = placements
        self.failed = failed
        self.reason = reason
        self.error = error


def tas_only(spec: QueueSpec, flavors: Mapping[str, m.ResourceFlavor], tas: TasCluster) -> bool:
    """Every flavor of the ClusterQueue is a TAS flavor (pod sets without a request get an implied one)."""
    return all(tas.is_tas_flavor(flavors.get(f)) for g in spec.groups for f in g.flavors)


def requests_tas(ps: PodSetShape, only_tas: bool) -> bool:
    return (ps.topology is not None and ps.topology.explicit()) or only_tas


def flavor_mismatch(tas: TasCluster, ps: PodSetShape, flavor: str, rf: m.ResourceFlavor, *, only_tas: bool,
                    covered: tuple[str, ...]) -> str:
    """Why the flavor cannot serve the pod set's topology request (empty: it can); Kueue's
    checkPodSetAndFlavorMatchForTAS."""
    quoted = go_quote(flavor)
    if requests_tas(ps, only_tas):
        if ps.topology is None or not ps.topology.explicit():
            return ""  # implied: any flavor of a TAS-only ClusterQueue serves it
        if rf.topology_name is None:
            if not any(r in covered for r in ps.per_pod):
                return ""
            return f"Flavor {quoted} does not support TopologyAwareScheduling"
        tree = tas.tree(rf)
        if tree is None:
            return f"Flavor {quoted} information missing in TAS cache"
        if not has_levels(tree, ps.topology):
            return f"Flavor {quoted} does not contain the requested level"
        return ""
    if rf.topology_name is not None:
        return f"Flavor {quoted} supports only TopologyAwareScheduling"
    return ""


def usage_of(per_pod: Mapping[str, int], placement: Placement) -> dict[str, dict[str, int]]:
    """What a placement takes per leaf: its pods' requests and one ``pods`` each."""
    out: dict[str, dict[str, int]] = {}
    requests = list(per_pod.items())  # once: a FrozenMap is slow to walk
    for leaf, pods in placement.leaves:
        amounts = {r: v * pods for r, v in requests}
        amounts[PODS] = amounts.get(PODS, 0) + ONE_POD * pods
        out[leaf] = amounts
    return out


def admitted_placement(pod_set: str, flavor: str, topology: str, per_pod: Mapping[str, int],
                       placement: Placement) -> PodSetPlacement:
    """An admitted pod set's placement (read back with `tas_assignment.from_v1beta2`), for `Engine.restore`."""
    return PodSetPlacement(pod_set, flavor, topology, placement, usage_of(per_pod, placement))


class _Request:
    """One pod set to place: its pods, TAS flavor and that flavor's tree."""

    __slots__ = ("count", "flavor", "ps", "tree")

    def __init__(self, ps: PodSetShape, count: int, flavor: m.ResourceFlavor, tree: DomainTree) -> None:
        self.ps, self.count, self.flavor, self.tree = ps, count, flavor, tree


def _requests(tas: TasCluster, shape: Shape, chosen: tuple[tuple[str, FrozenMap[str, str]], ...],
              flavors: Mapping[str, m.ResourceFlavor], *, only_tas: bool,
              counts: Mapping[str, int] | None) -> list[_Request] | Outcome:
    """The pod sets to place, in pod set order (Kueue's WorkloadsTopologyRequests), or the error of one that
    cannot be."""
    out: list[_Request] = []
    for ps, (_, per_resource) in zip(shape.pod_sets, chosen, strict=True):
        count = counts.get(ps.name, ps.count) if counts else ps.count
        if not requests_tas(ps, only_tas) or count == 0:
            continue
        tas_flavors = sorted({f for f in per_resource.values() if tas.is_tas_flavor(flavors.get(f))})
        if not tas_flavors:
            return Outcome((), ps.name, error="no TAS flavor assigned")
        if len(tas_flavors) > 1:
            return Outcome((), ps.name, error=f"more than one TAS flavor assigned: {', '.join(tas_flavors)}")
        rf = flavors[tas_flavors[0]]
        tree = tas.tree(rf)
        if tree is None:
            return Outcome((), ps.name, error="workload requires Topology, but there is no TAS cache information")
        out.append(_Request(ps, count, rf, tree))
    return out


def _groups(requests: list[_Request]) -> list[list[_Request]]:
    """Pod sets placed together: those of one flavor sharing a group name (``podset-group-name``), in order of
    first appearance; every other pod set alone."""
    keyed: dict[tuple[str, str], list[_Request]] = {}
    for i, r in enumerate(requests):
        group = r.ps.topology.group if r.ps.topology is not None else None
        keyed.setdefault((r.flavor.meta.name, group if group is not None else f"#{i}"), []).append(r)
    return list(keyed.values())


def place_workload(tas: TasCluster, shape: Shape, chosen: tuple[tuple[str, FrozenMap[str, str]], ...],
                   flavors: Mapping[str, m.ResourceFlavor], *, only_tas: bool, simulate_empty: bool,
                   counts: Mapping[str, int] | None = None) -> Outcome:
    """Place every pod set that requests TAS in the TAS flavor its resources were assigned (``chosen``, per pod
    set); pod sets placed earlier in the same topology count against later ones. A group of two pod sets is
    placed together: the one with fewer pods (one) is the leader, placed in the workers' domains. ``counts``:
    pods per pod set when not the shape's (a partial admission placed again)."""
    found = _requests(tas, shape, chosen, flavors, only_tas=only_tas, counts=counts)
    if isinstance(found, Outcome):
        return found
    placements: list[PodSetPlacement] = []
    assumed: dict[str, dict[str, dict[str, int]]] = {}  # topology -> leaf -> amounts
    for group in _groups(found):
        # Kueue's findLeaderAndWorkers: of a pair, the first is the workers unless it has more pods than the other.
        workers, leader = group[0], group[1] if len(group) == 2 else None
        if leader is not None and leader.count > workers.count:
            workers, leader = leader, workers
        if leader is not None and leader.count != 1:
            leader = None
        members = [workers] if leader is not None else group
        for r in members:
            ps, rf, tree = r.ps, r.flavor, r.tree
            implied = ps.topology is None or not ps.topology.explicit()
            mine = assumed.setdefault(tree.topology_name, {})
            result = place(tree, None if implied else ps.topology, implied=implied, count=r.count,
                           per_pod=ps.per_pod,
                           pod=PodConstraints(ps.node_selector, ps.required_affinity,
                                              (*ps.tolerations, *rf.tolerations)),
                           used={} if simulate_empty else tas.leaf_usage(tree.topology_name), assumed=mine,
                           leader=leader.ps.per_pod if leader is not None else None)
            if result.placement is None:
                return Outcome(tuple(placements), group[0].ps.name, result.reason)
            placed = [(ps, result.placement)]
            if leader is not None and result.leader is not None:
                placed.append((leader.ps, result.leader))
            for member, placement in placed:
                usage = usage_of(member.per_pod, placement)
                for leaf, amounts in usage.items():
                    held = mine.setdefault(leaf, {})
                    for res, val in amounts.items():
                        held[res] = held.get(res, 0) + val
                placements.append(PodSetPlacement(member.name, rf.meta.name, tree.topology_name, placement, usage))
    order = {ps.name: i for i, ps in enumerate(shape.pod_sets)}
    return Outcome(tuple(sorted(placements, key=lambda p: order[p.pod_set])))


def still_fits(tas: TasCluster, placements: tuple[PodSetPlacement, ...],
               flavors: Mapping[str, m.ResourceFlavor]) -> bool:
    """Whether placements found earlier fit the current usage (Kueue's Fits, before admitting)."""
    extra: dict[tuple[str, str], dict[str, int]] = {}
    for p in placements:
        rf = flavors.get(p.flavor)
        tree = tas.tree(rf) if rf is not None else None
        if tree is None:
            return False
        used = tas.leaf_usage(p.topology)
        for leaf, amounts in p.usage.items():
            node = tree.leaves.get(leaf)
            if node is None:
                return False
            held = extra.setdefault((p.topology, leaf), {})
            for res, val in amounts.items():
                held[res] = held.get(res, 0) + val
                if node.capacity.get(res, 0) - used.get(leaf, {}).get(res, 0) < held[res]:
                    return False
    return True
