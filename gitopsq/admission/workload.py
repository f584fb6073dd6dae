"""Workloads as the engine sees them: an interned scheduling shape plus a small mutable record.

A `Shape` is everything flavor assignment reads (pod sets, per-pod requests, selectors, tolerations); equal
shapes are interned, so ten thousand copies of one job template cost one `Shape` (and scheduling-equivalence,
Kueue's ``SchedulingEquivalenceHashing`` over shape and priority, is a pointer and an integer comparison). A
`WorkloadInfo` carries identity, priority, queue order and, once admitted, the assignment and its usage.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from gitopsq.admission.quota import FlavorResource
from gitopsq.admission.tas_placement import PodSetPlacement
from gitopsq.admission.tas_requests import TopologyRequest
from gitopsq.api import model as m
from gitopsq.api.frozenmap import FrozenMap


@dataclass(frozen=True, slots=True)
class PodSetShape:
    """One pod set: total requests per resource (per-pod × count, milli-units) and placement constraints."""

    name: str
    count: int
    totals: FrozenMap[str, int]
    per_pod: FrozenMap[str, int]
    min_count: int | None
    node_selector: FrozenMap[str, str]
    tolerations: tuple[m.Toleration, ...]
    required_affinity: tuple[tuple[m.LabelSelectorRequirement, ...], ...]
    topology: TopologyRequest | None = None  # from Kueue's pod set annotations (tas_requests)
    _hash: int = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        # Hashed on every flavor check (the structural-mismatch memo): computed once.
        fields = (self.name, self.count, self.totals, self.per_pod, self.min_count, self.node_selector,
                  self.tolerations, self.required_affinity)
        object.__setattr__(self, "_hash", hash(fields if self.topology is None else (*fields, self.topology)))

    def __hash__(self) -> int:
        return self._hash


@dataclass(frozen=True, slots=True)
class Shape:
    pod_sets: tuple[PodSetShape, ...]
    _hash: int = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        # Hashed on every pop of a BestEffortFIFO head (the scheduling-equivalence lookup): computed once.
        object.__setattr__(self, "_hash", hash(self.pod_sets))

    def __hash__(self) -> int:
        return self._hash


_SHAPES: dict[Shape, Shape] = {}


def _intern(shape: Shape) -> Shape:
    return _SHAPES.setdefault(shape, shape)


_BY_POD_SETS: dict[int, tuple[tuple[m.PodSet, ...], Shape]] = {}  # id(pod sets) -> (those pod sets, shape)
_BY_POD_SETS_LIMIT = 4096


def shape_of(pod_sets: tuple[m.PodSet, ...], topology: Mapping[str, TopologyRequest] | None = None) -> Shape:
    """The interned shape of a workload's pod sets; ``topology``: the topology requests of pod sets by name.

    Memoised on the identity of the tuple: callers that share one tuple per distinct shape (the admission
    loop does) pay for building and hashing a `Shape` once, not once per workload per pass. The entry keeps
    the tuple alive, so its id cannot be reused while the entry exists; the memo is cleared when full."""
    if topology:
        return _shape_of(pod_sets, topology)
    hit = _BY_POD_SETS.get(id(pod_sets))
    if hit is not None and hit[0] is pod_sets:
        return hit[1]
    shape = _shape_of(pod_sets)
    if len(_BY_POD_SETS) >= _BY_POD_SETS_LIMIT:
        _BY_POD_SETS.clear()
    _BY_POD_SETS[id(pod_sets)] = (pod_sets, shape)
    return shape


def _shape_of(pod_sets: tuple[m.PodSet, ...], topology: Mapping[str, TopologyRequest] | None = None) -> Shape:
    return _intern(Shape(tuple(
        PodSetShape(name=ps.name, count=ps.count,
                    totals=FrozenMap({r: q.milli * ps.count for r, q in ps.requests.items()}),
                    per_pod=FrozenMap({r: q.milli for r, q in ps.requests.items()}),
                    min_count=ps.min_count, node_selector=ps.node_selector, tolerations=ps.tolerations,
                    required_affinity=ps.required_affinity, topology=topology.get(ps.name) if topology else None)
        for ps in pod_sets)))


def reducible(shape: Shape) -> int:
    """How many pods partial admission may drop in total (``count − minCount`` over pod sets)."""
    return sum(ps.count - ps.min_count for ps in shape.pod_sets if ps.min_count is not None and ps.min_count < ps.count)


def reduced(shape: Shape, delta: int) -> Shape:
    """The shape with ``delta`` of its reducible pods dropped, spread over pod sets in proportion (Kueue's
    PodSetReducer)."""
    total = reducible(shape)
    out = []
    for ps in shape.pod_sets:
        if ps.min_count is None or ps.min_count >= ps.count or total == 0:
            out.append(ps)
            continue
        count = ps.count - -(-(ps.count - ps.min_count) * delta // total)
        totals = FrozenMap({r: v * count for r, v in ps.per_pod.items()})
        out.append(PodSetShape(name=ps.name, count=count, totals=totals, per_pod=ps.per_pod, min_count=ps.min_count,
                               node_selector=ps.node_selector, tolerations=ps.tolerations,
                               required_affinity=ps.required_affinity, topology=ps.topology))
    return _intern(Shape(tuple(out)))


@dataclass(frozen=True, slots=True)
class Assignment:
    """Where an admitted workload sits: its ClusterQueue, the flavor of each resource per pod set, its usage."""

    cluster_queue: str
    flavors: tuple[tuple[str, FrozenMap[str, str]], ...]  # (pod set, resource -> flavor)
    usage: Mapping[FlavorResource, int]
    topology: tuple[PodSetPlacement, ...] = ()  # where the pod sets that request TAS are placed

    def flavors_used(self) -> tuple[str, ...]:
        return tuple(sorted({f for _, per_res in self.flavors for f in per_res.values()}))


class WorkloadInfo:
    """A workload known to the engine. ``seq`` is the unique tie-break of every ordering (Kueue uses the UID)."""

    __slots__ = (
        "admitted",
        "assignment",
        "checks",
        "cluster_queue",
        "created",
        "evicting",
        "key",
        "last_cycle",
        "last_generation",
        "last_tried",
        "namespace",
        "priority",
        "queue",
        "reserved_at",
        "seq",
        "shape",
    )

    def __init__(self, *, key: str, namespace: str, queue: str, priority: int, created: float, seq: int,
                 shape: Shape) -> None:
        self.key = key
        self.namespace = namespace
        self.queue = queue
        self.priority = priority
        self.created = created  # queue-order timestamp
        self.seq = seq
        self.shape = shape
        self.assignment: Assignment | None = None
        self.reserved_at: float | None = None  # when quota was reserved (orders preemption victims)
        self.checks: dict[str, str] = {}  # admission check -> Pending | Ready | Retry | Rejected
        self.admitted = False
        # Preempted, but still holding its quota until the eviction completes (Kueue's Evicted condition on a
        # workload the cache still counts; see cycle.settle).
        self.evicting = False
        self.cluster_queue: str | None = None  # resolved through the LocalQueue
        # Kueue's LastAssignment: where each flavor scan stopped, the ClusterQueue's generation and the cycle it
        # was computed in (it stays valid in the next cycle, or while that generation holds).
        self.last_tried: Mapping[tuple[int, str], int] | None = None
        self.last_generation = 0
        self.last_cycle = -2

    def __repr__(self) -> str:
        return f"WorkloadInfo({self.key})"

    def equivalence(self) -> tuple[Shape, int]:
        """Kueue's scheduling equivalence class (``computeSchedulingHash``): the shape and the priority."""
        return (self.shape, self.priority)

    def queue_order(self) -> tuple[int, float, int]:
        """Kueue's pending order: priority descending, queue-order timestamp ascending, then the unique id."""
        return (-self.priority, self.created, self.seq)
