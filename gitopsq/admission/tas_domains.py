"""Topology-aware scheduling: the cluster's nodes as a tree of topology domains (Kueue v0.19's TAS cache).

A `TasTopology` names node label keys from the highest level to the lowest (block, rack, host). A ResourceFlavor
with ``topologyName`` places its pods on the nodes that carry its node labels and every level's label, are Ready
and schedulable. Each such node is a leaf at the lowest level; a node's capacity is its allocatable less what
pods not placed by topology-aware scheduling use on it. Amounts are milli-units, like the rest of the engine.

`TasCluster` holds the nodes, the topologies and the usage of admitted workloads' placements, per topology and
leaf; `TasCluster.tree` builds (and remembers) the domain tree of one flavor.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from gitopsq.api import model as m

HOSTNAME = "kubernetes.io/hostname"
PODS = "pods"
ONE_POD = 1000  # one pod, in milli-units


class TasTopology:
    """A Topology: its name and node label keys, highest level first."""

    __slots__ = ("levels", "name")

    def __init__(self, name: str, levels: tuple[str, ...]) -> None:
        if not levels:
            raise ValueError(f"topology {name}: levels must not be empty")
        self.name = name
        self.levels = levels


class TasNode:
    """A Node as topology-aware scheduling reads it. ``non_tas_usage``: what pods not placed by TAS (static pods,
    DaemonSets, Deployments) request on it, milli-units."""

    __slots__ = ("allocatable", "labels", "name", "non_tas_usage", "ready", "taints", "unschedulable")

    def __init__(self, name: str, labels: Mapping[str, str], allocatable: Mapping[str, int], *,
                 taints: tuple[m.Taint, ...] = (), ready: bool = True, unschedulable: bool = False,
                 non_tas_usage: Mapping[str, int] | None = None) -> None:
        self.name = name
        self.labels = dict(labels)
        self.allocatable = dict(allocatable)
        self.taints = taints
        self.ready = ready
        self.unschedulable = unschedulable
        self.non_tas_usage: dict[str, int] = dict(non_tas_usage or {})


class Domain:
    """One topology domain; a leaf (lowest level) also holds its node's capacity and, when the lowest level is
    the hostname, the node itself (its labels and taints filter pods)."""

    __slots__ = ("capacity", "children", "id", "idx", "node", "parent", "values")

    def __init__(self, domain_id: str, values: tuple[str, ...], idx: int) -> None:
        self.id = domain_id
        self.values = values
        self.idx = idx
        self.parent: Domain | None = None
        self.children: list[Domain] = []
        self.capacity: dict[str, int] = {}
        self.node: TasNode | None = None


def domain_id(values: tuple[str, ...]) -> str:
    return ",".join(values)


def leaf_id(levels: tuple[str, ...], values: tuple[str, ...]) -> str:
    """A leaf's key: the hostname alone when the lowest level is the hostname (Kueue's domain IDs)."""
    return values[-1] if levels[-1] == HOSTNAME else domain_id(values)


class DomainTree:
    """The domains of one TAS flavor: per level, the roots, the leaves by id."""

    __slots__ = ("domains", "hostname_lowest", "leaves", "levels", "per_level", "roots", "topology_name")

    def __init__(self, topology: TasTopology, nodes: Iterable[TasNode]) -> None:
        self.topology_name = topology.name
        self.levels = topology.levels
        self.hostname_lowest = self.levels[-1] == HOSTNAME
        self.domains: list[Domain] = []
        self.per_level: list[dict[str, Domain]] = [{} for _ in self.levels]
        self.leaves: dict[str, Domain] = {}
        self.roots: list[Domain] = []
        for node in nodes:
            values = tuple(node.labels[k] for k in self.levels)
            key = leaf_id(self.levels, values)
            leaf = self.leaves.get(key)
            if leaf is None:
                leaf = self._domain(values, key)
                self.leaves[key] = leaf
                if self.hostname_lowest:
                    leaf.node = node
            for res, val in node.allocatable.items():
                leaf.capacity[res] = leaf.capacity.get(res, 0) + val
            for res, val in node.non_tas_usage.items():
                leaf.capacity[res] = leaf.capacity.get(res, 0) - val

    def _domain(self, values: tuple[str, ...], key: str) -> Domain:
        level = len(values) - 1
        d = Domain(key, values, len(self.domains))
        self.domains.append(d)
        self.per_level[level][domain_id(values)] = d
        if level == 0:
            self.roots.append(d)
            return d
        parent_values = values[:-1]
        parent = self.per_level[level - 1].get(domain_id(parent_values))
        if parent is None:
            parent = self._domain(parent_values, domain_id(parent_values))
        d.parent = parent
        parent.children.append(d)
        return d

    def level_index(self, key: str) -> int:
        """The index of a level key, -1 when the topology has no such level."""
        for i, k in enumerate(self.levels):
            if k == key:
                return i
        return -1


def node_matches_flavor(node: TasNode, flavor: m.ResourceFlavor, levels: tuple[str, ...]) -> bool:
    """The flavor's node labels and every level's label are on the node; it is Ready and schedulable."""
    if not node.ready or node.unschedulable:
        return False
    labels = node.labels
    return all(labels.get(k) == v for k, v in flavor.node_labels.items()) and all(k in labels for k in levels)


class TasCluster:
    """Nodes, topologies and the TAS usage of admitted workloads: ``usage[topology][leaf id][resource]``."""

    __slots__ = ("_trees", "nodes", "topologies", "usage", "version")

    def __init__(self, topologies: Iterable[TasTopology], nodes: Iterable[TasNode]) -> None:
        self.topologies = {t.name: t for t in topologies}
        self.nodes = tuple(nodes)
        self.usage: dict[str, dict[str, dict[str, int]]] = {}
        self.version = 0  # bumped by every change of usage: nominations read it
        self._trees: dict[str, tuple[m.ResourceFlavor, DomainTree]] = {}

    def is_tas_flavor(self, flavor: m.ResourceFlavor | None) -> bool:
        return flavor is not None and flavor.topology_name is not None and flavor.topology_name in self.topologies

    def tree(self, flavor: m.ResourceFlavor) -> DomainTree | None:
        """The flavor's domain tree (None: it names no known topology)."""
        name = flavor.meta.name
        cached = self._trees.get(name)
        if cached is not None and cached[0] is flavor:
            return cached[1]
        topology = self.topologies.get(flavor.topology_name or "")
        if topology is None:
            return None
        tree = DomainTree(topology, (n for n in self.nodes if node_matches_flavor(n, flavor, topology.levels)))
        self._trees[name] = (flavor, tree)
        return tree

    def leaf_usage(self, topology: str) -> Mapping[str, Mapping[str, int]]:
        return self.usage.get(topology, {})

    def add(self, topology: str, per_leaf: Mapping[str, Mapping[str, int]], sign: int) -> None:
        """Add (``sign`` 1) or take away (-1) a placement's usage per leaf."""
        by_leaf = self.usage.setdefault(topology, {})
        for leaf, amounts in per_leaf.items():
            held = by_leaf.setdefault(leaf, {})
            for res, val in amounts.items():
                held[res] = held.get(res, 0) + sign * val
            if not any(held.values()):
                del by_leaf[leaf]
        self.version += 1


_TAS_ANNOTATIONS = ("kueue.x-k8s.io/podset-preferred-topology", "kueue.x-k8s.io/podset-required-topology",
                    "kueue.x-k8s.io/podset-slice-required-topology",
                    "kueue.x-k8s.io/podset-slice-required-topology-constraints",
                    "kueue.x-k8s.io/podset-unconstrained-topology")


class BoundPod:
    """A pod as the node usage of pods not placed by TAS reads it: the node it is bound to (empty: none yet), its
    phase, annotations and requests (milli-units, the pod's effective requests)."""

    __slots__ = ("annotations", "node", "phase", "requests")

    def __init__(self, node: str, phase: str, annotations: Mapping[str, str], requests: Mapping[str, int]) -> None:
        self.node = node
        self.phase = phase
        self.annotations = annotations
        self.requests = requests


def placed_by_tas(annotations: Mapping[str, str]) -> bool:
    """Whether a pod's annotations ask for a topology (Kueue's IsTAS): its usage is the placement's, not the
    node's."""
    return any(a in annotations for a in _TAS_ANNOTATIONS)


def non_tas_usage(pods: Iterable[BoundPod]) -> dict[str, dict[str, int]]:
    """Per node, what bound pods not placed by TAS and not finished (Succeeded, Failed) request, plus one ``pods``
    each: `TasNode.non_tas_usage`."""
    out: dict[str, dict[str, int]] = {}
    for pod in pods:
        if not pod.node or pod.phase in ("Succeeded", "Failed") or placed_by_tas(pod.annotations):
            continue
        held = out.setdefault(pod.node, {})
        for res, val in pod.requests.items():
            held[res] = held.get(res, 0) + val
        held[PODS] = held.get(PODS, 0) + ONE_POD
    return out
