"""Where a pod set's pods go in a flavor's topology: Kueue v0.19.2's placement (tas_flavor_snapshot.go), default
profile (TASProfileMixed: BestFit for required and preferred requests, LeastFreeCapacity for unconstrained ones).

1. Every leaf gets how many pods fit on it: its capacity less the usage of admitted placements (none when
   simulating an empty cluster) and of the pod sets of the same workload already placed, divided by one pod's
   requests plus one ``pods``. With the hostname as lowest level a node whose taints the pod set does not
   tolerate, or whose labels miss its node selector or required affinity, fits none. Counts add up the tree;
   at the slice level a domain's slice count is its pods divided by the slice size (slices add up above it).
2. The level: at the requested one, the domains sorted (BestFit: most slices first; LeastFreeCapacity: fewest),
   then fewer pods, then by label values. BestFit takes the domain with the fewest slices that still holds all
   of them; LeastFreeCapacity the first that does. A required request fails there; a preferred one tries the
   level above, and at the top spreads over as few domains as it takes; an unconstrained one spreads at its
   own level.
3. Down the tree, level by level, each level's chosen domains hand their pods to their children in the same
   order, the last child chosen by best fit.

A pod set group's one-pod leader is placed with its workers: domains that can hold the leader beside workers
come first, and the leader goes where the workers go (`tas_counts`).
"""

from __future__ import annotations

from collections.abc import Mapping

from gitopsq.admission.tas_counts import EMPTY, Counts, count_in
from gitopsq.admission.tas_domains import ONE_POD, PODS, Domain, DomainTree
from gitopsq.admission.tas_filter import NodeStats, PodConstraints, go_quote, node_excluded
from gitopsq.admission.tas_requests import TopologyRequest


class Placement:
    """A pod set's placement: the levels it names (from the hostname when the lowest level is the hostname,
    else all) and (values, pods) per domain in label order. ``leaves`` maps each leaf id to its pod count."""

    __slots__ = ("domains", "leaves", "levels")

    def __init__(self, levels: tuple[str, ...], domains: tuple[tuple[tuple[str, ...], int], ...],
                 leaves: tuple[tuple[str, int], ...]) -> None:
        self.levels = levels
        self.domains = domains
        self.leaves = leaves

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Placement) and (self.levels, self.domains) == (other.levels, other.domains)

    def __hash__(self) -> int:
        return hash((self.levels, self.domains))

    def __repr__(self) -> str:
        return f"Placement({self.levels}, {self.domains})"


class PodSetPlacement:
    """Where one pod set's pods go: its TAS flavor, the placement, and the usage it adds per leaf."""

    __slots__ = ("flavor", "placement", "pod_set", "topology", "usage")

    def __init__(self, pod_set: str, flavor: str, topology: str, placement: Placement,
                 usage: Mapping[str, Mapping[str, int]]) -> None:
        self.pod_set = pod_set
        self.flavor = flavor
        self.topology = topology
        self.placement = placement
        self.usage = usage

    def __eq__(self, other: object) -> bool:
        return isinstance(other, PodSetPlacement) and (self.pod_set, self.flavor, self.placement) == (
            other.pod_set, other.flavor, other.placement)

    def __hash__(self) -> int:
        return hash((self.pod_set, self.flavor, self.placement))

    def __repr__(self) -> str:
        return f"PodSetPlacement({self.pod_set}, {self.flavor}, {self.placement})"


class PlacementResult:
    """A placement, or why none (``reason``); ``leader``: where a pod set group's leader goes."""

    __slots__ = ("leader", "placement", "reason")

    def __init__(self, placement: Placement | None, reason: str, leader: Placement | None = None) -> None:
        self.placement = placement
        self.reason = reason
        self.leader = leader


def _not_fit(topology: str, fit: int, total: int, slice_size: int, stats: NodeStats) -> str:
    unit = "pod" if slice_size == 1 else "slice"
    head = (f"topology {go_quote(topology)} doesn't allow to fit any of {total} {unit}(s)" if fit == 0 else
            f"topology {go_quote(topology)} allows to fit only {fit} out of {total} {unit}(s)")
    return head + stats.text()


def _fit_level(run: Counts, level: int, count: int, slice_size: int, leaders: int, *, required: bool,
               unconstrained: bool, stats: NodeStats) -> tuple[int, list[Domain], str]:
    """The level and the domains that hold every slice (Kueue's findLevelWithFitDomains), or why none."""
    tree = run.tree
    domains = list(tree.per_level[level].values())
    if not domains:
        return 0, [], f"no topology domains at level: {tree.levels[level]}"
    ordered = run.sorted_with_leader(domains)
    top = ordered[0]
    wanted = count // slice_size
    slices, beside, held = run.slices, run.slices_wl, run.leaders
    if run.best_fit and beside[top.idx] >= wanted and held[top.idx] >= leaders:
        top = run.best_fit_domain(ordered, wanted, leaders, by_slices=True)
    if not run.best_fit:
        for d in ordered:
            if leaders > 0 and held[d.idx] < leaders:
                continue
            if (beside[d.idx] if leaders > 0 else slices[d.idx]) >= wanted:
                return level, [d], ""
        if required:
            # Kueue reports the last domain's pods here (the most free one under LeastFreeCapacity).
            return 0, [], _not_fit(tree.topology_name, run.pods[ordered[-1].idx], wanted, slice_size, stats)
    if beside[top.idx] >= wanted and held[top.idx] >= leaders:
        return level, [top], ""
    if required:
        return 0, [], _not_fit(tree.topology_name, slices[top.idx], wanted, slice_size, stats)
    if level > 0 and not unconstrained:
        return _fit_level(run, level - 1, count, slice_size, leaders, required=required,
                          unconstrained=unconstrained, stats=stats)
    chosen: list[Domain] = []
    remaining, left = wanted, leaders
    ordered = run.leader_first(ordered, count, leaders, slice_size, by_slices=True)
    i = 0
    while left > 0 and i < len(ordered) and held[ordered[i].idx] > 0:
        d = ordered[i]
        if run.best_fit and beside[d.idx] >= remaining:
            d = run.best_fit_domain(ordered[i:], remaining, left, by_slices=True)
        chosen.append(d)
        left -= held[d.idx]
        remaining -= beside[d.idx]
        i += 1
    if left > 0:
        return 0, [], _not_fit(tree.topology_name, leaders - left, wanted, slice_size, stats)
    rest = run.sorted(ordered[i:])
    for k, candidate in enumerate(rest):
        if remaining <= 0:
            break
        d = candidate
        if run.best_fit and slices[d.idx] >= remaining:
            d = run.best_fit_domain(rest[k:], remaining, 0, by_slices=True)
        chosen.append(d)
        remaining -= slices[d.idx]
    if remaining > 0:
        return 0, [], _not_fit(tree.topology_name, wanted - remaining, wanted, slice_size, stats)
    return level, chosen, ""


def level_of(tree: DomainTree, request: TopologyRequest | None) -> str | None:
    """The level a request names (Kueue's levelKey); None when it names none."""
    if request is None:
        return None
    if request.required is not None:
        return request.required
    if request.preferred is not None:
        return request.preferred
    if request.slice_only():
        return tree.levels[0]
    if request.unconstrained:
        return tree.levels[-1]
    return None


def has_levels(tree: DomainTree, request: TopologyRequest | None) -> bool:
    """Whether the tree has every level the request names (Kueue's HasLevel)."""
    key = level_of(tree, request)
    if key is None or tree.level_index(key) < 0:
        return False
    slice_key = request.slice_topology if request is not None and request.slice_topology else tree.levels[-1]
    return tree.level_index(slice_key) >= 0


def place(tree: DomainTree, request: TopologyRequest | None, *, implied: bool, count: int,
          per_pod: Mapping[str, int], pod: PodConstraints, used: Mapping[str, Mapping[str, int]],
          assumed: Mapping[str, Mapping[str, int]], leader: Mapping[str, int] | None = None) -> PlacementResult:
    """Place ``count`` pods requesting ``per_pod`` each. ``used``: admitted placements' usage per leaf (empty to
    simulate a cluster without TAS workloads); ``assumed``: this workload's pod sets placed before; ``leader``:
    the per-pod requests of a pod set group's one-pod leader, placed with these workers."""
    slice_size = 1
    if request is not None and request.slice_topology is not None:
        slice_size = request.slice_size or 0
        if slice_size <= 0:
            return PlacementResult(None, "slice topology requested, but slice size not provided")
    required = request is not None and request.required is not None
    unconstrained = implied or (request is not None and (request.unconstrained is True or request.slice_only()))
    key = level_of(tree, request)
    if key is None:
        if not implied:
            return PlacementResult(None, "topology level not specified")
        key = tree.levels[-1]
    level = tree.level_index(key)
    if level < 0:
        return PlacementResult(None, f"no requested topology level: {key}")
    slice_key = request.slice_topology if request is not None and request.slice_topology else tree.levels[-1]
    slice_level = tree.level_index(slice_key)
    if slice_level < 0:
        return PlacementResult(None, f"no requested topology level for slices: {slice_key}")
    if level > slice_level:
        return PlacementResult(None, f"podset slice topology {slice_key} is above the podset topology {key}")

    run = Counts(tree, best_fit=not unconstrained)
    stats = NodeStats()
    leaders = 1 if leader is not None else 0
    _fill_leaves(run, _with_pod(per_pod), pod, used=used, assumed=assumed, stats=stats,
                 leader=_with_pod(leader) if leader is not None else None)
    for root in tree.roots:
        run.fill(root, 0, slice_level, slice_size, leader is not None)

    fit_level, chosen, reason = _fit_level(run, level, count, slice_size, leaders, required=required,
                                           unconstrained=unconstrained, stats=stats)
    if reason:
        return PlacementResult(None, reason)
    chosen = run.to_minimum(chosen, count, leaders, slice_size, by_slices=True)
    current = fit_level
    last = len(tree.levels) - 1
    while current < min(last, slice_level):
        lower = run.sorted([c for d in chosen for c in d.children])
        chosen = run.to_minimum(lower, count, leaders, slice_size, by_slices=True)
        current += 1
    while current < last:
        below: list[Domain] = []
        for d in chosen:
            below.extend(run.to_minimum(run.sorted(d.children), run.pods[d.idx], run.leaders[d.idx], 1,
                                        by_slices=False))
        chosen = below
        current += 1
    if leader is None:
        return PlacementResult(_placement(run, chosen, run.pods), "")
    return PlacementResult(_placement(run, chosen, run.pods), "", _placement(run, chosen, run.leaders))


def _with_pod(per_pod: Mapping[str, int]) -> list[tuple[str, int]]:
    """One pod's requests plus one ``pods``, sorted by resource."""
    requests = dict(per_pod)
    requests[PODS] = requests.get(PODS, 0) + ONE_POD
    return sorted(requests.items())


def _fill_leaves(run: Counts, requests: list[tuple[str, int]], pod: PodConstraints, *,
                 used: Mapping[str, Mapping[str, int]], assumed: Mapping[str, Mapping[str, int]], stats: NodeStats,
                 leader: list[tuple[str, int]] | None) -> None:
    """Pods (and a leader) per leaf, from its capacity less admitted placements and this workload's earlier pod
    sets (Kueue's fillLeafCounts)."""
    for key, leaf in run.tree.leaves.items():
        stats.total += 1
        if leaf.node is not None and node_excluded(leaf.node, pod, stats):
            continue
        taken, mine = used.get(key, EMPTY), assumed.get(key, EMPTY)
        pods, limiting = count_in(requests, leaf.capacity, taken, mine)
        i = leaf.idx
        run.pods[i] = run.pods_wl[i] = pods
        if pods == 0 and limiting:
            stats.resources[limiting] = stats.resources.get(limiting, 0) + 1
        if leader is not None and count_in(leader, leaf.capacity, taken, mine)[0] > 0:
            run.leaders[i] = 1
            with_leader = dict(mine)
            for res, val in leader:
                with_leader[res] = with_leader.get(res, 0) + val
            run.pods_wl[i] = count_in(requests, leaf.capacity, taken, with_leader)[0]


def _placement(run: Counts, chosen: list[Domain], counts: list[int]) -> Placement:
    tree = run.tree
    start = len(tree.levels) - 1 if tree.hostname_lowest else 0
    domains: list[tuple[tuple[str, ...], int]] = []
    leaves: list[tuple[str, int]] = []
    for d in sorted(chosen, key=lambda x: x.values):
        pods = counts[d.idx]
        if pods == 0:
            continue
        domains.append((d.values[start:], pods))
        leaves.append((d.id, pods))
    return Placement(tree.levels[start:], tuple(domains), tuple(leaves))
