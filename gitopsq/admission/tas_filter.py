"""Topology-aware scheduling: which nodes a pod set may use (Kueue v0.19.2's default feasibility check) and
why the others were left out, worded as in Kueue's not-fit messages.

With the hostname as the lowest topology level, a node is left out when it has a NoSchedule or NoExecute taint the
pod set (or its flavor) does not tolerate, when its labels miss the pod set's node selector, or when they match
none of the required node affinity terms, checked in that order.
"""

from __future__ import annotations

from collections.abc import Mapping

from gitopsq.admission.tas_domains import TasNode
from gitopsq.api import model as m


class PodConstraints:
    """What filters nodes for a pod set: its node selector, required node affinity and tolerations (the pod's
    and the flavor's)."""

    __slots__ = ("node_selector", "required_affinity", "tolerations")

    def __init__(self, node_selector: Mapping[str, str], required_affinity: tuple[tuple[m.LabelSelectorRequirement,
                 ...], ...], tolerations: tuple[m.Toleration, ...]) -> None:
        self.node_selector = node_selector
        self.required_affinity = required_affinity
        self.tolerations = tolerations


class NodeStats:
    """Why nodes were left out (Kueue's exclusion stats, in the not-fit message)."""

    __slots__ = ("affinity", "node_selector", "resources", "taints", "total")

    def __init__(self) -> None:
        self.total = 0
        self.node_selector = 0
        self.affinity = 0
        self.taints: dict[str, int] = {}
        self.resources: dict[str, int] = {}

    def text(self) -> str:
        reasons: list[str] = []
        if self.node_selector:
            reasons.append(f"nodeSelector: {self.node_selector}")
        if self.affinity:
            reasons.append(f"affinity: {self.affinity}")
        reasons.extend(f"taint {go_quote(t)}: {n}" for t, n in self.taints.items())
        reasons.extend(f"resource {go_quote(r)}: {n}" for r, n in self.resources.items())
        if not reasons:
            return ""
        return f". Total nodes: {self.total}; excluded: {', '.join(sorted(reasons))}"


def go_quote(text: str) -> str:
    """Go's %q of a string of printable characters."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def taint_text(t: m.Taint) -> str:
    """A taint as Kubernetes' Taint.ToString prints it."""
    if not t.effect:
        return t.key if not t.value else f"{t.key}={t.value}:"
    return f"{t.key}:{t.effect}" if not t.value else f"{t.key}={t.value}:{t.effect}"


def requirement_holds(req: m.LabelSelectorRequirement, labels: Mapping[str, str]) -> bool:
    value = labels.get(req.key)
    op = req.operator
    if op == "In":
        return value is not None and value in req.values
    if op == "NotIn":
        return value is None or value not in req.values
    if op == "Exists":
        return value is not None
    if op == "DoesNotExist":
        return value is None
    if op in ("Gt", "Lt") and value is not None and len(req.values) == 1:
        try:
            have, bound = int(value), int(req.values[0])
        except ValueError:
            return False
        return have > bound if op == "Gt" else have < bound
    return False


def node_excluded(node: TasNode, pod: PodConstraints, stats: NodeStats) -> bool:
    """Whether the node is left out (and why, in ``stats``): taints, then node selector, then affinity."""
    for taint in node.taints:
        if taint.effect in ("NoSchedule", "NoExecute") and not any(t.tolerates(taint) for t in pod.tolerations):
            key = taint_text(taint)
            stats.taints[key] = stats.taints.get(key, 0) + 1
            return True
    labels = node.labels
    if any(labels.get(k) != v for k, v in pod.node_selector.items()):
        stats.node_selector += 1
        return True
    if pod.required_affinity and not any(
            term and all(requirement_holds(r, labels) for r in term) for term in pod.required_affinity):
        stats.affinity += 1
        return True
    return False
