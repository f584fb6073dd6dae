"""gitopsq's job webhook for TrainJobs on the full rig (real Trainer and JobSet controllers), its rules and owner
kinds from the integration registry: a queued TrainJob created suspended, an unlabelled one refused in a managed
namespace with its queue label copied into spec.labels, and the queue-labelled JobSet Trainer makes for it let
through as a managed child."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cluster_rig import get, rest, wait_for
from envtest_rig import FullCluster
from trainjob_objects import QUEUE_LABEL, TRAINJOBS, create_runtime, delete_runtime, torch_runtime, trainjob

from gitopsq.admission_loop.integrations import select, webhook_kinds
from gitopsq.admission_loop.integrations.registry import owner_kinds, spec_label_kinds
from gitopsq.errors import ClusterError
from gitopsq.intake.jobs import JobWebhook, JobWebhookOptions
from gitopsq.webhook.certs import ensure_certificates, webhook_configurations
from gitopsq.webhook.server import WebhookServer

pytestmark = pytest.mark.envtest
MERGE = "application/merge-patch+json"
FRAMEWORKS = ["batch/job", "jobset.x-k8s.io/jobset", "trainer.kubeflow.org/trainjob"]


@pytest.fixture
def managed(trainer_cluster: FullCluster, tmp_path: Path) -> Iterator[tuple[str, str]]:
    """(a fresh managed namespace behind gitopsq's webhook for batch/job, JobSet and TrainJob, a torch runtime)."""
    marker = uuid.uuid4().hex[:8]
    cluster = trainer_cluster
    ns = cluster.new_namespace("tj-hook")
    cluster.kubectl("label", "namespace", ns, f"gitopsq-webhook-test={marker}")
    runtime = f"torch-{marker}"
    create_runtime(cluster, torch_runtime(runtime))
    running = select(FRAMEWORKS)
    certs = ensure_certificates(tmp_path / "certs", ["127.0.0.1"])
    hook = JobWebhook(JobWebhookOptions(managed_namespaces=frozenset({ns}), owner_kinds=owner_kinds(running),
                                        spec_label_kinds=spec_label_kinds(running)))
    server = WebhookServer("127.0.0.1:0", hook, certs.cert_file, certs.key_file)
    server.start()
    api = rest(cluster)
    paths = []
    for config in webhook_configurations(certs.ca_pem, url=f"https://127.0.0.1:{server.port}", name=f"gq-{marker}",
                                         namespace_selector={"matchLabels": {"gitopsq-webhook-test": marker}},
                                         kinds=webhook_kinds(running)):
        path = f"/apis/admissionregistration.k8s.io/v1/{config['kind'].lower()}s"
        api.request("POST", path, body=config)
        paths.append(f"{path}/{config['metadata']['name']}")
    try:
        yield ns, runtime
    finally:
        for path in paths:
            api.request("DELETE", path)
        server.close()
        cluster.kubectl("delete", "namespace", ns, "--wait=false", check=False)
        delete_runtime(cluster, runtime)


def _create_until_suspended(cluster: FullCluster, manifest: dict[str, Any]) -> dict[str, Any]:
    """New webhook configurations take about a second to reach the API server: retry until the TrainJob is
    stored suspended."""
    api, ns, name = rest(cluster), manifest["metadata"]["namespace"], manifest["metadata"]["name"]
    deadline = time.monotonic() + 15
    while True:
        created: dict[str, Any] = api.request("POST", TRAINJOBS.format(ns=ns), body=manifest)
        if created["spec"].get("suspend") is True or time.monotonic() > deadline:
            return created
        api.request("DELETE", f"{TRAINJOBS.format(ns=ns)}/{name}", query=[("propagationPolicy", "Background")])
        wait_for("the TrainJob gone", lambda: name not in {j["metadata"]["name"] for j in
                                                          get(cluster, TRAINJOBS.format(ns=ns))["items"]})
        time.sleep(0.3)


def test_trainjobs_are_suspended_or_refused_and_their_jobset_let_through(trainer_cluster: FullCluster,
                                                                         managed: tuple[str, str]) -> None:
    """A labelled TrainJob submitted running is stored suspended with its queue label copied into spec.labels (as
    Kueue's webhook does); an unlabelled one is refused in the managed namespace, naming the label; once the
    queued TrainJob is unsuspended, the JobSet Trainer made for it (queue label included) runs and its Job is not
    suspended."""
    ns, runtime = managed
    manifest = trainjob(ns, "queued", runtime, nodes=1, gpus=0, suspend=False)
    manifest["spec"]["trainer"]["resourcesPerNode"] = {"requests": {"cpu": "1"}}
    manifest["spec"]["labels"] = {"team": "ml"}
    created = _create_until_suspended(trainer_cluster, manifest)
    assert created["spec"]["suspend"] is True
    assert created["spec"]["labels"] == {"team": "ml", QUEUE_LABEL: "queue"}, "queue label not copied to spec"
    bare = trainjob(ns, "bare", runtime, nodes=1, gpus=0, suspend=False)
    bare["metadata"]["labels"] = {}
    with pytest.raises(ClusterError, match=r"TrainJobs there need the label kueue\.x-k8s\.io/queue-name"):
        rest(trainer_cluster).request("POST", TRAINJOBS.format(ns=ns), body=bare)
    rest(trainer_cluster).request("PATCH", f"{TRAINJOBS.format(ns=ns)}/queued", body={"spec": {"suspend": False}},
                                  content_type=MERGE)

    def running_jobset() -> dict[str, Any] | None:
        items = get(trainer_cluster, f"/apis/jobset.x-k8s.io/v1alpha2/namespaces/{ns}/jobsets")["items"]
        jobs = get(trainer_cluster, f"/apis/batch/v1/namespaces/{ns}/jobs")["items"]
        ok = len(items) == 1 and items[0]["spec"].get("suspend") is False and len(jobs) == 1 and \
            not jobs[0]["spec"].get("suspend")
        return dict(items[0]) if ok else None

    child = wait_for("Trainer's JobSet and its Job running", running_jobset, timeout=60)
    assert child["metadata"]["labels"][QUEUE_LABEL] == "queue"
    assert [r["kind"] for r in child["metadata"]["ownerReferences"]] == ["TrainJob"]
