"""gitopsq's job webhook for JobSets on the full rig (real JobSet controller): rules from the integration registry,
a queued JobSet created suspended, an unlabelled one refused in a managed namespace, and the child Jobs the JobSet
controller creates there (no queue label) let through."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cluster_rig import get, rest, wait_for
from envtest_rig import FullCluster
from jobset_rig import JOBSETS, jobset, replicated

from gitopsq.admission_loop.integrations import select, webhook_kinds
from gitopsq.errors import ClusterError
from gitopsq.intake.jobs import JobWebhook, JobWebhookOptions
from gitopsq.webhook.certs import ensure_certificates, webhook_configurations
from gitopsq.webhook.server import WebhookServer

pytestmark = pytest.mark.envtest
MERGE = "application/merge-patch+json"


@pytest.fixture
def managed(jobset_cluster: FullCluster, tmp_path: Path) -> Iterator[str]:
    """A fresh managed namespace behind gitopsq's webhook registered for batch/job and JobSet."""
    marker = uuid.uuid4().hex[:8]
    full_cluster = jobset_cluster
    ns = full_cluster.new_namespace("js-hook")
    full_cluster.kubectl("label", "namespace", ns, f"gitopsq-webhook-test={marker}")
    certs = ensure_certificates(tmp_path / "certs", ["127.0.0.1"])
    server = WebhookServer("127.0.0.1:0", JobWebhook(JobWebhookOptions(managed_namespaces=frozenset({ns}))),
                           certs.cert_file, certs.key_file)
    server.start()
    api = rest(full_cluster)
    paths = []
    for config in webhook_configurations(certs.ca_pem, url=f"https://127.0.0.1:{server.port}", name=f"gq-{marker}",
                                         namespace_selector={"matchLabels": {"gitopsq-webhook-test": marker}},
                                         kinds=webhook_kinds(select(["batch/job", "jobset.x-k8s.io/jobset"]))):
        path = f"/apis/admissionregistration.k8s.io/v1/{config['kind'].lower()}s"
        api.request("POST", path, body=config)
        paths.append(f"{path}/{config['metadata']['name']}")
    try:
        yield ns
    finally:
        for path in paths:
            api.request("DELETE", path)
        server.close()
        full_cluster.kubectl("delete", "namespace", ns, "--wait=false", check=False)


def _create_until_suspended(cluster: FullCluster, manifest: dict[str, Any]) -> dict[str, Any]:
    """New webhook configurations take about a second to reach the API server: retry until the JobSet is
    stored suspended."""
    api, ns, name = rest(cluster), manifest["metadata"]["namespace"], manifest["metadata"]["name"]
    deadline = time.monotonic() + 15
    while True:
        created: dict[str, Any] = api.request("POST", JOBSETS.format(ns=ns), body=manifest)
        if created["spec"].get("suspend") is True or time.monotonic() > deadline:
            return created
        api.request("DELETE", f"{JOBSETS.format(ns=ns)}/{name}", query=[("propagationPolicy", "Background")])
        wait_for("the JobSet gone", lambda: name not in {j["metadata"]["name"] for j in
                                                        get(cluster, JOBSETS.format(ns=ns))["items"]})
        time.sleep(0.3)


def test_jobsets_are_suspended_or_refused_and_their_jobs_let_through(full_cluster: FullCluster,
                                                                     managed: str) -> None:
    """A labelled JobSet submitted running is stored suspended; an unlabelled JobSet is refused in the managed
    namespace, naming the label; once the queued JobSet is unsuspended, the JobSet controller's unlabelled child
    Jobs are admitted by the webhook in that namespace and are not suspended."""
    ns = managed
    created = _create_until_suspended(full_cluster, jobset(ns, "queued", replicated("w", replicas=2, pods=1, gpus=0),
                                                           suspend=False))
    assert created["spec"]["suspend"] is True
    bare = jobset(ns, "bare", replicated("w", replicas=1, pods=1, gpus=0), suspend=False)
    bare["metadata"]["labels"] = {}
    with pytest.raises(ClusterError, match=r"JobSets there need the label kueue\.x-k8s\.io/queue-name"):
        rest(full_cluster).request("POST", JOBSETS.format(ns=ns), body=bare)
    rest(full_cluster).request("PATCH", f"{JOBSETS.format(ns=ns)}/queued", body={"spec": {"suspend": False}},
                               content_type=MERGE)
    # The JobSet controller may have made its child Jobs while the JobSet was suspended (suspended with it) and
    # resumes them after the unsuspend: wait for both to be running, not for both merely to exist.
    def running_children() -> list[dict[str, Any]] | None:
        items = get(full_cluster, f"/apis/batch/v1/namespaces/{ns}/jobs")["items"]
        return items if len(items) == 2 and not any(j["spec"].get("suspend") for j in items) else None

    children = wait_for("two running child Jobs", running_children, timeout=30)
    for child in children:
        assert not child["spec"].get("suspend"), child["metadata"]["name"]
