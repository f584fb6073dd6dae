"""Write-back: every write of the admission loop (Workload status, Job patches, queue status) and its Events.

`Writer` sends through the rate-limited client, refuses to write once leadership is lost (`NotLeading`) and
puts each answer into the watch cache at once. `EventRecorder` sends core/v1 Events from its own thread and
token bucket, so they never delay a write.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Final, cast

from gitopsq.admission_loop.integrations.registry import REGISTRY
from gitopsq.admission_loop.ports import TokenLevel, WatchCache
from gitopsq.admission_loop.rate_limited import Client, TokenBucket
from gitopsq.api.event_object import EventObject
from gitopsq.api.raw_objects import KubeObject, meta
from gitopsq.cluster.kinds import WORKLOAD
from gitopsq.errors import ClusterError

MERGE_PATCH: Final = "application/merge-patch+json"


def workload_path(namespace: str, name: str = "") -> str:
    base = WORKLOAD.collection_path(namespace)
    return f"{base}/{name}" if name else base


class NotLeading(ClusterError):  # noqa: N818 - reads as a state, like the kube.py classes
    """The controller lost its Lease: no more writes until it is leader again."""


class Writer:
    """Every write of the loop, through the rate-limited client; answers go into the cache at once.

    Status writes carry the resourceVersion they were computed from, so a concurrent change is a 409
    (`ClusterConflict`) and the caller recomputes from fresh state on its next pass instead of overwriting.
    """

    def __init__(self, client: Client, cache: WatchCache, events: EventRecorder | None = None) -> None:
        self.client, self.cache, self.events = client, cache, events
        self.writes = 0
        self._mark = 0
        self._lock = threading.Lock()
        self.may_write: Callable[[], bool] = lambda: True  # the controller's leadership check (Runnable protocol)

    @property
    def workload_bucket(self) -> TokenLevel | None:
        """The Workload kind's token bucket: the pass sizes its batch of admissions by what it holds."""
        return self.client.bucket

    def send(self, method: str, path: str, *, obj: str, body: object = None,
             content_type: str = "application/json") -> KubeObject:
        """One write, refused unless ``may_write()`` (leadership held) says yes right now; the object written."""
        if not self.may_write():
            raise NotLeading("leadership lost: write not sent", obj=obj)
        return cast(KubeObject, self.client.request(method, path, body=body, content_type=content_type, obj=obj))

    def count(self) -> None:
        with self._lock:  # writers run on a thread pool
            self.writes += 1

    def mark(self) -> None:
        """Start counting the writes of a new pass."""
        self._mark = self.writes

    @property
    def writes_since_pass(self) -> int:
        return self.writes - self._mark

    def workload_status(self, raw: Mapping[str, object], status: Mapping[str, object]) -> KubeObject:
        m = meta(raw)
        body = {"metadata": {"resourceVersion": m.get("resourceVersion")}, "status": status}
        answer = self.send(
            "PATCH", workload_path(m["namespace"], m["name"]) + "/status", body=body,
            content_type=MERGE_PATCH, obj=f"Workload/{m['namespace']}/{m['name']}")
        self.count()
        self.cache.put("workloads", answer)
        return answer

    def patch(self, resource: str, path: str, body: Mapping[str, object], obj: str) -> KubeObject:
        answer = self.send("PATCH", path, body=dict(body), content_type=MERGE_PATCH, obj=obj)
        self.count()
        self.cache.put(resource, answer)
        return answer

    def create(self, resource: str, path: str, body: Mapping[str, object], obj: str) -> KubeObject:
        answer = self.send("POST", path, body=dict(body), obj=obj)
        self.count()
        self.cache.put(resource, answer)
        return answer

    def queue_status(self, resource: str, path: str, status: Mapping[str, object]) -> KubeObject:
        """A ClusterQueue's or LocalQueue's status (merge patch, no resourceVersion: the loop owns it)."""
        answer = self.send("PATCH", path + "/status", body={"status": status},
                                           content_type=MERGE_PATCH, obj=path)
        self.count()
        self.cache.put(resource, answer)
        return answer

    def delete(self, resource: str, path: str, key: str, obj: str) -> None:
        answer = self.send("DELETE", path, obj=obj)
        self.count()
        left = meta(answer) if isinstance(answer, dict) else {}  # the object while a finalizer holds it, else a Status
        if left.get("deletionTimestamp") and left.get("finalizers"):
            self.cache.put(resource, answer)  # a finalizer holds it: still there, now being deleted
        else:
            self.cache.forget(resource, key)

    def event(self, obj: Mapping[str, object], kind: str, reason: str, message: str, *, warning: bool = False
              ) -> None:
        if self.events is not None:
            self.events.emit(obj, kind, reason, message, warning=warning)


_API_VERSIONS: Final = {k.kind: k.api_version for k in (WORKLOAD, *(i.kind_info for i in REGISTRY))}  # for
# objects read without an apiVersion: Workloads and every integration's kind


class EventRecorder:
    """core/v1 Events, sent from a background thread through their own token bucket so that they never
    delay admission writes (client-go's event broadcaster does the same); dropped when the queue is full."""

    def __init__(self, client: Client, *, component: str = "gitopsq-admission", qps: float = 20.0,
                 limit: int = 10_000) -> None:
        self.client, self.component = client, component
        self.bucket = TokenBucket(qps, int(max(1, qps * 2)))
        self.queue: queue.Queue[EventObject | None] = queue.Queue(limit)
        self.sent = self.dropped = 0
        self._thread = threading.Thread(target=self._run, name="event-recorder", daemon=True)
        self._thread.start()

    def emit(self, obj: Mapping[str, object], kind: str, reason: str, message: str, *, warning: bool = False
             ) -> None:
        m = meta(obj)
        now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        api_version = str(obj.get("apiVersion") or _API_VERSIONS.get(kind, ""))
        event: EventObject = {
                 "metadata": {"generateName": f"{m.get('name')}.", "namespace": m.get("namespace") or "default"},
                 "involvedObject": {"apiVersion": api_version, "kind": kind, "name": m.get("name"),
                                    "namespace": m.get("namespace"), "uid": m.get("uid")},
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
