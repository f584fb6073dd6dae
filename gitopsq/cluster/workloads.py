"""Live Workload objects ⇄ the admission core, and Workload status as Kueue writes it.

`read_workload` classifies one Workload dict (finished / admitted / evicting / pending / inactive) and pulls
out what the engine needs. `topology_of` decodes the live queue objects with the same codec `check` uses.
Conditions follow metav1 rules: ``lastTransitionTime`` moves only when the status flips.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final

from gitopsq.admission.topology import Settings, Topology, build_topology
from gitopsq.api import model as m
from gitopsq.api.codec import decode
from gitopsq.api.quantity import Quantity
from gitopsq.api.reader import Reader
from gitopsq.api.workload_codec import decode_pod_sets
from gitopsq.cluster.cache import Client, TokenBucket
from gitopsq.errors import ClusterError

FINISHED, ADMITTED, EVICTING, PENDING, INACTIVE = "finished", "admitted", "evicting", "pending", "inactive"
QUEUE_LABEL: Final = "kueue.x-k8s.io/queue-name"
PRIORITY_LABEL: Final = "kueue.x-k8s.io/priority-class"
JOB_UID_LABEL: Final = "kueue.x-k8s.io/job-uid"

Flavors = Mapping[str, Mapping[str, str]]  # pod set -> resource -> flavor


def iso(now: float) -> str:
    return datetime.fromtimestamp(now, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_time(text: str | None) -> float:
    if not text:
        return 0.0
    return datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC).timestamp()


def condition(obj: Mapping[str, Any], kind: str) -> Mapping[str, Any] | None:
    for c in (obj.get("status") or {}).get("conditions") or ():
        if c.get("type") == kind:
            return c  # type: ignore[no-any-return]
    return None


def is_true(obj: Mapping[str, Any], kind: str) -> bool:
    c = condition(obj, kind)
    return c is not None and c.get("status") == "True"


def set_condition(conditions: list[dict[str, Any]], kind: str, status: str, reason: str, message: str,  # noqa: PLR0917
                  now: float) -> None:
    """Set one condition in place; keep its transition time unless the status flips (metav1 semantics)."""
    for c in conditions:
        if c.get("type") == kind:
            if c.get("status") != status:
                c["lastTransitionTime"] = iso(now)
            c.update(status=status, reason=reason, message=message[:32768])
            return
    conditions.append({"type": kind, "status": status, "reason": reason, "message": message[:32768],
                       "lastTransitionTime": iso(now)})


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
    raw: Mapping[str, Any]


_POD_SETS: dict[tuple[str, str], tuple[m.PodSet, ...]] = {}  # (uid, generation) -> pod sets; specs are immutable
_BY_CONTENT: dict[str, tuple[m.PodSet, ...]] = {}  # repr(spec.podSets) -> pod sets: one decode per distinct shape


def _pod_sets(raw: Mapping[str, Any]) -> tuple[m.PodSet, ...] | None:
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


def read_workload(raw: Mapping[str, Any]) -> LiveWorkload | None:
    """The loop's view of a Workload, or None when its pod sets cannot be read (left alone, like Kueue)."""
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


def _read_workload(raw: Mapping[str, Any]) -> LiveWorkload | None:
    meta = raw.get("metadata") or {}
    spec = raw.get("spec") or {}
    status = raw.get("status") or {}
    pod_sets = _pod_sets(raw)
    if pod_sets is None or meta.get("deletionTimestamp"):
        return None
    admission = status.get("admission")
    if is_true(raw, "Finished"):
        state = FINISHED
    elif admission and is_true(raw, "QuotaReserved"):
        state = EVICTING if is_true(raw, "Evicted") else ADMITTED
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
    reserved = condition(raw, "QuotaReserved")
    ref = spec.get("priorityClassRef") or {}
    return LiveWorkload(
        key=f"{meta.get('namespace')}/{meta.get('name')}", namespace=meta.get("namespace", ""),
        name=meta.get("name", ""), uid=meta.get("uid", ""), queue=spec.get("queueName") or "",
        priority=spec.get("priority"), priority_class=ref.get("name"),
        created=parse_time(meta.get("creationTimestamp")), pod_sets=pod_sets, state=state, cluster_queue=cq,
        flavors=flavors, reserved_at=parse_time(reserved.get("lastTransitionTime")) if reserved else 0.0, raw=raw)


def topology_of(objects: Iterable[Mapping[str, Any]], settings: Settings | None = None) -> Topology:
    """The engine's topology from live queue objects (undecodable objects are skipped, as Kueue's webhook
    would have refused them)."""
    decoded: list[m.QueueObject] = []
    for raw in objects:
        doc = {k: v for k, v in raw.items() if k != "status"}
        obj = decode(doc, allow_status=True).obj
        if obj is not None and not isinstance(obj, m.Workload):
            decoded.append(obj)
    return build_topology(decoded, settings)


def usage_of(pod_sets: tuple[m.PodSet, ...]) -> dict[str, dict[str, Quantity]]:
    """Per pod set: total quantity of each resource (per-pod request × count) — ``resourceUsage``."""
    return {ps.name: {r: Quantity(q.milli * ps.count, q.fmt) for r, q in ps.requests.items()} for ps in pod_sets}


def admission_status(cluster_queue: str, pod_sets: tuple[m.PodSet, ...], flavors: Flavors) -> dict[str, Any]:
    """``status.admission`` as Kueue writes it."""
    usage = usage_of(pod_sets)
    return {"clusterQueue": cluster_queue, "podSetAssignments": [
        {"name": ps.name, "flavors": dict(flavors.get(ps.name, {})),
         "resourceUsage": {r: str(q) for r, q in sorted(usage[ps.name].items())}, "count": ps.count}
        for ps in pod_sets]}


WORKLOADS_PATH: Final = "/apis/kueue.x-k8s.io/v1beta2"
MERGE_PATCH: Final = "application/merge-patch+json"


def workload_path(namespace: str, name: str = "") -> str:
    base = f"{WORKLOADS_PATH}/namespaces/{namespace}/workloads"
    return f"{base}/{name}" if name else base


class NotLeading(ClusterError):  # noqa: N818 - reads as a state, like the kube.py classes
    """The controller lost its Lease: no more writes until it is leader again."""


class Writer:
    """Every write of the loop, through the rate-limited client; answers go into the cache at once.

    Status writes carry the resourceVersion they were computed from, so a concurrent change is a 409
    (`ClusterConflict`) and the caller recomputes from fresh state on its next pass instead of overwriting.
    """

    def __init__(self, client: Any, cache: Any, events: Any | None = None) -> None:
        self.client, self.cache, self.events = client, cache, events
        self.writes = 0
        self._mark = 0
        self._lock = threading.Lock()
        self.may_write: Any = lambda: True  # the controller's leadership check (Runnable protocol)

    def send(self, method: str, path: str, **kwargs: Any) -> Any:
        """One write, refused unless ``may_write()`` (leadership held) says yes right now."""
        if not self.may_write():
            raise NotLeading("leadership lost: write not sent", obj=kwargs.get("obj"))
        return self.client.request(method, path, **kwargs)

    def count(self) -> None:
        with self._lock:  # writers run on a thread pool
            self.writes += 1

    def mark(self) -> None:
        """Start counting the writes of a new pass."""
        self._mark = self.writes

    @property
    def writes_since_pass(self) -> int:
        return self.writes - self._mark

    def workload_status(self, raw: Mapping[str, Any], status: Mapping[str, Any]) -> dict[str, Any]:
        meta = raw.get("metadata") or {}
        body = {"metadata": {"resourceVersion": meta.get("resourceVersion")}, "status": status}
        answer: dict[str, Any] = self.send(
            "PATCH", workload_path(meta["namespace"], meta["name"]) + "/status", body=body,
            content_type=MERGE_PATCH, obj=f"Workload/{meta['namespace']}/{meta['name']}")
        self.count()
        self.cache.put("workloads", answer)
        return answer

    def patch(self, resource: str, path: str, body: Mapping[str, Any], obj: str) -> dict[str, Any]:
        answer: dict[str, Any] = self.send("PATCH", path, body=dict(body), content_type=MERGE_PATCH,
                                                     obj=obj)
        self.count()
        self.cache.put(resource, answer)
        return answer

    def create(self, resource: str, path: str, body: Mapping[str, Any], obj: str) -> dict[str, Any]:
        answer: dict[str, Any] = self.send("POST", path, body=dict(body), obj=obj)
        self.count()
        self.cache.put(resource, answer)
        return answer

    def delete(self, resource: str, path: str, key: str, obj: str) -> None:
        self.send("DELETE", path, obj=obj)
        self.count()
        self.cache.forget(resource, key)

    def event(self, obj: Mapping[str, Any], kind: str, reason: str, message: str, *, warning: bool = False) -> None:
        if self.events is not None:
            self.events.emit(obj, kind, reason, message, warning=warning)


class EventRecorder:
    """core/v1 Events, sent from a background thread through their own token bucket so that they never
    delay admission writes (client-go's event broadcaster does the same); dropped when the queue is full."""

    def __init__(self, client: Client, *, component: str = "gitopsq-admission", qps: float = 20.0,
                 limit: int = 10_000) -> None:
        import queue

        self.client, self.component = client, component
        self.bucket = TokenBucket(qps, int(max(1, qps * 2)))
        self.queue: queue.Queue[dict[str, Any] | None] = queue.Queue(limit)
        self.sent = self.dropped = 0
        self._thread = threading.Thread(target=self._run, name="event-recorder", daemon=True)
        self._thread.start()

    def emit(self, obj: Mapping[str, Any], kind: str, reason: str, message: str, *, warning: bool = False) -> None:
        import queue

        meta = obj.get("metadata") or {}
        now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        api_version = obj.get("apiVersion") or {"Workload": "kueue.x-k8s.io/v1beta2", "Job": "batch/v1"}.get(kind, "")
        event = {"metadata": {"generateName": f"{meta.get('name')}.", "namespace": meta.get("namespace") or "default"},
                 "involvedObject": {"apiVersion": api_version, "kind": kind, "name": meta.get("name"),
                                    "namespace": meta.get("namespace"), "uid": meta.get("uid")},
                 "reason": reason, "message": message[:1024], "type": "Warning" if warning else "Normal",
                 "source": {"component": self.component}, "firstTimestamp": now, "lastTimestamp": now, "count": 1,
                 "reportingComponent": self.component}
        try:
            self.queue.put_nowait(event)
        except queue.Full:
            self.dropped += 1

    def _run(self) -> None:
        while True:
            event = self.queue.get()
            if event is None:
                return
            self.bucket.take()
            try:
                self.client.rest.request("POST", f"/api/v1/namespaces/{event['metadata']['namespace']}/events",
                                         body=event, retry=False)
                self.sent += 1
            except ClusterError:
                self.dropped += 1

    def close(self) -> None:
        self.queue.put(None)
