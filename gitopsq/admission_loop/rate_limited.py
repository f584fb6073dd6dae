"""A rate-limited API client: every request the admission loop makes takes a token first, client-go style.

`TokenBucket`: ``qps`` tokens per second, at most ``burst`` saved up. `Client`: `KubeRest` behind one bucket per
resource kind (as controller-runtime clients have), counting requests by verb and kind; also opens watches.
"""

from __future__ import annotations

import copy
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Protocol, cast

from kubernetes import client as k8s_client
from kubernetes.client.exceptions import ApiException

from gitopsq.api.raw_objects import JsonObject
from gitopsq.cluster.apply import Backoff, KubeRest, RequestBody
from gitopsq.cluster.kube import api_errors


class StreamBody(Protocol):
    """The urllib3 response of a watch, read as it streams."""

    def stream(self, amt: int | None = ..., decode_content: bool | None = ...) -> Iterator[bytes]: ...

    def shutdown(self) -> None: ...

    def release_conn(self) -> None: ...


class WatchResponse(Protocol):
    """What `Client.open_stream` answers (the Kubernetes client's REST response)."""

    @property
    def response(self) -> StreamBody: ...


class TokenBucket:
    """``qps`` tokens per second, up to ``burst`` banked; `take` blocks until a token is free."""

    def __init__(self, qps: float, burst: int, *, clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        if qps <= 0 or burst < 1:
            raise ValueError("qps must be > 0 and burst >= 1")
        self.qps, self.burst = qps, burst
        self._clock, self._sleep = clock, sleep
        self._tokens = float(burst)
        self._last = clock()
        self._lock = threading.Lock()
        self.waited = 0.0  # seconds spent blocked (reported by the benchmark)
        self.unused = 0.0  # refill discarded at the burst: budget nobody used (the loop's progress log)

    def try_take(self) -> bool:
        """Take a token if one is banked, without waiting."""
        with self._lock:
            self._refill()
            if self._tokens < 1.0:
                return False
            self._tokens -= 1.0
            return True

    def level(self) -> float:
        """Tokens banked right now (negative while requests queue for tokens)."""
        with self._lock:
            self._refill()
            return self._tokens

    def _refill(self) -> None:
        """Add what accrued since the last look, up to the burst (the lock held)."""
        now = self._clock()
        tokens = self._tokens + (now - self._last) * self.qps
        self._tokens = min(self.burst, tokens)
        self.unused += tokens - self._tokens
        self._last = now

    def take(self) -> None:
        with self._lock:
            self._refill()
            self._tokens -= 1.0
            wait = -self._tokens / self.qps if self._tokens < 0 else 0.0
        if wait > 0:
            self.waited += wait
            self._sleep(wait)


def resource_of(path: str) -> str:
    """The resource (plural) a REST path addresses: ``/apis/g/v/namespaces/ns/workloads/w/status`` → workloads."""
    parts = [p for p in path.split("/") if p]
    rest = parts[2:] if parts[:1] == ["api"] else parts[3:]
    if len(rest) >= 3 and rest[0] == "namespaces":
        return rest[2]
    return rest[0] if rest else ""


class Client:
    """`KubeRest` behind token buckets; counts requests by verb (for the benchmark and metrics).

    One bucket per resource kind, each ``qps``/``burst``: the limit controller-runtime clients live under
    (each GroupVersionKind gets its own REST client and token bucket), so gitopsq's Workload writes get the
    same budget as Kueue's, and queue status never starves admissions. ``per_kind=False``: one shared bucket.
    """

    def __init__(self, api_client: k8s_client.ApiClient, *, qps: float = 50.0, burst: int = 100,
                 backoff: Backoff | None = None, per_kind: bool = True, connections: int = 48) -> None:
        configuration = copy.copy(api_client.configuration)
        # Every thread that may hold a request open at once (the watches, the write pools, the event sender)
        # needs its own pooled connection: past the pool's size urllib3 opens a fresh TLS connection per request
        # and throws it away after.
        configuration.connection_pool_maxsize = connections
        api_client = k8s_client.ApiClient(configuration)
        self.api_client = api_client
        self.rest = KubeRest(api_client, backoff=backoff or Backoff(deadline=30.0))
        self.qps, self.burst, self.per_kind = qps, burst, per_kind
        self.bucket = TokenBucket(qps, burst)  # workloads' (or the shared one)
        self.buckets: dict[str, TokenBucket] = {"workloads": self.bucket}
        self.counts: dict[str, int] = {}
        self.by_kind: dict[str, int] = {}  # "PATCH workloads": n
        self._lock = threading.Lock()

    def bucket_for(self, path: str) -> TokenBucket:
        kind = resource_of(path) if self.per_kind else "workloads"
        with self._lock:
            bucket = self.buckets.get(kind)
            if bucket is None:
                bucket = self.buckets[kind] = TokenBucket(self.qps, self.burst)
        return bucket

    @property
    def waited(self) -> float:
        """Seconds requests spent blocked on their buckets, all kinds together."""
        return sum(b.waited for b in list(self.buckets.values()))

    def request(self, method: str, path: str, *, query: Sequence[tuple[str, str]] = (), body: object = None,
                content_type: str = "application/json", obj: str | None = None) -> JsonObject:
        """One request; the decoded answer (an object, a list, a discovery document: the caller names it)."""
        self.bucket_for(path).take()
        with self._lock:
            self.counts[method] = self.counts.get(method, 0) + 1
            kind = f"{method} {resource_of(path)}"
            self.by_kind[kind] = self.by_kind.get(kind, 0) + 1
        answer = self.rest.request(method, path, query=query, body=cast(RequestBody, body), content_type=content_type,
                                   obj=obj, retry=False)
        return cast(JsonObject, answer)

    def open_stream(self, path: str, query: Sequence[tuple[str, str]], read_timeout: float) -> WatchResponse:
        """A GET whose body is read incrementally (a watch); the caller closes ``.response``."""
        self.bucket_for(path).take()
        with self._lock:
            self.counts["WATCH"] = self.counts.get("WATCH", 0) + 1
        with api_errors(obj=path):
            request = self.api_client.param_serialize("GET", path, query_params=list(query),
                                                      header_params={"Accept": "application/json"},
                                                      auth_settings=["BearerToken"])
            response = self.api_client.call_api(*request, _request_timeout=(10.0, read_timeout))
            if response.status != 200:
                response.read()  # type: ignore[no-untyped-call]
                raise ApiException(http_resp=response)
        return cast(WatchResponse, response)
