"""Flavor assignment: which ResourceFlavor each pod set uses, per resource group (shared/research/kueue.md §1.2).

For every pod set, in spec order, and every resource group it touches, one flavor is chosen for all of the
group's resources. Flavors are tried in the ClusterQueue's order:

1. structural check — the flavor exists, its NoSchedule/NoExecute taints are tolerated (pod tolerations plus
   the flavor's own), the pod's node selector and required node affinity match the flavor's node labels
   (only label keys the flavor defines are considered);
2. quota check per resource, with ``val`` = what earlier pod sets already put on this flavor-resource plus this
   pod set's request: above the potential maximum → NoFit (ExceedsMaxQuota); within what is available → Fit
   at some borrowing level; otherwise the preemption oracle says whether preemption could free it;
3. the scan stops at the first flavor whose mode does not ask for more (flavorFungibility), else the best
   flavor seen wins (`_preferred`).

Modes are ordered from worst to best, so "better" is ``>``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from enum import IntEnum

from gitopsq.admission import messages as msg
from gitopsq.admission import quota, tas_fit
from gitopsq.admission.quota import FlavorResource, QuotaNode
from gitopsq.admission.resources import ordered, requests_of
from gitopsq.admission.tas_domains import TasCluster
from gitopsq.admission.tas_placement import PodSetPlacement
from gitopsq.admission.topology import Group, QueueSpec
from gitopsq.admission.workload import PodSetShape, Shape
from gitopsq.api import model as m
from gitopsq.api.frozenmap import FrozenMap


class Mode(IntEnum):
    NO_FIT = 0
    NO_CANDIDATES = 1  # would need preemption, but nothing can be preempted
    PREEMPT = 2  # preemption in the own ClusterQueue needed
    RECLAIM = 3  # only workloads of other ClusterQueues need to go
    FIT = 4


# Simulates preemption for one flavor-resource: (mode, borrowing level once the victims are gone; not read for
# NO_CANDIDATES, where the scan keeps the level without preemption).
Oracle = Callable[[FlavorResource, int], tuple[Mode, int]]


@dataclass(frozen=True, slots=True)
class Nomination:
    """The outcome of flavor assignment for one workload in one ClusterQueue."""

    mode: Mode
    borrow: int
    flavors: tuple[tuple[str, FrozenMap[str, str]], ...]
    usage: Mapping[FlavorResource, int]
    needs_preemption: frozenset[FlavorResource]
    reason: str = ""
    message: str = ""
    # Per (pod set index, resource): the last flavor index the scan examined, -1 when it reached the last flavor.
    tried: Mapping[tuple[int, str], int] = field(default_factory=dict)
    topology: tuple[PodSetPlacement, ...] = ()  # TAS placements, when every pod set fits


@dataclass(slots=True)
class _Choice:
    flavor: str | None
    mode: Mode
    borrow: int
    needs_preemption: list[FlavorResource]
    # Kueue's representative granular mode, what flavors are compared by (isPreferred, shouldTryNextFlavor): the
    # resource that ranks worst under the queue's own preference. Under PreemptionOverBorrowing that is the one
    # borrowing most, even if another needs preemption (random 230042); ``mode`` stays the worst mode.
    rank: tuple[Mode, int] = (Mode.FIT, 0)


# (pod set, flavor name) -> (the ResourceFlavor checked, why not): keyed without the ResourceFlavor, whose
# dataclass hash is recomputed on every call; a different object under the same name is checked again.
_STRUCTURAL: dict[tuple[PodSetShape, str], tuple[m.ResourceFlavor | None, str]] = {}


def _taint_text(t: m.Taint) -> str:
    return f"{{{t.key} {t.value} {t.effect} <nil>}}"


def _requirement_matches(req: m.LabelSelectorRequirement, labels: Mapping[str, str]) -> bool:
    value = labels[req.key]
    if req.operator == "In":
        return value in req.values
    if req.operator == "NotIn":
        return value not in req.values
    if req.operator == "Exists":
        return True
    if req.operator == "DoesNotExist":
        return False
    if req.operator in ("Gt", "Lt") and req.values and value.lstrip("-").isdigit():
        bound = req.values[0]
        if bound.lstrip("-").isdigit():
            return int(value) > int(bound) if req.operator == "Gt" else int(value) < int(bound)
    return False


def structural_mismatch(ps: PodSetShape, rf: m.ResourceFlavor | None, flavor: str) -> str:
    """Why a pod set can never run on a flavor (empty string: it can)."""
    cache_key = (ps, flavor)
    cached = _STRUCTURAL.get(cache_key)
    if cached is not None and cached[0] is rf:
        return cached[1]
    result = ""
    if rf is None:
        result = f"flavor {flavor} not found"
    else:
        tolerations = (*ps.tolerations, *rf.tolerations)
        for taint in rf.node_taints:
            if taint.effect in ("NoSchedule", "NoExecute") and not any(t.tolerates(taint) for t in tolerations):
                result = f"untolerated taint {_taint_text(taint)} in flavor {flavor}"
                break
        labels = rf.node_labels
        if not result:
            selector_ok = all(labels[k] == v for k, v in ps.node_selector.items() if k in labels)
            terms_ok = not ps.required_affinity or any(
                all(_requirement_matches(req, labels) for req in term if req.key in labels)
                for term in ps.required_affinity)
            if not (selector_ok and terms_ok):
                result = f"flavor {flavor} doesn't match node affinity"
    _STRUCTURAL[cache_key] = (rf, result)
    return result


def _try_next(mode: Mode, borrow: int, ff: m.FlavorFungibility) -> bool:
    if mode <= Mode.NO_CANDIDATES:
        return True
    if mode < Mode.FIT and ff.when_can_preempt == "TryNextFlavor":
        return True
    # Borrowing asks for the next flavor whatever the mode: a flavor that needs preemption and would still
    # borrow afterwards does not stop the scan under whenCanBorrow=TryNextFlavor.
    return borrow > 0 and ff.when_can_borrow == "TryNextFlavor"


def _preferred(a: tuple[Mode, int], b: tuple[Mode, int] | None, ff: m.FlavorFungibility) -> bool:
    """Whether choice ``a`` beats the best so far ``b`` (ties keep the earlier flavor). Kueue v0.19's isPreferred:
    no fit is worst, then no preemption candidates; then ``PreemptionOverBorrowing`` compares borrowing first and
    anything else (``BorrowingOverPreemption``, the default when unset) the preemption mode first."""
    if b is None:
        return True
    (a_mode, a_borrow), (b_mode, b_borrow) = a, b
    if Mode.NO_FIT in (a_mode, b_mode):
        return a_mode > b_mode
    if (a_mode == Mode.NO_CANDIDATES) != (b_mode == Mode.NO_CANDIDATES):
        return b_mode == Mode.NO_CANDIDATES  # a flavor that cannot be admitted now ranks below any that can
    if ff.preference == "PreemptionOverBorrowing":
        if a_borrow != b_borrow:
            return a_borrow < b_borrow
        return a_mode > b_mode
    if a_mode != b_mode:
        return a_mode > b_mode
    return a_borrow < b_borrow


class _PodSetScan:
    """Assigns one pod set; collects the reasons of every flavor it had to pass over."""

    __slots__ = ("assigned", "attempted", "flavors", "last_least", "node", "only_tas", "oracle",
                 "preempt_while_borrowing", "reasons", "severity", "spec", "tas")

    def __init__(self, spec: QueueSpec, node: QuotaNode, flavors: Mapping[str, m.ResourceFlavor], oracle: Oracle,
                 *, preempt_while_borrowing: bool, assigned: dict[FlavorResource, int],
                 tas: TasCluster | None = None, only_tas: bool = False) -> None:
        self.spec, self.node, self.flavors, self.oracle = spec, node, flavors, oracle
        self.preempt_while_borrowing = preempt_while_borrowing
        self.assigned = assigned
        self.reasons: list[str] = []
        self.severity = 0
        self.attempted = -1
        self.tas = tas
        self.only_tas = only_tas
        self.last_least = 99  # the last group's least severe failure (99: none)

    def _resource(self, flavor: str, res: str, request: int) -> tuple[Mode, int, int]:
        """(mode, borrowing level, failure severity) of one resource in one flavor."""
        fr = (flavor, res)
        previous = self.assigned.get(fr, 0)
        val = previous + request
        maximum = quota.potential_available(self.node, fr)
        if val > maximum:
            self.reasons.append(msg.exceeds_max(res, flavor, previous, request, maximum))
            return Mode.NO_FIT, 0, msg.SEVERITY[msg.EXCEEDS_MAX_QUOTA]
        borrow, may_reclaim = quota.borrowing_level(self.node, fr, val)
        free = max(0, quota.available(self.node, fr))
        if val <= free:
            return Mode.FIT, borrow, 0
        self.reasons.append(msg.insufficient_unused(res, flavor, val - free))
        lim = self.spec.limits.get(fr)
        if val <= (lim.nominal if lim else 0) or may_reclaim or self.preempt_while_borrowing:
            mode, after = self.oracle(fr, val)
            return mode, (after if mode > Mode.NO_CANDIDATES else borrow), msg.SEVERITY[msg.WAITING_FOR_QUOTA]
        return Mode.NO_FIT, borrow, msg.SEVERITY[msg.WAITING_FOR_QUOTA]

    def group(self, ps: PodSetShape, group: Group, requests: Mapping[str, int], requested: Iterable[str],
              start: int = 0) -> _Choice:
        """Scan the group's flavors from ``start`` (Kueue resumes where the previous attempt stopped); ``requested``:
        the group's resources the pod set requests, in Kueue's order."""
        best: _Choice | None = None
        least_severe = 99
        ff = self.spec.fungibility
        self.attempted = start - 1
        for flavor in group.flavors[start:]:
            self.attempted += 1
            rf = self.flavors.get(flavor)
            mismatch = ""
            if self.tas is not None and rf is not None:
                # Kueue checks the topology request before taints and affinity.
                mismatch = tas_fit.flavor_mismatch(self.tas, ps, flavor, rf, only_tas=self.only_tas,
                                                       covered=group.resources)
            mismatch = mismatch or structural_mismatch(ps, rf, flavor)
            if mismatch:
                self.reasons.append(mismatch)
                least_severe = min(least_severe, msg.SEVERITY[msg.NO_MATCHING_FLAVOR])
                continue
            choice = _Choice(flavor, Mode.FIT, 0, [])
            severity = 0
            for res in requested:
                mode, borrow, sev = self._resource(flavor, res, requests[res])
                severity = max(severity, sev)
                if Mode.NO_FIT < mode < Mode.FIT:
                    choice.needs_preemption.append((flavor, res))
                # The flavor is represented by its worst resource, worst mode first, then higher borrowing (Kueue
                # keeps one granular mode per flavor): a resource that only borrows does not add borrowing to
                # another that needs preemption.
                if (mode, -borrow) < (choice.mode, -choice.borrow):
                    choice.mode, choice.borrow = mode, borrow
                if _preferred(choice.rank, (mode, borrow), ff):
                    choice.rank = (mode, borrow)
            if choice.mode == Mode.NO_FIT:
                least_severe = min(least_severe, severity)  # Kueue ranks only the flavors that did not fit
            if not _try_next(*choice.rank, ff):
                best = choice  # Kueue: the flavor that stops the search is taken, whatever came before
                break
            if _preferred(choice.rank, best.rank if best else None, ff):
                best = choice
        if best is None:
            best = _Choice(None, Mode.NO_FIT, 0, [], (Mode.NO_FIT, 0))
        self.last_least = least_severe
        if least_severe < 99:
            # Per group, the least severe of the flavors that did not fit (alternatives); per pod set, the most
            # severe group (Kueue's resolveNoFitReason, which counts only pod sets that got no flavors).
            self.severity = max(self.severity, least_severe)
        return best


def _severity_reason(severity: int) -> str:
    for reason, value in msg.SEVERITY.items():
        if value == severity:
            return reason
    return msg.WAITING_FOR_QUOTA


def assign_flavors(spec: QueueSpec, node: QuotaNode, shape: Shape, flavors: Mapping[str, m.ResourceFlavor],
                   oracle: Oracle, *, preempt_while_borrowing: bool,
                   resume: Mapping[tuple[int, str], int] | None = None, tas: TasCluster | None = None) -> Nomination:
    """Choose flavors for every pod set of ``shape`` in the ClusterQueue ``spec`` (see the module docstring).

    ``resume`` is the previous attempt's `Nomination.tried`: each group's scan starts after the flavor where
    that attempt stopped (Kueue's ``LastAssignment``), unless the caller found it outdated. ``tas``: the nodes
    and topologies; with them, TAS flavors need a placement as well as quota (`tas_fit`).
    """
    only_tas = tas is not None and tas_fit.tas_only(spec, flavors, tas)
    group_severity: list[dict[int, int]] = []  # per pod set: group index -> least severe failure (with tas)
    tried: dict[tuple[int, str], int] = {}
    assigned: dict[FlavorResource, int] = {}
    covers_pods = "pods" in spec.group_of
    mode, borrow, severity = Mode.FIT, 0, 0
    needs: list[FlavorResource] = []
    out_flavors: list[tuple[str, FrozenMap[str, str]]] = []
    failures: list[str] = []
    for ps_index, ps in enumerate(shape.pod_sets):
        requests, names = requests_of(ps, covers_pods)
        scan = _PodSetScan(spec, node, flavors, oracle, preempt_while_borrowing=preempt_while_borrowing,
                           assigned=assigned, tas=tas, only_tas=only_tas)
        severities: dict[int, int] = {}
        group_severity.append(severities)
        ps_mode = Mode.FIT
        per_resource: dict[str, str] = {}
        ps_tried: dict[tuple[int, str], int] = {}
        done: set[str] = set()
        # Kueue walks the pod set's resources in its order; the first resource of a group assigns the whole
        # group, and the first resource or group that cannot be assigned ends the pod set with its reasons alone.
        for res in ordered(names):
            gi = spec.group_of.get(res)
            if gi is None:
                if requests[res] == 0:
                    continue
                scan.reasons = [f"resource {res} unavailable in ClusterQueue"]
                scan.severity = max(scan.severity, msg.SEVERITY[msg.NO_MATCHING_FLAVOR])
                ps_mode = Mode.NO_FIT
                break
            if res in done:
                continue
            group = spec.groups[gi]
            requested = ordered(names, group.resources)
            done.update(requested)
            start = (resume.get((ps_index, res), -1) if resume else -1) + 1
            before = len(scan.reasons)
            choice = scan.group(ps, group, requests, requested, start if start < len(group.flavors) else 0)
            if tas is not None and scan.last_least < 99:
                severities[gi] = scan.last_least
            last = -1 if scan.attempted >= len(group.flavors) - 1 else scan.attempted
            for r in requested:
                ps_tried[(ps_index, r)] = last
            ps_mode = min(ps_mode, choice.mode)
            if choice.mode == Mode.NO_FIT:
                scan.reasons = scan.reasons[before:]
                break
            if choice.mode == Mode.FIT:
                # Kueue returns no status for a group that fits (borrowing or not): the flavors it passed over on
                # the way are not named in the pod set's message.
                del scan.reasons[before:]
            borrow = max(borrow, choice.borrow)
            needs.extend(choice.needs_preemption)
            if choice.flavor is not None:
                for r in requested:
                    per_resource[r] = choice.flavor
                    fr = (choice.flavor, r)
                    assigned[fr] = assigned.get(fr, 0) + requests[r]
        if ps_mode != Mode.NO_FIT:
            # Kueue keeps scan progress only for pod sets it could assign: a failing group empties the pod set's
            # flavors, and with them where each of its scans stopped.
            tried.update(ps_tried)
        mode = min(mode, ps_mode)
        if ps_mode == Mode.NO_FIT:
            severity = max(severity, scan.severity)
        out_flavors.append((ps.name, FrozenMap(per_resource)))
        if ps_mode < Mode.FIT and scan.reasons:
            failures.append(msg.pod_set_failure(ps.name, scan.reasons))
        if ps_mode == Mode.NO_FIT:
            break  # Kueue stops at the first pod set that cannot be assigned
    if mode == Mode.FIT:
        n = Nomination(mode, borrow, tuple(out_flavors), assigned, frozenset(), tried=tried)
    else:
        reason = _severity_reason(severity) if mode == Mode.NO_FIT else msg.WAITING_FOR_QUOTA
        n = Nomination(mode, borrow, tuple(out_flavors), assigned, frozenset(needs), reason, "; ".join(failures),
                       tried)
    if tas is None or mode == Mode.NO_FIT:
        return n
    return _placed(tas, spec, shape, flavors, n, only_tas=only_tas, group_severity=group_severity)


def _placed(tas: TasCluster, spec: QueueSpec, shape: Shape, flavors: Mapping[str, m.ResourceFlavor],
            n: Nomination, *, only_tas: bool, group_severity: list[dict[int, int]]) -> Nomination:
    """The nomination once its TAS pod sets are placed (Kueue: with the current usage when quota fits, then on
    a cluster without TAS workloads to see whether preemption could help)."""
    mode, message = n.mode, n.message
    if mode == Mode.FIT:
        found = tas_fit.place_workload(tas, shape, n.flavors, flavors, only_tas=only_tas, simulate_empty=False)
        if found.error:
            return _error(n, found)
        if not found.failed:
            return Nomination(mode, n.borrow, n.flavors, n.usage, n.needs_preemption, n.reason, n.message, n.tried,
                              found.placements)
        # Fragmented: quota fits, the topology does not. Kueue would look for TAS victims; gitopsq waits.
        mode, message = Mode.NO_CANDIDATES, msg.pod_set_failure(found.failed, [found.reason])
    empty = tas_fit.place_workload(tas, shape, n.flavors, flavors, only_tas=only_tas, simulate_empty=True)
    if empty.error:
        return _error(n, empty)
    if not empty.failed:
        return Nomination(mode, n.borrow, n.flavors, n.usage, n.needs_preemption, msg.WAITING_FOR_QUOTA, message,
                          n.tried)
    # Kueue's resolveNoFitReason: per group the least severe failure (the TAS flavor's group: the placement),
    # the most severe across groups.
    index = next(i for i, ps in enumerate(shape.pod_sets) if ps.name == empty.failed)
    per_group = dict(group_severity[index])
    for res, flavor in n.flavors[index][1].items():
        if tas.is_tas_flavor(flavors.get(flavor)) and res in spec.group_of:
            per_group[spec.group_of[res]] = 0
    worst = max(per_group.values(), default=0)
    reason = tas_fit.TOPOLOGY_PLACEMENT_FAILED if worst == 0 else _severity_reason(worst)
    return Nomination(Mode.NO_FIT, n.borrow, n.flavors, n.usage, n.needs_preemption, reason, message, n.tried)


def _error(n: Nomination, outcome: tas_fit.Outcome) -> Nomination:
    """A pod set whose flavors cannot be placed at all: Kueue's message names only it; its reason is empty,
    which Kueue writes as Pending."""
    return Nomination(Mode.NO_FIT, n.borrow, n.flavors, n.usage, n.needs_preemption, "Pending",
                      f"failed to assign flavors to pod set {outcome.failed}: {outcome.error}", n.tried)
