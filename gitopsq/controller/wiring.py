"""`gitopsq controller`'s parts built from its flags: the sources, the sync and admission runnables, leader
election, metrics, the audit trail, the HTTP endpoints and the Job webhook; run until SIGTERM/SIGINT, then torn
down in reverse order (docs/controller.md)."""

from __future__ import annotations

import os
import signal
import socket
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from types import FrameType
from typing import Any

from prometheus_client import GC_COLLECTOR, PLATFORM_COLLECTOR, PROCESS_COLLECTOR, CollectorRegistry

from gitopsq import logs
from gitopsq.admission_loop.integrations import parse as parse_integrations
from gitopsq.admission_loop.loop import AdmissionLoop, LoopOptions
from gitopsq.audit import AuditTrail, audit_target, settings_from_config
from gitopsq.cluster.apply import KubeRest
from gitopsq.cluster.kube import load_api_client
from gitopsq.cluster.leader import LeaderElector, LeaseConfig
from gitopsq.cluster.status import SourceRef
from gitopsq.controller.audit_report import AuditReport
from gitopsq.controller.cluster_names import exposed_registry
from gitopsq.controller.cluster_scope import check_cluster, cluster_validator
from gitopsq.controller.endpoints import HttpEndpoints
from gitopsq.controller.forge_wiring import forge_reporter
from gitopsq.controller.heap import HeapKeeper
from gitopsq.controller.job_webhook import start_job_webhook
from gitopsq.controller.leader_audit import LeaderAudit
from gitopsq.controller.manager import Controller, LeadershipHook, RoleHook, Runnable, WakingRunnable, parse_duration
from gitopsq.controller.port import ServedWebhook
from gitopsq.errors import GitopsqError, UsageError
from gitopsq.forge.note_source import with_notes
from gitopsq.forge.reviews import approvals_reader
from gitopsq.metrics import KueueMetrics, SyncMetrics, serve
from gitopsq.serving import ServerLimits
from gitopsq.source import open_source
from gitopsq.source.port import HistorySource
from gitopsq.source.refnames import branch_ref
from gitopsq.sync.audit_sink import SyncAuditRecords
from gitopsq.sync.labels import default_source_name
from gitopsq.sync.repo_config import audit_config, repo_config
from gitopsq.sync.runnable import SyncLoop
from gitopsq.sync.syncer import Syncer
from gitopsq.sync.values import SyncOptions, SyncResult
from gitopsq.webhook.push import GitWebhook, read_secret

_log = logs.get("controller")


def _duration(text: str) -> float:
    try:
        return parse_duration(text)
    except ValueError as err:
        raise UsageError(str(err)) from err


class Wiring:
    """Builds the controller from the flags, runs it until SIGTERM/SIGINT, and tears it down."""

    def __init__(self, flags: dict[str, Any]) -> None:
        self.f = flags
        if flags["sync_only"] and flags["admission_only"]:
            raise UsageError("--sync-only and --admission-only exclude each other")
        self.sync_on, self.admission_on = not flags["admission_only"], not flags["sync_only"]
        if self.sync_on and not flags["repo"]:
            raise UsageError("--repo is required (unless --admission-only)")
        if flags["audit_wal_dir"] and not (flags["repo"] or flags["audit_repo"]):
            raise UsageError("--audit-wal-dir needs --audit-repo when there is no --repo")
        # --integrations: Kueue's framework names, checked here so that a typo is a usage error at start
        self.integrations = tuple(i.framework for i in parse_integrations(flags.get("integrations") or ""))
        if flags["webhook_addr"] and not self.admission_on:
            raise UsageError("--webhook-addr serves the Job webhook of the admission loop: not with --sync-only")
        self.poll, self.drift = _duration(flags["interval"]), _duration(flags["drift_interval"])
        try:
            self.lease = LeaseConfig(flags["namespace"], flags["lease_name"],
                                     flags["identity"] or f"{socket.gethostname()}_{os.getpid()}",
                                     _duration(flags["lease_duration"]), _duration(flags["renew_deadline"]),
                                     _duration(flags["retry_period"]))
        except ValueError as err:
            raise UsageError(str(err)) from err
        try:  # --http-*: the limits of every HTTP listener (health and push webhook, metrics, Job webhook)
            self.http_limits = ServerLimits(
                header_timeout=_duration(flags.get("http_header_timeout") or "10s"),
                body_timeout=_duration(flags.get("http_body_timeout") or "30s"),
                max_connections=int(flags.get("http_max_connections") or 1000))
        except ValueError as err:
            raise UsageError(f"--http-*: {err}") from err

    def run(self) -> None:
        f = self.f
        logs.configure(json=f["log_format"] == "json")
        self.log = _log
        self.stopping = threading.Event()
        HeapKeeper().start(self.stopping)  # the collector kept off the caches (controller/heap.py)
        self.api_client = load_api_client(f["kubeconfig"], f["context"])
        self.closers: list[Callable[[], object]] = []
        try:
            self._build()
            self._serve()
        finally:
            self.stopping.set()
            for close in reversed(self.closers):
                try:
                    close()
                except Exception as err:  # shutdown goes on whatever one part says
                    self.log.warning("shutdown step failed", error=str(err))
            self.api_client.close()  # type: ignore[no-untyped-call]
            self.log.info("controller stopped")

    # -- parts -------------------------------------------------------------------------------------------------

    def _build(self) -> None:
        f = self.f
        # Our own registry: the default one describes collectors by collecting them, which refuses Kueue's
        # gauge kueue_finished_workloads beside the counter kueue_finished_workloads_total.
        registry = self.registry = CollectorRegistry()
        for collector in (PROCESS_COLLECTOR, PLATFORM_COLLECTOR, GC_COLLECTOR):
            registry.register(collector)
        self.source: HistorySource | None = None
        self.cluster = str(f.get("cluster") or "")
        if self.sync_on:
            self.source = open_source(f["repo"], cache_dir=Path(f["cache_dir"]) if f["cache_dir"] else None)
            check_cluster(self.source, branch_ref(f["branch"]), self.cluster)  # undeclared: exit 2, names listed
        self.elector = LeaderElector(KubeRest(self.api_client), self.lease) if f["leader_elect"] else None
        self.sync_metrics = SyncMetrics(registry, source=f"{f['namespace']}/{self.source_name()}")
        self.kueue_metrics = KueueMetrics(registry, replica_role="follower" if self.elector else "standalone")
        hooks: list[LeadershipHook] = [RoleHook(self.kueue_metrics)] if self.elector else []
        self.audit: LeaderAudit | None = None
        if f["audit_wal_dir"]:
            self.audit = LeaderAudit(self._open_trail, self.cluster)
            hooks.append(self.audit)
        runnables: list[Runnable] = []
        self.loop: SyncLoop | None = None
        if self.sync_on and self.source is not None:
            self.loop = self._sync_loop(self.source)
            runnables.append(self.loop)
        self.admission: AdmissionLoop | None = None
        self.configured_revision: str | None = None  # whose gitopsq.yaml `admission` block the loop follows
        if self.admission_on:
            admission = self.admission = AdmissionLoop(self.api_client,
                                                       LoopOptions(qps=f["qps"], burst=f["burst"],
                                                                   integrations=self.integrations),
                                                       metrics=self.kueue_metrics, audit=self.audit)
            runnables.append(WakingRunnable(admission, lambda: admission.cache.changed))
            if self.loop is not None:
                try:
                    self._configure_admission(self.loop.syncer.store.read().last_applied)
                except GitopsqError as err:  # API down at start: the first sync pass configures it
                    self.log.warning("cannot read the applied revision yet", error=str(err))
        self.controller = Controller(runnables, self.elector, hooks=hooks)
        if f["metrics_addr"]:
            try:
                server = serve(f["metrics_addr"], exposed_registry(registry, self.cluster), self.http_limits)
            except (OSError, ValueError) as err:
                raise UsageError(f"cannot listen on --metrics-addr {f['metrics_addr']}: {err}") from err
            self.closers.append(server.shutdown)
        if self.audit is not None:
            self.audit_report = AuditReport(self.loop.syncer.store if self.loop is not None else None)
            threading.Thread(target=self._sample_audit, name="gitopsq-audit-metrics", daemon=True).start()

    def source_name(self) -> str:
        return str(self.f["source_name"] or (default_source_name(self.f["repo"]) if self.f["repo"] else ""))

    def _sync_loop(self, source: HistorySource) -> SyncLoop:
        f = self.f
        self.reporter = forge_reporter(f, source.display, self.registry)
        self.closers.append(self.reporter.close)
        # the forge's reviews (read once per merge for validation and the record), backed by signed notes
        reviews = with_notes(self.reporter.forge, source)
        syncer = Syncer(source, KubeRest(self.api_client), SourceRef(f["namespace"], self.source_name()),
                        url=source.display, cluster=self.cluster,
                        validator=self.reporter.validator(cluster_validator(self.cluster, approvals_reader(reviews))))
        if self.audit is not None:
            syncer.audit = SyncAuditRecords(self.audit, source, syncer.validated_at, forge=reviews)

        return SyncLoop(syncer, SyncOptions(rev=branch_ref(f["branch"]), prune=f["prune"]), interval=self.poll,
                        drift_interval=self.drift, on_result=self._on_sync)

    def _on_sync(self, result: SyncResult | str) -> None:
        self.sync_metrics.observe(result)
        self.reporter.observe(result)  # commit status and notifications: queued, never waited for
        if getattr(result, "outcome", None) in ("applied", "unchanged"):
            self._configure_admission(getattr(result, "revision", None))

    def _configure_admission(self, revision: str | None) -> None:
        """The admission loop follows gitopsq.yaml's ``admission`` block of the applied revision (read at start
        from the GitSource's lastAppliedRevision, then after every sync that applies a new one)."""
        if self.admission is None or self.source is None or not revision or revision == self.configured_revision:
            return
        config = repo_config(self.source, revision)
        if config is None:  # the sync never applies a revision whose gitopsq.yaml does not parse
            return
        self.configured_revision = revision
        self.admission.configure(config.admission)

    def _open_trail(self) -> AuditTrail:
        f = self.f
        config = audit_config(self.source, branch_ref(f["branch"])) if self.source is not None else {}
        target = f["audit_repo"] or audit_target(config, f["repo"])
        overrides = {"signing_key": f["audit_signing_key"]} if f["audit_signing_key"] else {}
        return AuditTrail.open(target, f["audit_wal_dir"], settings=settings_from_config(config, **overrides))

    def _sample_audit(self) -> None:
        assert self.audit is not None
        while not self.stopping.wait(2.0):
            status = self.audit.status()
            if status is not None:
                self.sync_metrics.observe_audit(status, time.time())
                self.audit_report.observe(status, datetime.now(UTC))  # status.audit, AuditBranchRewound

    def _ready(self) -> bool:
        if self.webhook is not None and not self.webhook.serving():
            return False
        if self.elector is not None:
            contact = self.elector.last_contact
            return contact is not None and time.monotonic() - contact < 3 * self.lease.lease_duration
        synced = self.loop is not None and self.loop.stats.passes > 0 and self.loop.stats.last_success is not None
        return synced or (self.admission is not None and self.admission.synced.is_set())

    def _serve(self) -> None:
        f = self.f
        self.webhook: ServedWebhook | None = start_job_webhook(self) if f["webhook_addr"] else None
        secret = read_secret(f["webhook_secret_file"]) if f["webhook_secret_file"] else None
        git_hook = GitWebhook(secret, self.loop.trigger, branch=f["branch"]) if self.loop is not None else None
        try:
            http = HttpEndpoints(f["health_addr"], ready=self._ready, webhook=git_hook, limits=self.http_limits)
        except (OSError, ValueError) as err:
            raise UsageError(f"cannot listen on --health-addr {f['health_addr']}: {err}") from err
        http.start()
        self.closers.append(http.close)

        def on_signal(signum: int, _: FrameType | None) -> None:
            self.log.info("shutting down", signal=signal.Signals(signum).name)
            self.controller.stop()

        signal.signal(signal.SIGTERM, on_signal)
        signal.signal(signal.SIGINT, on_signal)
        if self.elector is not None:
            try:
                self.elector.ensure_namespace()
            except GitopsqError as err:  # the API may be down at start: the elector keeps trying
                self.log.warning("cannot ensure the lease namespace yet", error=str(err))
        self.log.info("controller started", repo=self.source.display if self.source else None, branch=f["branch"],
                      cluster=self.cluster or None,
                      sync=self.sync_on, admission=self.admission_on, interval=self.poll, health=http.port,
                      webhook=self.webhook.port if self.webhook else None, leader_election=f["leader_elect"],
                      identity=self.lease.identity)
        self.controller.run()
