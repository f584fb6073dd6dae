"""The admission loop's ports: what the pass, the job reconciler and the queue status writer ask of the watch
cache, the writer, the metrics and the audit sink. The loop wires the real ones (watch_cache.Cache,
writer.Writer, gitopsq.metrics.KueueMetrics, a gitopsq.audit sink); tests may hand in their own.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Protocol, TypeVar

from gitopsq.admission.topology import Topology
from gitopsq.admission_loop.live_workload import LiveWorkload
from gitopsq.admission_loop.workload_index import WorkloadIndex
from gitopsq.api.raw_objects import KubeObject
from gitopsq.audit.records import Record

T = TypeVar("T")
V = TypeVar("V")


class WatchCache(Protocol):
    """The objects the loop reads, by resource plural (gitopsq.cluster.kinds), kept current by watches."""

    def items(self, name: str) -> list[KubeObject]: ...

    def get(self, name: str, key: str) -> KubeObject | None: ...

    def put(self, name: str, obj: KubeObject) -> None: ...

    def forget(self, name: str, key: str) -> None: ...

    def views(self, name: str, decode: Callable[[KubeObject], V]) -> list[V]: ...

    def live_views(self, name: str, decode: Callable[[KubeObject], V]) -> list[V]: ...

    def indexed(self, name: str, read: Callable[[WorkloadIndex], T]) -> T | None: ...

    def watches(self, name: str) -> bool: ...

    def generation(self, names: Sequence[str]) -> tuple[int, ...]: ...

    def shape(self, names: Sequence[str]) -> tuple[int, ...]: ...


class QueueTally(Protocol):
    """One queue's Workload counts and usage of a pass (queue_status._Tally), as the metrics read them."""

    pending: int
    reserving: int
    admitted: int
    finished: int
    reserved: dict[tuple[str, str], int]  # (flavor, resource) -> milli-units
    used: dict[tuple[str, str], int]


class TokenLevel(Protocol):
    """A token bucket as the pass reads it, to size its batch of writes."""

    burst: int

    def level(self) -> float: ...


class WorkloadWriter(Protocol):
    """Every write of the loop; each answer goes into the cache at once."""

    writes: int

    @property
    def workload_bucket(self) -> TokenLevel | None: ...

    def workload_status(self, raw: Mapping[str, object], status: Mapping[str, object]) -> KubeObject: ...

    def patch(self, resource: str, path: str, body: Mapping[str, object], obj: str) -> KubeObject: ...

    def create(self, resource: str, path: str, body: Mapping[str, object], obj: str) -> KubeObject: ...

    def delete(self, resource: str, path: str, key: str, obj: str) -> None: ...

    def queue_status(self, resource: str, path: str, status: Mapping[str, object]) -> KubeObject: ...

    def event(self, obj: Mapping[str, object], kind: str, reason: str, message: str, *, warning: bool = False
              ) -> None: ...


class AdmissionMetrics(Protocol):
    """Kueue's admission metrics (gitopsq.metrics.KueueMetrics)."""

    def attempt(self, admitted: int, inadmissible: int, seconds: float) -> None: ...

    def admitted(self, w: LiveWorkload, cq: str, waited: float, *, checks: bool, reserved: bool = True,
                 checks_waited: float | None = None) -> None: ...

    def ready(self, w: LiveWorkload, queued_waited: float, admitted_waited: float) -> None: ...

    def evicted(self, w: LiveWorkload, kind: str, reason: str, message: str) -> None: ...

    def workload_finished(self, w: LiveWorkload) -> None: ...

    def observe_queues(self, topology: Topology, cq_tally: Mapping[str, QueueTally], lq_tally: Mapping[str, QueueTally],
                       reasons: Iterable[tuple[str, str]], finished: Mapping[str, int], *,
                       active: Mapping[str, int] | None = None, lq_active: Mapping[str, int] | None = None,
                       shares: tuple[Mapping[str, tuple[str, float]], Mapping[str, float]] | None = None
                       ) -> None: ...


class DecisionSink(Protocol):
    """The part of a gitopsq.audit AuditSink the pass uses: queue records, then wait once for a group."""

    def submit(self, record: Record) -> int: ...

    def wait_durable(self, ticket: int) -> None: ...
