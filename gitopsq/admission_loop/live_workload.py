"""Live Workload objects as the admission loop sees them, and live queue objects as the core's topology.

`read_workload` classifies one Workload dict (finished / admitted / evicting / pending / inactive) and pulls
out what the engine needs. `topology_of` decodes the live queue objects with the same codec `check` uses.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Final, Protocol, cast

from gitopsq.admission.topology import Settings, Topology, build_topology
from gitopsq.admission_loop.partial import assigned_counts, with_counts
from gitopsq.admission_loop.workload_status import Flavors, condition, is_true, parse_time
from gitopsq.api import model as m
from gitopsq.api.codec import decode
from gitopsq.api.raw_objects import KubeObject
from gitopsq.api.reader import Reader
from gitopsq.api.workload_codec import decode_pod_sets
from gitopsq.api.workload_object import WorkloadObject
from gitopsq.cluster.kinds import BY_PLURAL, TOPOLOGY

FINISHED, ADMITTED, EVICTING, PENDING, INACTIVE = "finished", "admitted", "evicting", "pending", "inactive"
QUEUE_LABEL: Final = "kueue.x-k8s.io/queue-name"
PRIORITY_LABEL: Final = "kueue.x-k8s.io/priority-class"
JOB_UID_LABEL: Final = "kueue.x-k8s.io/job-uid"
RESOURCE_IN_USE: Final = "kueue.x-k8s.io/resource-in-use"  # the Workload finalizer of job-owned Workloads

@dataclass(frozen=True, slots=True)
class LiveWorkload:
    """One Workload as the loop sees it."""

    key: str  # namespace/name
    namespace: str
    name: str
    uid: str
    queue: str
    priority: int | None
    priority_class: str | None
    created: float
    pod_sets: tuple[m.PodSet, ...]
    state: str
    cluster_queue: str | None  # where it holds quota (admitted / evicting)
    flavors: Flavors
    reserved_at: float
    raw: WorkloadObject


View = Callable[[KubeObject], LiveWorkload | None]  # how the watch cache decodes a Workload once per change
Retire = Callable[[LiveWorkload], bool]  # whether a view is done with (a finished Workload)

_POD_SETS: dict[tuple[str, str], tuple[m.PodSet, ...]] = {}  # (uid, generation) -> pod sets; specs are immutable
_BY_CONTENT: dict[str, tuple[m.PodSet, ...]] = {}  # repr(spec.podSets) -> pod sets: one decode per distinct shape


def _pod_sets(raw: WorkloadObject) -> tuple[m.PodSet, ...] | None:
    """Decoded pod sets; workloads with the same pod sets share one tuple (the admission pass groups by it)."""
    meta = raw.get("metadata") or {}
    memo = (str(meta.get("uid")), str(meta.get("generation")))
    if memo in _POD_SETS:
        return _POD_SETS[memo]
    spec_pod_sets = (raw.get("spec") or {}).get("podSets")
    text = repr(spec_pod_sets)
    pod_sets = _BY_CONTENT.get(text)
    if pod_sets is None:
        r = Reader(file=None, doc_line=None, obj=f"Workload/{meta.get('namespace')}/{meta.get('name')}")
        pod_sets = decode_pod_sets(r, spec_pod_sets, ("spec", "podSets"))
        if any(f.is_error for f in r.findings):
            return None
        if len(_BY_CONTENT) > 10_000:
            _BY_CONTENT.clear()
        _BY_CONTENT[text] = pod_sets
    if len(_POD_SETS) > 200_000:
        _POD_SETS.clear()
    _POD_SETS[memo] = pod_sets
    return pod_sets


_READ: dict[str, LiveWorkload] = {}  # uid -> view of the latest version read (older versions are not kept alive)


def read_workload(obj: Mapping[str, object]) -> LiveWorkload | None:
    """The loop's view of a Workload, or None when its pod sets cannot be read (left alone, like Kueue)."""
    raw = cast(WorkloadObject, obj)  # the edge: an object of the workloads resource
    uid = str((raw.get("metadata") or {}).get("uid"))
    hit = _READ.get(uid)
    if hit is not None and hit.raw is raw:
        return hit
    view = _read_workload(raw)
    if len(_READ) > 100_000:
        _READ.clear()
    if view is not None:
        _READ[uid] = view
    return view


def _read_workload(raw: WorkloadObject) -> LiveWorkload | None:
    meta = raw.get("metadata") or {}
    spec = raw.get("spec") or {}
    status = raw.get("status") or {}
    pod_sets = _pod_sets(raw)
    deleting = bool(meta.get("deletionTimestamp"))
    if pod_sets is None or (deleting and RESOURCE_IN_USE not in (meta.get("finalizers") or ())):
        return None
    admission = status.get("admission")
    if is_true(raw, "Finished"):
        state = FINISHED
    elif admission and is_true(raw, "QuotaReserved"):
        # Deleted while holding quota: its finalizer keeps it (and the quota) until its job's pods are gone.
        state = EVICTING if is_true(raw, "Evicted") or deleting else ADMITTED
    elif deleting:
        return None
    elif spec.get("active") is False:
        state = INACTIVE
    else:
        state = PENDING
    flavors: dict[str, dict[str, str]] = {}
    cq = None
    if admission and state in (ADMITTED, EVICTING, FINISHED):
        cq = admission.get("clusterQueue")
        for psa in admission.get("podSetAssignments") or ():
            flavors[psa.get("name", "main")] = dict(psa.get("flavors") or {})
        pod_sets = with_counts(pod_sets, assigned_counts(admission))  # partial admission: what it holds
    reserved = condition(raw, "QuotaReserved")
    ref = spec.get("priorityClassRef") or {}
    return LiveWorkload(
        key=f"{meta.get('namespace')}/{meta.get('name')}", namespace=meta.get("namespace", ""),
        name=meta.get("name", ""), uid=meta.get("uid", ""), queue=spec.get("queueName") or "",
        priority=spec.get("priority"), priority_class=ref.get("name"),
        created=parse_time(meta.get("creationTimestamp")), pod_sets=pod_sets, state=state, cluster_queue=cq,
        flavors=flavors, reserved_at=parse_time(reserved.get("lastTransitionTime")) if reserved else 0.0, raw=raw)


def topology_of(objects: Iterable[Mapping[str, object]], settings: Settings | None = None) -> Topology:
    """The engine's topology from live queue objects (undecodable objects are skipped, as Kueue's webhook
    would have refused them)."""
    decoded: list[m.QueueObject] = []
    for raw in objects:
        doc = {k: v for k, v in raw.items() if k != "status"}
        obj = decode(doc, allow_status=True).obj
        if obj is not None and not isinstance(obj, m.Workload):
            decoded.append(obj)
    return build_topology(decoded, settings)


class QueueSource(Protocol):
    """What `queue_objects` reads: the watch cache (ports.WatchCache) has it."""

    def watches(self, name: str) -> bool: ...

    def items(self, name: str) -> list[KubeObject]: ...


def queue_objects(cache: QueueSource) -> list[dict[str, object]]:
    """The topology's objects from the watch cache, with the apiVersion and kind that watch and list items lack
    (the codec needs them)."""
    out: list[dict[str, object]] = []
    for name in TOPOLOGY:
        if cache.watches(name):
            kind = BY_PLURAL[name]
            out.extend({**o, "apiVersion": kind.api_version, "kind": kind.kind} for o in cache.items(name))
    return out
