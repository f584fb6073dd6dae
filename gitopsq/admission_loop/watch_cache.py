"""A watch-backed cache of the objects the admission loop reads.

- every request the loop makes (reads, writes, the opening request of a watch) takes a token first from the
  rate-limited `Client` (rate_limited.py), client-go style;
- `Informer`: one per watched kind (gitopsq.cluster.kinds, ``watched``). LIST (paged) then WATCH from the
  list's resourceVersion, with bookmarks; a watch that ends is resumed from the last resourceVersion seen; a
  410 Gone (the version fell out of etcd's window) or any broken stream that cannot resume means a fresh LIST,
  whose result replaces the store (objects deleted meanwhile disappear). Unreachable API → retry with backoff.
- `Cache`: the informers of one loop, one "something changed" event, per-resource generations so the loop
  can tell a topology change (queues, flavors) from workload churn. Job kinds are added by the integrations
  (`Cache.add`, integration_watch.py), each only once the API server serves it.

Our own writes are put into the store at once (`Cache.put`), keeping the newer of two resourceVersions, so
the next pass does not act on a stale copy before the watch catches up, unless the watch has already shown the
object deleted after the write (tombstones.py).

Objects are stored without ``metadata.managedFields`` (`slim`, as controller-runtime's
``TransformStripManagedFields`` offers controllers): nothing the loop reads is there, and for a finished Workload
they are over half of its parsed size (three managers: its creator, our status writes, whoever finished it).
Nothing is ever written back from the cache whole (status and spec writes are patches), so the fields survive on
the server.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TypeVar, cast

import orjson

from gitopsq import logs
from gitopsq.admission_loop.live_workload import LiveWorkload, Retire, View
from gitopsq.admission_loop.rate_limited import Client, StreamBody, WatchResponse
from gitopsq.admission_loop.tombstones import Tombstones, resource_version
from gitopsq.admission_loop.workload_index import WorkloadIndex
from gitopsq.api.raw_objects import KubeObject, ObjectList, WatchEvent, number, text
from gitopsq.cluster.apply import Backoff
from gitopsq.cluster.kinds import BY_PLURAL, WATCHED, Kind
from gitopsq.cluster.kube import ClusterUnavailable
from gitopsq.errors import ClusterError

_log = logs.get("cache")


T = TypeVar("T")
V = TypeVar("V")


def key_of(obj: KubeObject) -> str:
    meta = obj.get("metadata") or {}
    ns = meta.get("namespace")
    return f"{ns}/{meta.get('name')}" if ns else str(meta.get("name"))


_rv = resource_version


def slim(obj: KubeObject) -> KubeObject:
    """``obj`` without ``metadata.managedFields`` (the module docstring says why)."""
    meta = obj.get("metadata")
    if isinstance(meta, dict):
        meta.pop("managedFields", None)
    return obj


def newer(candidate: KubeObject, current: KubeObject | None) -> bool:
    """Whether ``candidate`` should replace ``current`` (etcd resourceVersions grow; unparsable ones win)."""
    return current is None or _rv(candidate) >= _rv(current) or _rv(current) == 0


def reshaped(new: KubeObject | None, old: KubeObject | None) -> bool:
    """Whether replacing ``old`` by ``new`` (None: absent) changes more than status: another object, or a new
    ``metadata.generation`` (the API server bumps it on spec changes only)."""
    if new is None or old is None:
        return new is not old
    a, b = new.get("metadata") or {}, old.get("metadata") or {}
    return (a.get("uid"), a.get("generation")) != (b.get("uid"), b.get("generation"))


class _ExpiredError(Exception):
    """The watch's resourceVersion is too old (410 Gone): relist."""


class Informer:
    """LIST + WATCH one resource into ``store`` on a daemon thread (see the module docstring)."""

    def __init__(self, client: Client, resource: Kind, on_change: Callable[[str], None], *,
                 watch_seconds: int = 240, view: View | None = None,
                 retire: Retire | None = None, index: WorkloadIndex | None = None) -> None:
        self.client, self.resource, self.on_change = client, resource, on_change
        self.path = resource.collection_path()
        # a kind with many objects of which few matter (Pods) is watched through its label selector only
        self._selector = [("labelSelector", resource.label_selector)] if resource.label_selector else []
        self.index = index  # update(key, raw, view) / clear(), under ``lock``
        self.store: dict[str, KubeObject] = {}
        # Decoded once per change, on the watch thread, instead of once per object per pass.
        self.view = view
        self.views: dict[str, LiveWorkload | None] = {}
        # Views ``retire`` says are done with (finished Workloads) are kept apart, so that a pass can walk the
        # live ones only: at the end of a long run almost every Workload is finished.
        self.retire = retire
        self.retired: dict[str, LiveWorkload] = {}
        self.lock = threading.Lock()
        self.synced = threading.Event()
        self.generation = 0  # bumped on every change
        self.shape = 0  # bumped when an object comes, goes or changes more than its status (`reshaped`)
        self.relists = 0
        self.tombstones = Tombstones()
        self.watch_seconds = watch_seconds
        self._stop = threading.Event()
        self._response: WatchResponse | None = None
        self._thread = threading.Thread(target=self._run, name=f"informer-{resource.plural}", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        self.signal_stop()
        self._thread.join(timeout=timeout)

    def signal_stop(self) -> None:
        """Ask the watch thread to end (it is a daemon: a thread stuck in a read does not hold the process)."""
        self._stop.set()
        response = self._response
        if response is not None:
            with contextlib.suppress(Exception):  # best effort: the socket may already be gone
                response.response.shutdown()

    def put(self, obj: KubeObject) -> None:
        obj = slim(obj)
        key = key_of(obj)
        decoded = self.view(obj) if self.view is not None else None
        with self.lock:
            old = self.store.get(key)
            if old is None and self.tombstones.hides(key, obj):
                return
            if newer(obj, old):
                self.store[key] = obj
                if self.view is not None:
                    self._set_view(key, decoded, obj)
                self.generation += 1
                self.shape += reshaped(obj, old)

    def _set_view(self, key: str, decoded: LiveWorkload | None, raw: KubeObject) -> None:
        """File a decoded view as live or retired, and in the index (the caller holds the lock)."""
        if self.index is not None:
            self.index.update(key, raw, decoded)
        if self.retire is not None and decoded is not None and self.retire(decoded):
            self.views.pop(key, None)
            self.retired[key] = decoded
        else:
            self.retired.pop(key, None)
            self.views[key] = decoded

    def forget(self, key: str) -> None:
        with self.lock:
            if self.index is not None:
                self.index.update(key, None, None)
            self.views.pop(key, None)
            self.retired.pop(key, None)
            if self.store.pop(key, None) is not None:
                self.generation += 1
                self.shape += 1

    def _run(self) -> None:
        rv: str | None = None
        delays: Iterator[float] = iter(())
        while not self._stop.is_set():
            try:
                if rv is None:
                    rv = self._list()
                rv = self._watch(rv)
                delays = iter(())  # a watch that worked resets the backoff
            except _ExpiredError:
                rv = None
            except ClusterError as err:
                if isinstance(err, ClusterError) and err.status == 410:
                    rv = None
                    continue
                if self._stop.is_set():
                    return
                delay = next(delays, None)
                if delay is None:
                    delays = iter(Backoff(initial=0.2, maximum=5.0, deadline=float("inf")).delays())
                    delay = 0.2
                _log.warning("watch failed; retrying", resource=self.resource.plural, error=str(err), delay=delay)
                self._stop.wait(delay)
            except Exception as err:
                if self._stop.is_set():
                    return
                _log.warning("watch stream broke; relisting", resource=self.resource.plural, error=repr(err))
                rv = None
                self._stop.wait(0.2)

    def _list(self) -> str:
        items: list[KubeObject] = []
        token, rv = "", ""
        while True:
            query = [("limit", "1000")] + ([("continue", token)] if token else []) + self._selector
            answer = cast(ObjectList, self.client.request("GET", self.path, query=query))
            items.extend(slim(o) for o in answer.get("items") or [])
            meta = answer.get("metadata") or {}
            rv = rv or meta.get("resourceVersion") or ""
            token = str(meta.get("continue") or "")
            if not token:
                break
        kind = self.resource.plural
        views = {key_of(o): self.view(o) for o in items} if self.view is not None else {}
        with self.lock:
            self.tombstones.bury(self.store.keys() - {key_of(o) for o in items}, int(rv) if rv.isdigit() else 0)
            self.store = {key_of(o): o for o in items}
            self.views, self.retired = {}, {}
            if self.index is not None:
                self.index.clear()
            for key, decoded in views.items():
                self._set_view(key, decoded, self.store[key])
            self.generation += 1
            self.shape += 1
            self.relists += 1
        self.synced.set()
        self.on_change(kind)
        return rv

    def _watch(self, rv: str) -> str:
        query = [("watch", "1"), ("resourceVersion", rv), ("allowWatchBookmarks", "true"),
                 ("timeoutSeconds", str(self.watch_seconds)), *self._selector]
        response = self.client.open_stream(self.path, query, self.watch_seconds + 30.0)
        self._response = response
        try:
            for event in _events(response.response):
                if self._stop.is_set():
                    return rv
                kind, obj = event.get("type"), event.get("object") or {}
                if kind == "ERROR":
                    if number(obj, "code") == 410:  # the object is a Status
                        raise _ExpiredError()
                    raise ClusterUnavailable(text(obj, "message") or "watch error", status=number(obj, "code") or None)
                rv = (obj.get("metadata") or {}).get("resourceVersion") or rv
                if kind == "BOOKMARK":
                    continue
                slim(obj)
                key = key_of(obj)
                decoded = self.view(obj) if self.view is not None and kind != "DELETED" else None
                with self.lock:
                    old = self.store.get(key)
                    if kind == "DELETED":
                        if self.index is not None:
                            self.index.update(key, None, None)
                        self.tombstones.bury([key], _rv(obj))
                        self.store.pop(key, None)
                        self.views.pop(key, None)
                        self.retired.pop(key, None)
                        self.shape += old is not None
                    elif newer(obj, old):
                        self.store[key] = obj
                        if self.view is not None:
                            self._set_view(key, decoded, obj)
                        self.shape += reshaped(obj, old)
                    self.generation += 1
                self.on_change(self.resource.plural)
        finally:
            self._response = None
            response.response.release_conn()
        return rv


def _events(raw: StreamBody) -> Iterator[WatchEvent]:
    """JSON watch events from a chunked response body, one per line."""
    buffer = b""
    for chunk in raw.stream(amt=None, decode_content=True):
        buffer += chunk
        if b"\n" not in chunk:
            continue
        *lines, buffer = buffer.split(b"\n")  # one split per chunk: a busy watch delivers many events at once
        for line in lines:
            if line.strip():
                yield orjson.loads(line)


class Cache:
    """The informers of one admission loop."""

    def __init__(self, client: Client, names: Sequence[str] = WATCHED, *, watch_seconds: int = 240,
                 views: Mapping[str, View] | None = None,
                 retire: Mapping[str, Retire] | None = None,
                 indexes: Mapping[str, WorkloadIndex] | None = None) -> None:
        self.client = client
        self.changed = threading.Event()
        self._settings = (watch_seconds, dict(views or {}), dict(retire or {}), dict(indexes or {}))
        self._started = False
        self._adding = threading.Lock()
        self.informers: dict[str, Informer] = {}
        for name in names:
            self._informer(BY_PLURAL[name])

    def _informer(self, kind: Kind) -> Informer:
        watch_seconds, views, retire, indexes = self._settings
        informer = Informer(self.client, kind, self._on_change, watch_seconds=watch_seconds,
                            view=views.get(kind.plural), retire=retire.get(kind.plural),
                            index=indexes.get(kind.plural))
        self.informers = {**self.informers, kind.plural: informer}  # a new dict: readers iterate the old one
        return informer

    def add(self, kind: Kind) -> bool:
        """Watch one more kind (an integration's, once its CustomResourceDefinition is served); started at once
        when the cache runs. False when it is already watched."""
        with self._adding:
            if kind.plural in self.informers:
                return False
            informer = self._informer(kind)
            if self._started:
                informer.start()
            return True

    def synced(self, name: str) -> bool:
        """Whether ``name`` is watched and its first LIST has landed."""
        informer = self.informers.get(name)
        return informer is not None and informer.synced.is_set()

    def _on_change(self, _: str) -> None:
        self.changed.set()

    def start(self) -> None:
        with self._adding:
            self._started = True
            for informer in self.informers.values():
                informer.start()

    def stop(self, timeout: float = 5.0) -> None:
        """Stop every watch at once, then wait for them together, ``timeout`` seconds at most in all (one
        after the other, ten watches stuck in reads on a loaded server took up to ten times as long)."""
        for informer in self.informers.values():
            informer.signal_stop()
        deadline = time.monotonic() + timeout
        for informer in self.informers.values():
            informer.stop(timeout=max(0.0, deadline - time.monotonic()))

    def wait_synced(self, timeout: float | None = None) -> bool:
        deadline = None if timeout is None else time.monotonic() + timeout
        for informer in self.informers.values():
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            if not informer.synced.wait(left):
                return False
        return True

    def items(self, name: str) -> list[KubeObject]:
        informer = self.informers[name]
        with informer.lock:
            return list(informer.store.values())

    def views(self, name: str, decode: Callable[[KubeObject], V]) -> list[V]:
        """Every object of ``name`` decoded: kept up to date by the watch when the cache was built with a
        view for it, else decoded now."""
        informer = self.informers[name]
        if informer.view is None:
            return [decode(o) for o in self.items(name)]
        with informer.lock:  # the informer's view is ``decode`` (the loop builds both from read_workload)
            return cast(list[V], [*informer.views.values(), *informer.retired.values()])

    def live_views(self, name: str, decode: Callable[[KubeObject], V]) -> list[V]:
        """Like `views`, without the ones the cache's ``retire`` predicate set aside (finished Workloads)."""
        informer = self.informers[name]
        if informer.view is None:
            return [v for v in (decode(o) for o in self.items(name))
                    if informer.retire is None or v is None or not informer.retire(cast(LiveWorkload, v))]
        with informer.lock:
            return cast(list[V], list(informer.views.values()))

    def watches(self, name: str) -> bool:
        """Whether this cache has an informer for ``name``."""
        return name in self.informers

    def indexed(self, name: str, read: Callable[[WorkloadIndex], T]) -> T | None:
        """``read(index)`` under the informer's lock (None when ``name`` has no index): a consistent snapshot."""
        informer = self.informers[name]
        if informer.index is None:
            return None
        with informer.lock:
            return read(informer.index)

    def get(self, name: str, key: str) -> KubeObject | None:
        informer = self.informers[name]
        with informer.lock:
            return informer.store.get(key)

    def put(self, name: str, obj: KubeObject) -> None:
        self.informers[name].put(obj)

    def forget(self, name: str, key: str) -> None:
        self.informers[name].forget(key)

    def generation(self, names: Sequence[str]) -> tuple[int, ...]:
        return tuple(self.informers[n].generation for n in names if n in self.informers)

    def shape(self, names: Sequence[str]) -> tuple[int, ...]:
        """Like `generation`, but moved only by objects coming, going or changing spec (not status)."""
        return tuple(self.informers[n].shape for n in names if n in self.informers)
