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
"""

from __future__ import annotations

from collections.abc import Mapping

from gitopsq.admission.tas_domains import ONE_POD, PODS, Domain, DomainTree
from gitopsq.admission.tas_filter import NodeStats, PodConstraints, go_quote, node_excluded
from gitopsq.admission.tas_requests import TopologyRequest

_MAX = 2 ** 31 - 1


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


_EMPTY: dict[str, int] = {}


def count_in(requests: list[tuple[str, int]], capacity: Mapping[str, int],
             taken: Mapping[str, int] = _EMPTY, mine: Mapping[str, int] = _EMPTY) -> tuple[int, str]:
    """How many times ``requests`` (sorted by resource) fit in ``capacity`` less ``taken`` and ``mine``, and the
    resource that limits it (ties: the first name)."""
    best, limiting = _MAX, ""
    for res, need in requests:
        if need == 0:
            count = _MAX
        else:
            free = capacity.get(res, 0) - taken.get(res, 0) - mine.get(res, 0)
            count = max(0, min(free // need, _MAX))
        if limiting == "" or count < best:
            best, limiting = count, res
    return best, limiting


class _Run:
    """One placement's counts per domain (indexed by `Domain.idx`)."""

    __slots__ = ("best_fit", "pods", "slices", "tree")

    def __init__(self, tree: DomainTree, best_fit: bool) -> None:
        self.tree = tree
        self.best_fit = best_fit
        self.pods = [0] * len(tree.domains)
        self.slices = [0] * len(tree.domains)

    def fill(self, d: Domain, level: int, slice_level: int, slice_size: int) -> None:
        if d.children:
            pods = slices = 0
            for child in d.children:
                self.fill(child, level + 1, slice_level, slice_size)
                pods += self.pods[child.idx]
                slices += self.slices[child.idx]
            self.pods[d.idx] = pods
            self.slices[d.idx] = pods // slice_size if level == slice_level else slices
        elif level == slice_level:
            self.slices[d.idx] = self.pods[d.idx] // slice_size

    def sorted(self, domains: list[Domain]) -> list[Domain]:
        pods, slices = self.pods, self.slices
        if self.best_fit:
            return sorted(domains, key=lambda d: (-slices[d.idx], pods[d.idx], d.values))
        return sorted(domains, key=lambda d: (slices[d.idx], pods[d.idx], d.values))

    def best_fit_domain(self, domains: list[Domain], needed: int, by_slices: bool) -> Domain:
        """The first domain with the fewest pods (slices) that still holds ``needed``; else the first."""
        counts = self.slices if by_slices else self.pods
        best: Domain | None = None
        best_count = _MAX
        for d in domains:
            c = counts[d.idx]
            if needed <= c < best_count:
                best, best_count = d, c
        return best if best is not None else domains[0]

    def to_minimum(self, domains: list[Domain], count: int, slice_size: int, by_slices: bool) -> list[Domain]:
        """Hand ``count`` pods to ``domains`` in order, the last one by best fit (Kueue's
        updateCountsToMinimum); each chosen domain's count becomes what it got."""
        remaining = count // slice_size if by_slices else count
        counts = self.slices if by_slices else self.pods
        out: list[Domain] = []
        for i, candidate in enumerate(domains):
            d = candidate
            if self.best_fit and counts[d.idx] >= remaining:
                d = self.best_fit_domain(domains[i:], remaining, by_slices)
            have = counts[d.idx]
            out.append(d)
            if have >= remaining:
                counts[d.idx] = remaining
                if by_slices:
                    self.pods[d.idx] = remaining * slice_size
                return out
            if by_slices:
                self.pods[d.idx] = have * slice_size
            remaining -= have
        raise AssertionError("placement handed out fewer pods than the level said fit")


class PlacementResult:
    __slots__ = ("placement", "reason")

    def __init__(self, placement: Placement | None, reason: str) -> None:
        self.placement = placement
        self.reason = reason


def _not_fit(topology: str, fit: int, total: int, slice_size: int, stats: NodeStats) -> str:
    unit = "pod" if slice_size == 1 else "slice"
    head = (f"topology {go_quote(topology)} doesn't allow to fit any of {total} {unit}(s)" if fit == 0 else
            f"topology {go_quote(topology)} allows to fit only {fit} out of {total} {unit}(s)")
    return head + stats.text()


def _fit_level(run: _Run, level: int, count: int, slice_size: int, *, required: bool, unconstrained: bool,
               stats: NodeStats) -> tuple[int, list[Domain], str]:
    tree = run.tree
    domains = list(tree.per_level[level].values())
    if not domains:
        return 0, [], f"no topology domains at level: {tree.levels[level]}"
    ordered = run.sorted(domains)
    top = ordered[0]
    wanted = count // slice_size
    slices = run.slices
    if run.best_fit and slices[top.idx] >= wanted:
        top = run.best_fit_domain(ordered, wanted, True)
    if not run.best_fit:
        for d in ordered:
            if slices[d.idx] >= wanted:
                return level, [d], ""
        if required:
            # Kueue reports the last domain's pods here (the most free one under LeastFreeCapacity).
            return 0, [], _not_fit(tree.topology_name, run.pods[ordered[-1].idx], wanted, slice_size, stats)
    if slices[top.idx] >= wanted:
        return level, [top], ""
    if required:
        return 0, [], _not_fit(tree.topology_name, slices[top.idx], wanted, slice_size, stats)
    if level > 0 and not unconstrained:
        return _fit_level(run, level - 1, count, slice_size, required=required, unconstrained=unconstrained,
                          stats=stats)
    chosen: list[Domain] = []
    remaining = wanted
    for i, candidate in enumerate(ordered):
        if remaining <= 0:
            break
        d = candidate
        if run.best_fit and slices[d.idx] >= remaining:
            d = run.best_fit_domain(ordered[i:], remaining, True)
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
          assumed: Mapping[str, Mapping[str, int]]) -> PlacementResult:
    """Place ``count`` pods requesting ``per_pod`` each. ``used``: admitted placements' usage per leaf (empty to
    simulate a cluster without TAS workloads); ``assumed``: this workload's pod sets placed before."""
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

    requests = dict(per_pod)
    requests[PODS] = requests.get(PODS, 0) + ONE_POD
    run = _Run(tree, best_fit=not unconstrained)
    stats = NodeStats()
    _fill_leaves(run, tree, sorted(requests.items()), pod, used=used, assumed=assumed, stats=stats)
    for root in tree.roots:
        run.fill(root, 0, slice_level, slice_size)

    fit_level, chosen, reason = _fit_level(run, level, count, slice_size, required=required,
                                           unconstrained=unconstrained, stats=stats)
    if reason:
        return PlacementResult(None, reason)
    chosen = run.to_minimum(chosen, count, slice_size, True)
    current = fit_level
    last = len(tree.levels) - 1
    while current < min(last, slice_level):
        lower = run.sorted([c for d in chosen for c in d.children])
        chosen = run.to_minimum(lower, count, slice_size, True)
        current += 1
    while current < last:
        below: list[Domain] = []
        for d in chosen:
            below.extend(run.to_minimum(run.sorted(d.children), run.pods[d.idx], 1, False))
        chosen = below
        current += 1
    return PlacementResult(_placement(run, chosen), "")


def _fill_leaves(run: _Run, tree: DomainTree, requests: list[tuple[str, int]], pod: PodConstraints, *,
                 used: Mapping[str, Mapping[str, int]], assumed: Mapping[str, Mapping[str, int]],
                 stats: NodeStats) -> None:
    for key, leaf in tree.leaves.items():
        stats.total += 1
        if leaf.node is not None and node_excluded(leaf.node, pod, stats):
            continue
        pods, limiting = count_in(requests, leaf.capacity, used.get(key, _EMPTY), assumed.get(key, _EMPTY))
        run.pods[leaf.idx] = pods
        if pods == 0 and limiting:
            stats.resources[limiting] = stats.resources.get(limiting, 0) + 1


def _placement(run: _Run, chosen: list[Domain]) -> Placement:
    tree = run.tree
    start = len(tree.levels) - 1 if tree.hostname_lowest else 0
    domains: list[tuple[tuple[str, ...], int]] = []
    leaves: list[tuple[str, int]] = []
    for d in sorted(chosen, key=lambda x: x.values):
        pods = run.pods[d.idx]
        if pods == 0:
            continue
        domains.append((d.values[start:], pods))
        leaves.append((d.id, pods))
    return Placement(tree.levels[start:], tuple(domains), tuple(leaves))
