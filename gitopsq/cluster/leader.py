"""Leader election on a ``coordination.k8s.io/v1`` Lease, so that of several replicas exactly one writes.

The protocol is client-go's (tools/leaderelection), re-implemented small:
1. A candidate reads the Lease. It may take it when it does not exist (create), when ``holderIdentity`` is empty
   (released), or when the record has not changed for ``lease_duration`` *as measured on the candidate's own
   monotonic clock since it first saw that record* (no trust in other machines' clocks).
2. Taking and renewing are writes with the Lease's ``resourceVersion``: of two candidates racing, the API
   server lets one win and answers 409 to the other.
3. The leader renews every ``retry_period``. If it has not renewed successfully within ``renew_deadline``
   (< lease_duration) it stops leading at once, before any other replica may take over.
4. On shutdown the leader releases: empty holder, ``leaseDurationSeconds: 1``, so a standby takes over at once.
Work that writes checks `is_leading()` immediately before writing.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import cast

from gitopsq import logs
from gitopsq.cluster.apply import KubeRest, RequestBody
from gitopsq.cluster.edge_objects import Lease, LeaseSpec
from gitopsq.cluster.kube import ClusterConflict, ClusterForbidden, ClusterNotFound
from gitopsq.errors import ClusterError

_log = logs.get("leader")


@dataclass(frozen=True, slots=True)
class LeaseConfig:
    namespace: str
    name: str
    identity: str
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0

    def __post_init__(self) -> None:
        if not 0 < self.retry_period < self.renew_deadline < self.lease_duration:
            raise ValueError("leader election needs 0 < retry_period < renew_deadline < lease_duration")


def _micro_time(now: datetime) -> str:
    return now.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class LeaderElector:
    """One candidate. `step()` is one round of the protocol; `run()` loops it until stopped."""

    def __init__(self, rest: KubeRest, config: LeaseConfig, *, monotonic: Callable[[], float] = time.monotonic,
                 wall: Callable[[], datetime] | None = None) -> None:
        self.rest = rest
        self.config = config
        self._monotonic = monotonic
        self._wall = wall or (lambda: datetime.now(UTC))
        self._path = f"/apis/coordination.k8s.io/v1/namespaces/{config.namespace}/leases/{config.name}"
        self._observed: tuple[str, float] | None = None  # (resourceVersion, local time first seen)
        self._renewed_at: float | None = None  # local time of our last successful acquire/renew
        self.last_contact: float | None = None  # local time of the last successful round trip (readiness)
        self.transitions = 0
        self._lock = threading.Lock()

    # -- state -----------------------------------------------------------------------------------------------

    def is_leading(self) -> bool:
        """True while our last successful renewal is younger than the renew deadline."""
        with self._lock:
            renewed = self._renewed_at
        return renewed is not None and self._monotonic() - renewed < self.config.renew_deadline

    # -- protocol --------------------------------------------------------------------------------------------

    def step(self) -> bool:
        """One attempt to acquire or renew; returns whether we lead afterwards."""
        try:
            if not self._try():
                self._drop()  # someone else holds it: stop at once, whatever the deadline says
        except ClusterError as err:  # transient: keep leading until the renew deadline passes
            _log.info("lease round failed", lease=self.config.name, error=str(err))
        if not self.is_leading():
            self._drop()
        return self.is_leading()

    def _drop(self) -> None:
        with self._lock:
            self._renewed_at = None

    def _try(self) -> bool:
        now = self._monotonic()
        try:
            lease = self._request("GET", self._path)
        except ClusterNotFound:
            return self._create(now)
        self.last_contact = now
        spec: LeaseSpec = lease.get("spec") or {}
        version = lease["metadata"]["resourceVersion"]
        if self._observed is None or self._observed[0] != version:
            self._observed = (version, now)
        holder = spec.get("holderIdentity") or ""
        duration = float(spec.get("leaseDurationSeconds") or self.config.lease_duration)
        mine = holder == self.config.identity
        if holder and not mine and now - self._observed[1] < duration:
            return False
        new_spec = spec.copy()
        stamp = _micro_time(self._wall())
        if not mine:
            new_spec["acquireTime"] = stamp
            new_spec["leaseTransitions"] = int(spec.get("leaseTransitions") or 0) + (1 if holder else 0)
        new_spec.update({"holderIdentity": self.config.identity, "renewTime": stamp,
                         "leaseDurationSeconds": int(self.config.lease_duration)})
        body: Lease = {**lease, "spec": new_spec}
        try:
            updated = self._request("PUT", self._path, body=body)
        except ClusterConflict:
            return False
        self._won(updated, now, acquired=not mine)
        return True

    def _create(self, now: float) -> bool:
        stamp = _micro_time(self._wall())
        body: Lease = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                "metadata": {"name": self.config.name, "namespace": self.config.namespace},
                "spec": {"holderIdentity": self.config.identity, "acquireTime": stamp, "renewTime": stamp,
                         "leaseDurationSeconds": int(self.config.lease_duration), "leaseTransitions": 0}}
        collection = self._path.rsplit("/", 1)[0]
        try:
            created = self._request("POST", collection, body=body)
        except ClusterConflict:
            return False
        self._won(created, now, acquired=True)
        return True

    def _won(self, lease: Lease, now: float, *, acquired: bool) -> None:
        self._observed = (lease["metadata"]["resourceVersion"], now)
        self.last_contact = now
        with self._lock:
            self._renewed_at = now
        if acquired:
            self.transitions += 1
            _log.info("became leader", lease=self.config.name, identity=self.config.identity)

    def release(self) -> None:
        """Give the lease up (if we hold it) so a standby takes over without waiting for expiry."""
        was_leading = self.is_leading()
        with self._lock:
            self._renewed_at = None
        if not was_leading:
            return
        try:
            lease = self._request("GET", self._path)
            spec: LeaseSpec = lease.get("spec") or {}
            if spec.get("holderIdentity") != self.config.identity:
                return
            spec.update({"holderIdentity": "", "leaseDurationSeconds": 1, "renewTime": _micro_time(self._wall())})
            self._request("PUT", self._path, body={**lease, "spec": spec})
            _log.info("released lease", lease=self.config.name)
        except ClusterError as err:
            _log.warning("could not release lease; it expires on its own", error=str(err))

    def _request(self, method: str, path: str, body: RequestBody = None) -> Lease:
        answer = self.rest.request(method, path, body=body, obj=f"Lease/{self.config.name}", retry=False)
        return cast(Lease, answer)

    def ensure_namespace(self) -> None:
        """Create the Lease's namespace if missing; 403 is fine (least-privilege RBAC may only read namespaces,
        and the namespace then exists already: the chart installs into it)."""
        with contextlib.suppress(ClusterConflict, ClusterForbidden):
            self.rest.request("POST", "/api/v1/namespaces", body={"apiVersion": "v1", "kind": "Namespace",
                                                                  "metadata": {"name": self.config.namespace}},
                              retry=False)

    def run(self, stop: threading.Event, on_change: Callable[[bool], None]) -> None:
        """Loop `step` every retry period until ``stop``; call ``on_change(leading)`` on every transition."""
        leading = False
        while not stop.is_set():
            now_leading = self.step()
            if now_leading != leading:
                leading = now_leading
                on_change(leading)
            stop.wait(self.config.retry_period)
        if leading:
            on_change(False)
        self.release()
