"""gitopsq's job webhook for Ray objects on the full rig (real KubeRay operator): rules and refusals from the
integration registry — a queued RayJob or RayCluster created suspended, a queued RayJob asking for autoscaling
refused with Kueue's reason, and the RayCluster KubeRay makes for an unsuspended RayJob let through unsuspended."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from cluster_rig import rest, wait_for
from envtest_rig import FullCluster
from job_webhook_rig import MERGE, create_until_suspended, managed_namespace
from ray_objects import RAYCLUSTERS, RAYJOBS, cluster_spec, raycluster, rayclusters, rayjob, worker_group

from gitopsq.admission_loop.integrations import Integration
from gitopsq.admission_loop.integrations.registry import owner_kinds, refusals
from gitopsq.errors import ClusterError
from gitopsq.intake.jobs import JobWebhookOptions

pytestmark = pytest.mark.envtest
RAY = ["batch/job", "ray.io/rayjob", "ray.io/raycluster"]


@pytest.fixture
def managed(kuberay_cluster: FullCluster, tmp_path: Path) -> Iterator[str]:
    """A fresh managed namespace behind gitopsq's webhook registered for batch/job and both Ray kinds, with the
    options the controller gives it (children's owner kinds, the integrations' refusals)."""
    def options(namespaces: frozenset[str], running: tuple[Integration, ...]) -> JobWebhookOptions:
        return JobWebhookOptions(managed_namespaces=namespaces, owner_kinds=owner_kinds(running),
                                 refusals=refusals(running))

    with managed_namespace(kuberay_cluster, tmp_path, "ray-hook", RAY, options) as ns:
        yield ns


def test_queued_ray_objects_are_suspended_autoscaling_refused_and_the_child_cluster_let_through(
        kuberay_cluster: FullCluster, managed: str) -> None:
    """A labelled RayCluster and RayJob submitted running are stored suspended; a labelled RayJob with in-tree
    autoscaling is refused naming the field; once the RayJob is unsuspended, the RayCluster KubeRay makes for it
    (the job's labels, queue name included) is let through and not suspended."""
    ns, cluster = managed, kuberay_cluster
    spec = cluster_spec(worker_group("w", replicas=1, gpus=0))
    created = create_until_suspended(cluster, RAYCLUSTERS.format(ns=ns), raycluster(ns, "standalone", spec,
                                                                                     suspend=None))
    assert created["spec"]["suspend"] is True
    job = create_until_suspended(cluster, RAYJOBS.format(ns=ns), rayjob(ns, "queued", spec, suspend=None))
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
