"""The admission loop's settings (`LoopOptions`) and its crash-test hook (`FaultPoint`), both given to the loop
by its entry point."""

from __future__ import annotations

import os
import signal
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Final

from gitopsq.admission.topology import STRATEGIES, Settings
from gitopsq.manifests.config_model import AdmissionSettings, PodsReadySettings

FAULT_ENV: Final = "GITOPSQ_FAULT"  # test hook: SIGKILL the loop process at the named point (docs/admission-loop.md)


@dataclass(frozen=True, slots=True)
class RequeuingStrategy:
    """Kueue's ``waitForPodsReady.requeuingStrategy``: how a Workload evicted for not getting ready is queued again."""

    timestamp: str = "Eviction"  # queue order after such an eviction: "Eviction" time or "Creation" time
    backoff_limit_count: int | None = None  # requeues before deactivation; None: unlimited
    backoff_base_seconds: int = 60  # n-th requeue waits min(base * 2^(n-1), max) seconds
    backoff_max_seconds: int = 3600


@dataclass(frozen=True, slots=True)
class WaitForPodsReady:
    """Kueue's ``waitForPodsReady`` (all-or-nothing): an admitted Workload whose pods are not all ready within
    ``timeout`` seconds of admission (``recovery_timeout`` after losing readiness) is evicted and requeued.
    gitopsq keeps it off unless enabled (Kueue 0.19's v1beta2 configuration turns it on by default)."""

    enable: bool = False
    timeout: float = 1800.0
    recovery_timeout: float | None = None  # None: same as timeout; 0: no recovery timeout
    block_admission: bool = False  # while an admitted Workload is not ready, admit nothing
    requeuing_strategy: RequeuingStrategy = field(default_factory=RequeuingStrategy)


def wait_for_pods_ready(settings: PodsReadySettings) -> WaitForPodsReady:
    """gitopsq.yaml's ``admission.waitForPodsReady`` as the loop's setting."""
    return WaitForPodsReady(enable=settings.enable, timeout=settings.timeout,
                            recovery_timeout=settings.recovery_timeout, block_admission=settings.block_admission,
                            requeuing_strategy=RequeuingStrategy(
                                timestamp=settings.timestamp, backoff_limit_count=settings.backoff_limit_count,
                                backoff_base_seconds=settings.backoff_base_seconds,
                                backoff_max_seconds=settings.backoff_max_seconds))


@dataclass(frozen=True, slots=True)
class LoopOptions:
    qps: float = 50.0
    burst: int = 100
    resync: float = 10.0  # seconds between passes when nothing changes
    message_refresh: float = 60.0  # a pending message whose reason is unchanged is rewritten at most this often
    queue_status_interval: float = 2.0  # a ClusterQueue's status, at most this often (turning idle/busy: at once)
    queue_status_workers: int = 4  # queue status writes go out on their own pool; passes do not wait for them
    local_queue_status_interval: float = 5.0  # a LocalQueue's status, at most this often
    write_workers: int = 0  # concurrent status writes within a pass; 0: twice the burst (a pass's batch at once)
    queue_status_share: float = 1.0  # fraction of qps that queue status writes may use (their own kinds' buckets)
    queue_status_refresh_share: float = 0.2  # ... of which count/usage refreshes (not turning idle/busy or Active)
    pending_heads: int = 1  # per ClusterQueue, how many pending workloads (in queue order) get their reason written
    admissions_per_pass: int = 0  # admission writes per pass at most; 0: the Workload client's burst
    pass_interval: float = 0.1  # while work waits for tokens, a pass starts at most this often
    pass_rest: float = 2.0  # ... and after a slow pass this many times as long, short of a full bucket (`pace`)
    pending_share: float = 0.1  # fraction of qps for pending reasons while admissions are being written
    settings: Settings = field(default_factory=Settings)
    events: bool = True
    wait_for_pods_ready: WaitForPodsReady = field(default_factory=WaitForPodsReady)
    integrations: tuple[str, ...] = ("batch/job",)  # Kueue's framework names (integrations/registry.py)
    integration_recheck: float = 10.0  # seconds between looks for an enabled integration's CRD not yet served

    def writers(self) -> int:
        """Status writes a pass sends at once. The whole batch (up to twice the burst: the tokens banked and
        `pace.ahead`) by default: a pass waits for its slowest write, and on an API server saturated by other
        clients each write takes seconds, so with 16 at a time a 100-admission pass took 5 s (10 admissions/s
        while Kueue's benchmark runner created its 50,000 Workloads); the token bucket, not the pool, bounds the
        rate, and a write waiting for its token has reserved it, so the refill is not lost meanwhile."""
        return self.write_workers or max(1, 2 * self.burst)

    def connections(self) -> int:
        """Pooled connections the loop's client keeps: every watch (up to 24 kinds), the pass's writers, the
        queue status pool and the event sender may each hold one open at once."""
        return 24 + self.writers() + self.queue_status_workers + 1


def engine_settings(admission: AdmissionSettings) -> Settings:
    """gitopsq.yaml's ``admission`` block as the admission core's settings — what ``gitopsq simulate`` and
    ``gitopsq plan`` decide with, so the live loop decides the same way (Kueue's defaults when undeclared)."""
    if not admission.declared:
        return Settings()
    gates = dict(admission.feature_gates)
    default = Settings()
    return Settings(fair_sharing=admission.fair_sharing,
                    preemption_strategies=tuple(admission.preemption_strategies) or STRATEGIES,
                    inadmissible_requeue=admission.inadmissible_requeue,
                    fair_sharing_look_ahead=admission.fair_sharing_look_ahead,
                    preserve_flavor_scan_progress=gates.get("FlavorFungibilityPreserveScanProgress",
                                                            default.preserve_flavor_scan_progress),
                    prioritize_preemptors=gates.get("PrioritizePreemptorWorkloads", default.prioritize_preemptors))


def configured(options: LoopOptions, admission: AdmissionSettings) -> LoopOptions:
    """``options`` with every engine setting of gitopsq.yaml's ``admission`` block: fair sharing (on, its
    preemption strategies, look-ahead), the requeue mode, the feature gates and waitForPodsReady."""
    return replace(options, settings=engine_settings(admission),
                   wait_for_pods_ready=wait_for_pods_ready(admission.wait_for_pods_ready))


@dataclass(frozen=True, slots=True)
class FaultPoint:
    """Crash-safety tests: die at once (SIGKILL, no cleanup) when the loop reaches ``point``. Chosen once, by
    the entry point (`from_environ` in ``python -m gitopsq.admission_loop.loop``); None never fires."""

    point: str | None = None

    @classmethod
    def from_environ(cls, environ: Mapping[str, str] = os.environ) -> FaultPoint:
        return cls(environ.get(FAULT_ENV) or None)

    def armed(self, point: str) -> bool:
        return self.point is not None and self.point == point

    def __call__(self, point: str) -> None:
        if self.armed(point):
            os.kill(os.getpid(), signal.SIGKILL)


NO_FAULT: Final = FaultPoint()
