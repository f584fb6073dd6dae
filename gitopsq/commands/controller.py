"""`gitopsq controller`: the long-running sync loop under leader election, with health and webhook endpoints."""

from __future__ import annotations

import os
import signal
import socket
import time
from typing import Any

import click

from gitopsq.errors import GitopsqError, UsageError


@click.command(name="controller")
@click.option("--repo", required=True, help="Git URL (https, ssh, file) or local path of the queue repository.")
@click.option("--branch", default="main", show_default=True, help="Branch (or tag) to follow.")
@click.option("--interval", default="30s", show_default=True, help="Poll interval (Go duration: 30s, 1m, ...).")
@click.option("--drift-interval", default="5m", show_default=True,
              help="How often a poll also compares every live object with Git and corrects drift.")
@click.option("--kubeconfig", type=click.Path(dir_okay=False), default=None,
              help="Kubeconfig file [default: in-cluster service account, $KUBECONFIG, ~/.kube/config].")
@click.option("--context", default=None, help="Kubeconfig context to use.")
@click.option("--sync-only", is_flag=True, help="Run the GitOps sync loop only.")
@click.option("--admission-only", is_flag=True, help="Run the admission loop only.")
@click.option("--webhook-secret-file", type=click.Path(dir_okay=False), default=None,
              help="File holding the HMAC secret of Git push webhooks (POST /hooks/git); without it webhooks "
                   "are refused.")
@click.option("--health-addr", default=":8081", show_default=True,
              help="Address of /healthz, /readyz and /hooks/git.")
@click.option("--metrics-addr", default=":8080", show_default=True, help="Prometheus metrics address ('' = off).")
@click.option("--name", "source_name", default=None, help="GitSource name [default: from the repository name].")
@click.option("--namespace", default="gitopsq-system", show_default=True,
              help="Namespace of the GitSource, the Lease and the Events.")
@click.option("--prune/--no-prune", default=True, show_default=True, help="Prune objects that left the repository.")
@click.option("--leader-elect/--no-leader-elect", default=True, show_default=True,
              help="Hold a coordination.k8s.io Lease so that only one replica writes.")
@click.option("--lease-name", default="gitopsq-controller", show_default=True)
@click.option("--lease-duration", default="15s", show_default=True)
@click.option("--renew-deadline", default="10s", show_default=True)
@click.option("--retry-period", default="2s", show_default=True)
@click.option("--identity", default=None, help="Leader-election identity [default: hostname_pid].")
@click.option("--audit-wal-dir", type=click.Path(file_okay=False), default=None,
              help="Enable the audit trail: sync records go to this write-ahead log, then to the audit branch.")
@click.option("--audit-repo", default=None, help="Repository holding the audit branch [default: --repo].")
@click.option("--cache-dir", type=click.Path(file_okay=False), default=None, help="Where remote mirrors live.")
@click.option("--log-format", type=click.Choice(["json", "text"]), default="json", show_default=True)
def command(*, repo: str, branch: str, interval: str, drift_interval: str, kubeconfig: str | None,
            context: str | None, sync_only: bool, admission_only: bool, webhook_secret_file: str | None,
            health_addr: str, metrics_addr: str,
            source_name: str | None, namespace: str, prune: bool, leader_elect: bool, lease_name: str,
            lease_duration: str, renew_deadline: str, retry_period: str, identity: str | None,
            audit_wal_dir: str | None, audit_repo: str | None, cache_dir: str | None, log_format: str) -> None:
    """Poll REPO (and sync at once on a signed webhook), validate, apply, report; one writer per Lease."""
    from pathlib import Path

    from gitopsq import logs
    from gitopsq.cluster.apply import KubeRest
    from gitopsq.cluster.kube import load_api_client
    from gitopsq.cluster.leader import LeaderElector, LeaseConfig
    from gitopsq.cluster.status import SourceRef
    from gitopsq.commands.apply import default_source_name
    from gitopsq.controller import Controller, HttpEndpoints, Runnable, SyncLoop, parse_duration
    from gitopsq.source import open_source
    from gitopsq.sync import Syncer, SyncOptions
    from gitopsq.webhook_git import GitWebhook, read_secret

    if sync_only and admission_only:
        raise UsageError("--sync-only and --admission-only exclude each other")
    if admission_only:
        raise UsageError("the admission loop is not part of this build yet; run with --sync-only")
    try:
        poll = parse_duration(interval)
        drift = parse_duration(drift_interval)
        lease = LeaseConfig(namespace, lease_name, identity or f"{socket.gethostname()}_{os.getpid()}",
                            parse_duration(lease_duration), parse_duration(renew_deadline),
                            parse_duration(retry_period))
    except ValueError as err:
        raise UsageError(str(err)) from err
    logs.configure(json=log_format == "json")
    log = logs.get("controller")
    secret = read_secret(webhook_secret_file) if webhook_secret_file else None

    source = open_source(repo, cache_dir=Path(cache_dir) if cache_dir else None)
    api_client = load_api_client(kubeconfig, context)
    rest = KubeRest(api_client)
    audit = None
    if audit_wal_dir:
        from gitopsq.audit.trail import AuditTrail

        audit = AuditTrail.open(audit_repo or repo, audit_wal_dir)
    syncer = Syncer(source, rest, SourceRef(namespace, source_name or default_source_name(repo)), url=source.display,
                    audit=audit)
    metrics = _Metrics(metrics_addr)
    loop = SyncLoop(syncer, SyncOptions(rev=branch, prune=prune), interval=poll, drift_interval=drift,
                    on_result=metrics.observe)
    runnables: list[Runnable] = [loop]  # the admission loop joins this list (issue 6)
    elector = LeaderElector(KubeRest(api_client), lease) if leader_elect else None
    controller = Controller(runnables, elector)
    webhook = GitWebhook(secret, loop.trigger, branch=branch)

    def ready() -> bool:
        if elector is not None:
            contact = elector.last_contact
            return contact is not None and time.monotonic() - contact < 3 * lease.lease_duration
        return loop.stats.passes > 0 and loop.stats.last_success is not None

    try:
        http = HttpEndpoints(health_addr, ready=ready, webhook=webhook)
    except (OSError, ValueError) as err:
        raise UsageError(f"cannot listen on --health-addr {health_addr}: {err}") from err
    http.start()

    def on_signal(signum: int, _: Any) -> None:
        log.info("shutting down", signal=signal.Signals(signum).name)
        controller.stop()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    if elector is not None:
        try:
            elector.ensure_namespace()
        except GitopsqError as err:  # the API may be down at start: the elector keeps trying
            log.warning("cannot ensure the lease namespace yet", error=str(err))
    log.info("controller started", repo=source.display, branch=branch, interval=poll, health=http.port,
             leader_election=leader_elect, identity=lease.identity)
    try:
        controller.run()
    finally:
        http.close()
        if audit is not None:
            audit.close()
        api_client.close()  # type: ignore[no-untyped-call]
        log.info("controller stopped")


class _Metrics:
    """Prometheus series of the sync loop; a no-op when the address is empty."""

    def __init__(self, address: str) -> None:
        self.enabled = bool(address)
        if not self.enabled:
            return
        from prometheus_client import Counter, Gauge, start_http_server

        host, _, port = address.rpartition(":")
        start_http_server(int(port), addr=host or "0.0.0.0")
        self.syncs = Counter("gitopsq_sync_total", "Sync passes by outcome", ["outcome"])
        self.last = Gauge("gitopsq_sync_last_success_timestamp_seconds", "Wall time of the last good pass")

    def observe(self, result: Any) -> None:
        if not self.enabled:
            return
        outcome = result if isinstance(result, str) else result.outcome
        self.syncs.labels(outcome).inc()
        if outcome in ("applied", "unchanged"):
            self.last.set_to_current_time()
