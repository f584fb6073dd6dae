"""`gitopsq controller`: the sync loop and the admission loop under leader election, with health, metrics, the
Git push webhook and the Job admission webhook (docs/controller.md). Only the flags live here; the parts are built
and run by gitopsq.controller.wiring."""

from __future__ import annotations

from typing import Any

import click


@click.command(name="controller")
@click.option("--repo", default=None, help="Git URL (https, ssh, file) or local path of the queue repository "
                                           "[required unless --admission-only].")
@click.option("--branch", default="main", show_default=True,
              help="Branch to follow (refs/heads/NAME; a tag of that name is never followed).")
@click.option("--cluster", default="", help="Sync only this cluster's revision: a name from gitopsq.yaml's "
                                            "clusters: (docs/fleet.md) ['' = the whole repository, one cluster].")
@click.option("--interval", default="30s", show_default=True, help="Poll interval (Go duration: 30s, 1m, ...).")
@click.option("--drift-interval", default="5m", show_default=True,
              help="How often a poll also compares every live object with Git and corrects drift.")
@click.option("--kubeconfig", type=click.Path(dir_okay=False), default=None,
              help="Kubeconfig file [default: in-cluster service account, $KUBECONFIG, ~/.kube/config].")
@click.option("--context", default=None, help="Kubeconfig context to use.")
@click.option("--sync-only", is_flag=True, help="Run the GitOps sync loop only (no admission, no Job webhook).")
@click.option("--admission-only", is_flag=True, help="Run the admission loop (and Job webhook) only.")
@click.option("--integrations", default="batch/job", show_default=True,
              help="Job kinds the admission loop queues, by Kueue's framework names, comma-separated "
                   "(batch/job, jobset.x-k8s.io/jobset, trainer.kubeflow.org/trainjob, pod); a kind whose CRD is "
                   "not installed is skipped until it is.")
@click.option("--qps", default=50.0, show_default=True, type=float, help="Admission loop API requests per second.")
@click.option("--burst", default=100, show_default=True, type=int, help="Admission loop API request burst.")
@click.option("--webhook-secret-file", type=click.Path(dir_okay=False), default=None,
              help="File holding the HMAC secret of Git push webhooks (POST /hooks/git); without it webhooks "
                   "are refused.")
@click.option("--webhook-addr", default="", help="HTTPS address of the Job admission webhook ('' = off).")
@click.option("--webhook-cert-dir", type=click.Path(file_okay=False), default=None,
              help="tls.crt/tls.key of the Job webhook; generated here when absent or with --webhook-cert-secret.")
@click.option("--webhook-cert-secret", default=None,
              help="[NAMESPACE/]NAME of a Secret holding the generated CA and serving certificate, shared by "
                   "every replica.")
@click.option("--webhook-service", default=None, help="NAMESPACE/NAME of the webhook Service the certificate "
                                                      "must cover.")
@click.option("--webhook-configuration", default=None,
              help="Name of the Mutating/ValidatingWebhookConfiguration whose caBundle gitopsq writes.")
@click.option("--managed-namespaces", default="", help="Comma-separated namespaces where Jobs need a queue label.")
@click.option("--health-addr", default=":8081", show_default=True,
              help="Address of /healthz, /readyz and /hooks/git.")
@click.option("--metrics-addr", default=":8080", show_default=True, help="Prometheus metrics address ('' = off).")
@click.option("--http-header-timeout", default="10s", show_default=True, envvar="GITOPSQ_HTTP_HEADER_TIMEOUT",
              help="Every HTTP listener: time from a connection's start (TLS handshake included) or its last answer "
                   "to the end of the request's headers; then it is closed.")
@click.option("--http-body-timeout", default="30s", show_default=True, envvar="GITOPSQ_HTTP_BODY_TIMEOUT",
              help="Every HTTP listener: time to receive a request's body once its headers are in (then 408).")
@click.option("--http-max-connections", default=1000, show_default=True, type=int,
              envvar="GITOPSQ_HTTP_MAX_CONNECTIONS",
              help="Every HTTP listener: open connections at most; past it a new one is answered 503 and closed.")
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
              help="Enable the audit trail: records go to this write-ahead log, then to the audit branch.")
@click.option("--audit-repo", default=None, help="Repository holding the audit branch [default: audit.repository "
                                                 "of gitopsq.yaml, else --repo].")
@click.option("--audit-signing-key", type=click.Path(dir_okay=False), default=None,
              help="SSH private key that signs audit commits.")
@click.option("--cache-dir", type=click.Path(file_okay=False), default=None, help="Where remote mirrors live.")
@click.option("--log-format", type=click.Choice(["json", "text"]), default="json", show_default=True)
@click.option("--forge", type=click.Choice(["gitea", "github", "gitlab"]), default=None,
              help="Forge hosting --repo: commit statuses on each revision and approvals from its reviews.")
@click.option("--forge-url", default=None, help="Forge API base URL [GitHub and GitLab: their SaaS].")
@click.option("--forge-repo", default=None, help="OWNER/NAME of the repository on the forge (GitLab: group/project).")
@click.option("--forge-token-file", type=click.Path(dir_okay=False), default=None,
              help="File holding the forge token (a mounted Secret) [default: $GITOPSQ_FORGE_TOKEN].")
@click.option("--status-context", default="gitopsq/sync", show_default=True, help="Name of the commit status.")
@click.option("--status-url", default=None, help="Link shown with the commit status (a dashboard).")
@click.option("--notify-webhook", multiple=True, help="Generic JSON webhook for notifications (repeatable).")
@click.option("--notify-webhook-secret-file", type=click.Path(dir_okay=False), default=None,
              help="File holding the HMAC secret that signs generic webhook bodies (X-Gitopsq-Signature).")
@click.option("--notify-slack-url-file", type=click.Path(dir_okay=False), default=None,
              help="File holding a Slack-compatible incoming-webhook URL (its path is the secret).")
@click.option("--drift-notify-after", default=3, show_default=True, type=int,
              help="Notify when one object's drift is corrected this many times within an hour.")
def command(**flags: Any) -> None:
    """Sync REPO into the cluster and admit queued workloads; one writer per Lease, webhooks on every replica."""
    # Imported here for CLI start-up time: `gitopsq controller --help` need not load the Kubernetes client.
    from gitopsq.controller.wiring import Wiring

    Wiring(flags).run()
