"""The Job admission webhook as `gitopsq controller` serves it: certificates (given, or generated and shared through
a Secret, renewed hourly), the HTTPS server, and the repository policies it follows (docs/controller.md)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import cast

from gitopsq.admission_loop.integrations import Integration, select
from gitopsq.admission_loop.integrations.ancestry import managed_ancestor
from gitopsq.admission_loop.integrations.registry import owner_kinds, refusals, spec_label_kinds
from gitopsq.api.raw_objects import KubeObject
from gitopsq.cluster.apply import KubeRest
from gitopsq.controller.port import Log, ServedWebhook, WebhookWiring
from gitopsq.errors import ClusterError, GitopsqError, UsageError
from gitopsq.intake.jobs import JobWebhook, JobWebhookOptions
from gitopsq.manifests.object_rules import QUEUE_NAME_LABEL
from gitopsq.source.refnames import branch_ref
from gitopsq.sync.repo_config import job_policies
from gitopsq.webhook.certs import CertificateKeeper, default_cert_dir, service_hosts
from gitopsq.webhook.follower import PolicyFollower
from gitopsq.webhook.server import WebhookServer


def start_job_webhook(wiring: WebhookWiring) -> ServedWebhook:
    """Serve the Job webhook on ``--webhook-addr`` for the controller `Wiring` ``wiring`` (its flags, API client,
    source, stop event and closers); returns the running WebhookServer."""
    f = wiring.f
    directory = Path(f["webhook_cert_dir"]) if f["webhook_cert_dir"] else \
        default_cert_dir(Path(f["cache_dir"]) if f["cache_dir"] else None)
    hosts = ["localhost", "127.0.0.1"]
    if f["webhook_service"]:
        namespace, _, name = f["webhook_service"].rpartition("/")
        hosts = service_hosts(namespace or f["namespace"], name)
    secret = None
    if f["webhook_cert_secret"]:
        namespace, _, name = f["webhook_cert_secret"].rpartition("/")
        default_ns = f["webhook_service"].rpartition("/")[0] if f["webhook_service"] else ""
        secret = (namespace or default_ns or f["namespace"], name)
    generate = secret is not None or not (directory / "tls.crt").exists()
    keeper = CertificateKeeper(KubeRest(wiring.api_client), directory, hosts, secret=secret,
                               configuration=f["webhook_configuration"]) if generate else None
    renewal = CertificateRenewal(keeper, wiring.log, wiring.stopping) if keeper is not None else None
    if renewal is not None:
        renewal.keep(first=True)
    managed = frozenset(n.strip() for n in f["managed_namespaces"].split(",") if n.strip())
    try:
        running = select(getattr(wiring, "integrations", ()) or ())
        hook = JobWebhook(JobWebhookOptions(managed_namespaces=managed, owner_kinds=owner_kinds(running),
                                            spec_label_kinds=spec_label_kinds(running),
                                            refusals=refusals(running),
                                            managed_ancestor=ancestor_walk(KubeRest(wiring.api_client), running)))
        server = WebhookServer(f["webhook_addr"], hook, directory / "tls.crt", directory / "tls.key",
                               limits=getattr(wiring, "http_limits", None))
    except (OSError, ValueError) as err:
        raise UsageError(f"cannot serve the Job webhook on --webhook-addr {f['webhook_addr']}: {err}") from err
    server.start()
    wiring.closers.append(server.close)
    server.watch(wiring.stopping, 5.0)
    if wiring.source is not None:
        source = wiring.source
        path = f"/apis/gitopsq.dev/v1alpha1/namespaces/{f['namespace']}/gitsources/{wiring.source_name()}"
        follower = PolicyFollower(KubeRest(wiring.api_client), path, source, branch_ref(f["branch"]), hook,
                                  load=lambda commit: job_policies(source, commit))
        follower.start(wiring.stopping, min(wiring.poll, 30.0))
    if renewal is not None:
        threading.Thread(target=renewal.run, name="gitopsq-webhook-keeper", daemon=True).start()
    wiring.log.info("job webhook serving", port=server.port, managed_namespaces=sorted(managed),
                    cert_dir=str(directory))
    return server


def ancestor_walk(rest: KubeRest, running: tuple[Integration, ...]) -> Callable[[KubeObject], bool]:
    """Whether a job has a managed ancestor (ancestry.py), each owner read from the API server. An owner that
    cannot be read counts as not managed: the job is then suspended and waits for the loop (fail closed)."""
    kinds = {(i.group, i.kind): i for i in running}

    def lookup(group: str, kind: str, namespace: str, name: str) -> KubeObject | None:
        integration = kinds.get((group, kind))
        if integration is None:
            return None
        try:
            found = rest.request("GET", f"{integration.collection_path(namespace)}/{name}",
                                 obj=f"{kind}/{namespace}/{name}", retry=False)
        except ClusterError:  # not found, refused, unreachable
            return None
        return cast(KubeObject, found)

    return lambda job: bool((job.get("metadata") or {}).get("ownerReferences")) and \
        managed_ancestor(job, lookup, QUEUE_NAME_LABEL) is not None


class CertificateRenewal:
    """Keeps generated webhook certificates current: every 10 s while something is missing (the webhook
    configuration may be created after the pods), then hourly; a problem is logged when it changes."""

    def __init__(self, keeper: CertificateKeeper, log: Log, stopping: threading.Event) -> None:
        self.keeper = keeper
        self.log = log
        self.stopping = stopping
        self.problems: list[str] = []

    def keep(self, *, first: bool = False) -> None:
        try:
            _certs, problems = self.keeper.sync()
        except (GitopsqError, OSError, ValueError) as err:
            problems = [str(err)]
        if problems != self.problems or (first and problems):
            for problem in problems:
                self.log.warning("webhook certificate setup incomplete; retrying", problem=problem)
        self.problems = problems

    def run(self) -> None:
        while not self.stopping.wait(10.0 if self.problems else 3600.0):
            self.keep()
