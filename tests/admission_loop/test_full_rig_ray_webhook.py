"""gitopsq's job webhook for Ray objects on the full rig (real KubeRay operator): rules and refusals from the
integration registry — a queued RayJob or RayCluster created suspended, a queued RayJob asking for autoscaling
refused with Kueue's reason, and the RayCluster KubeRay makes for an unsuspended RayJob let through unsuspended."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cluster_rig import rest, wait_for
from envtest_rig import FullCluster
from ray_objects import RAYCLUSTERS, RAYJOBS, cluster_spec, raycluster, rayclusters, rayjob, worker_group

from gitopsq.admission_loop.integrations import select, webhook_kinds
from gitopsq.admission_loop.integrations.registry import owner_kinds, refusals
from gitopsq.errors import ClusterError
from gitopsq.intake.jobs import JobWebhook, JobWebhookOptions
from gitopsq.webhook.certs import ensure_certificates, webhook_configurations
from gitopsq.webhook.server import WebhookServer

pytestmark = pytest.mark.envtest
MERGE = "application/merge-patch+json"
RAY = ["batch/job", "ray.io/rayjob", "ray.io/raycluster"]


@pytest.fixture
def managed(kuberay_cluster: FullCluster, tmp_path: Path) -> Iterator[str]:
    """A fresh managed namespace behind gitopsq's webhook registered for batch/job and both Ray kinds, with the
    options the controller gives it (children's owner kinds, the integrations' refusals)."""
    marker = uuid.uuid4().hex[:8]
    cluster = kuberay_cluster
    ns = cluster.new_namespace("ray-hook")
    cluster.kubectl("label", "namespace", ns, f"gitopsq-webhook-test={marker}")
    certs = ensure_certificates(tmp_path / "certs", ["127.0.0.1"])
    running = select(RAY)
    hook = JobWebhook(JobWebhookOptions(managed_namespaces=frozenset({ns}), owner_kinds=owner_kinds(running),
                                        refusals=refusals(running)))
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
        yield ns
    finally:
        for path in paths:
            api.request("DELETE", path)
        server.close()
        cluster.kubectl("delete", "namespace", ns, "--wait=false", check=False)


def _create_until_suspended(cluster: FullCluster, collection: str, manifest: dict[str, Any]) -> dict[str, Any]:
    """New webhook configurations take about a second to reach the API server: retry until the object is stored
    suspended."""
    api, name = rest(cluster), manifest["metadata"]["name"]
    deadline = time.monotonic() + 15
    while True:
        created: dict[str, Any] = api.request("POST", collection, body=manifest)
        if created["spec"].get("suspend") is True or time.monotonic() > deadline:
            return created
        api.request("DELETE", f"{collection}/{name}", query=[("propagationPolicy", "Background")])
        wait_for("the object gone", lambda: name not in {o["metadata"]["name"] for o in
                                                        api.request("GET", collection)["items"]})
        time.sleep(0.3)


def test_queued_ray_objects_are_suspended_autoscaling_refused_and_the_child_cluster_let_through(
        kuberay_cluster: FullCluster, managed: str) -> None:
    """A labelled RayCluster and RayJob submitted running are stored suspended; a labelled RayJob with in-tree
    autoscaling is refused naming the field; once the RayJob is unsuspended, the RayCluster KubeRay makes for it
    (the job's labels, queue name included) is let through and not suspended."""
    ns, cluster = managed, kuberay_cluster
    spec = cluster_spec(worker_group("w", replicas=1, gpus=0))
    created = _create_until_suspended(cluster, RAYCLUSTERS.format(ns=ns), raycluster(ns, "standalone", spec,
                                                                                     suspend=None))
    assert created["spec"]["suspend"] is True
    job = _create_until_suspended(cluster, RAYJOBS.format(ns=ns), rayjob(ns, "queued", spec, suspend=None))
    assert job["spec"]["suspend"] is True
    scaling = rayjob(ns, "scaling", cluster_spec(worker_group("w", replicas=1, gpus=0), autoscaling=True),
                     suspend=None)
    with pytest.raises(ClusterError, match=r"spec\.rayClusterSpec\.enableInTreeAutoscaling"):
        rest(cluster).request("POST", RAYJOBS.format(ns=ns), body=scaling)
    rest(cluster).request("PATCH", f"{RAYJOBS.format(ns=ns)}/queued", body={"spec": {"suspend": False}},
                          content_type=MERGE)
    child = wait_for("KubeRay's RayCluster for the job", lambda: next(
        (c for c in rayclusters(cluster, ns) if c["metadata"]["name"] != "standalone"), None), timeout=30)
    assert child["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "queue"
    assert not child["spec"].get("suspend"), "the webhook suspended a RayJob's own cluster"
