"""How many pods and slices each topology domain holds during one placement, and how a level hands them out
(Kueue v0.19.2's domain state and updateCountsToMinimum, tas_flavor_snapshot.go).

Per domain: ``pods`` and ``slices`` it can hold; with a leader (a pod set group's one-pod leader placed with its
workers), ``leaders`` it can hold (0 or 1) and the pods and slices left for workers once a leader is on it
(``pods_wl``, ``slices_wl``). Without a leader those equal ``pods`` and ``slices``. While a level is handed out,
each chosen domain's counts become what it got.
"""

from __future__ import annotations

from collections.abc import Mapping

from gitopsq.admission.tas_domains import Domain, DomainTree

MAX = 2 ** 31 - 1
EMPTY: dict[str, int] = {}


def count_in(requests: list[tuple[str, int]], capacity: Mapping[str, int],
             taken: Mapping[str, int] = EMPTY, mine: Mapping[str, int] = EMPTY) -> tuple[int, str]:
    """How many times ``requests`` (sorted by resource) fit in ``capacity`` less ``taken`` and ``mine``, and the
    resource that limits it (ties: the first name)."""
    best, limiting = MAX, ""
    for res, need in requests:
        if need == 0:
            count = MAX
        else:
            free = capacity.get(res, 0) - taken.get(res, 0) - mine.get(res, 0)
            count = max(0, min(free // need, MAX))
        if limiting == "" or count < best:
            best, limiting = count, res
    return best, limiting


class Counts:
    """One placement's counts, indexed by `Domain.idx`; ``best_fit`` False: LeastFreeCapacity."""

    __slots__ = ("best_fit", "leaders", "pods", "pods_wl", "slices", "slices_wl", "tree")

    def __init__(self, tree: DomainTree, best_fit: bool) -> None:
        n = len(tree.domains)
        self.tree = tree
        self.best_fit = best_fit
        self.pods = [0] * n
        self.slices = [0] * n
        self.pods_wl = [0] * n
        self.slices_wl = [0] * n
        self.leaders = [0] * n

    def fill(self, d: Domain, level: int, slice_level: int, slice_size: int, leader: bool) -> None:
        """Add the leaves' counts up the tree (Kueue's fillInCountsHelper)."""
        i = d.idx
        if not d.children:
            if level == slice_level:
                self.slices[i] = self.pods[i] // slice_size
                self.slices_wl[i] = self.pods_wl[i] // slice_size
            return
        pods = slices = leaders = 0
        contributes = False
        pod_gap = slice_gap = MAX
        for child in d.children:
            self.fill(child, level + 1, slice_level, slice_size, leader)
            c = child.idx
            pods += self.pods[c]
            slices += self.slices[c]
            if not leader or self.leaders[c] > 0:
                contributes = True
                pod_gap = min(pod_gap, self.pods[c] - self.pods_wl[c])
                slice_gap = min(slice_gap, self.slices[c] - self.slices_wl[c])
            leaders = max(leaders, self.leaders[c])
        self.pods[i] = pods
        self.pods_wl[i] = pods - pod_gap if contributes else 0
        slices_wl = slices - slice_gap if contributes else 0
        self.leaders[i] = leaders
        if level == slice_level:
            slices = pods // slice_size
            slices_wl = self.pods_wl[i] // slice_size
        self.slices[i] = slices
        self.slices_wl[i] = slices_wl

    def sorted(self, domains: list[Domain]) -> list[Domain]:
        """BestFit: most slices first; LeastFreeCapacity: fewest; then fewer pods, then label values."""
        pods, slices = self.pods, self.slices
        if self.best_fit:
            return sorted(domains, key=lambda d: (-slices[d.idx], pods[d.idx], d.values))
        return sorted(domains, key=lambda d: (slices[d.idx], pods[d.idx], d.values))

    def sorted_with_leader(self, domains: list[Domain]) -> list[Domain]:
        """As `sorted`, by the counts left beside a leader, domains that hold a leader first."""
        pods, slices, leaders = self.pods_wl, self.slices_wl, self.leaders
        if self.best_fit:
            return sorted(domains, key=lambda d: (-leaders[d.idx], -slices[d.idx], pods[d.idx], d.values))
        return sorted(domains, key=lambda d: (-leaders[d.idx], slices[d.idx], pods[d.idx], d.values))

    def best_fit_domain(self, domains: list[Domain], needed: int, leaders: int, *, by_slices: bool) -> Domain:
        """The first domain with the fewest pods (slices) that still holds ``needed`` (and ``leaders``); else the
        first domain."""
        if leaders > 0:
            counts = self.slices_wl if by_slices else self.pods_wl
        else:
            counts = self.slices if by_slices else self.pods
        best: Domain | None = None
        best_count = MAX
        for d in domains:
            if self.leaders[d.idx] < leaders:
                continue
            c = counts[d.idx]
            if needed <= c < best_count:
                best, best_count = d, c
        return best if best is not None else domains[0]

    def leader_first(self, domains: list[Domain], count: int, leaders: int, slice_size: int, *,
                     by_slices: bool) -> list[Domain]:
        """Moves to the front the first domain that can hold the leader without leaving too little room for the
        workers (Kueue's prioritizeLeaderDomain)."""
        if leaders == 0 or len(domains) < 2:
            return domains
        primary = self.slices if by_slices else self.pods
        beside = self.slices_wl if by_slices else self.pods_wl
        needed = count // slice_size if by_slices else count
        room = sum(primary[d.idx] for d in domains)
        for i, d in enumerate(domains):
            if self.leaders[d.idx] < leaders or room - (primary[d.idx] - beside[d.idx]) < needed:
                continue
            return domains if i == 0 else [d, *domains[:i], *domains[i + 1:]]
        return domains

    def to_minimum(self, domains: list[Domain], count: int, leaders: int, slice_size: int, *,
                   by_slices: bool) -> list[Domain]:
        """Hand ``count`` pods (and ``leaders``) to ``domains`` in order, the last one by best fit (Kueue's
        updateCountsToMinimumGeneric)."""
        domains = self.leader_first(domains, count, leaders, slice_size, by_slices=by_slices)
        remaining = count // slice_size if by_slices else count
        size = slice_size if by_slices else 1
        primary = self.slices if by_slices else self.pods
        beside = self.slices_wl if by_slices else self.pods_wl
        out: list[Domain] = []
        for i, candidate in enumerate(domains):
            d = candidate
            if leaders > 0:
                if self.best_fit and beside[d.idx] >= remaining and self.leaders[d.idx] >= leaders:
                    d = self.best_fit_domain(domains[i:], remaining, leaders, by_slices=by_slices)
                j = d.idx
                out.append(d)
                if beside[j] >= remaining and self.leaders[j] >= leaders:
                    primary[j] = remaining
                    self.leaders[j] = leaders
                    self.pods[j] = remaining * size
                    return out
                beside[j] = min(beside[j], remaining)
                self.leaders[j] = min(self.leaders[j], leaders)
                primary[j] = beside[j]
                self.pods[j] = beside[j] * size
                leaders -= self.leaders[j]
                remaining -= beside[j]
                continue
            if self.best_fit and primary[d.idx] >= remaining:
                d = self.best_fit_domain(domains[i:], remaining, 0, by_slices=by_slices)
            j = d.idx
            self.leaders[j] = 0
            out.append(d)
            if primary[j] >= remaining:
                primary[j] = remaining
                self.pods[j] = remaining * size
                return out
            self.pods[j] = primary[j] * size
            remaining -= primary[j]
        raise AssertionError("placement handed out fewer pods than the level said fit")
