"""gitopsq's job webhook for TrainJobs on the full rig (real Trainer and JobSet controllers), its rules and owner
kinds from the integration registry: a queued TrainJob created suspended, an unlabelled one refused in a managed
namespace with its queue label copied into spec.labels, and the queue-labelled JobSet Trainer makes for it let
through as a managed child."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cluster_rig import get, rest, wait_for
from envtest_rig import FullCluster
from job_webhook_rig import MERGE, create_until_suspended, managed_namespace
from trainjob_objects import QUEUE_LABEL, TRAINJOBS, create_runtime, delete_runtime, torch_runtime, trainjob

from gitopsq.admission_loop.integrations import Integration
from gitopsq.admission_loop.integrations.registry import owner_kinds, spec_label_kinds
from gitopsq.errors import ClusterError
from gitopsq.intake.jobs import JobWebhookOptions

pytestmark = pytest.mark.envtest
FRAMEWORKS = ["batch/job", "jobset.x-k8s.io/jobset", "trainer.kubeflow.org/trainjob"]


@pytest.fixture
def managed(trainer_cluster: FullCluster, tmp_path: Path) -> Iterator[tuple[str, str]]:
    """(a fresh managed namespace behind gitopsq's webhook for batch/job, JobSet and TrainJob, a torch runtime)."""
    def options(namespaces: frozenset[str], running: tuple[Integration, ...]) -> JobWebhookOptions:
        return JobWebhookOptions(managed_namespaces=namespaces, owner_kinds=owner_kinds(running),
                                 spec_label_kinds=spec_label_kinds(running))

    runtime = f"torch-{uuid.uuid4().hex[:8]}"
    create_runtime(trainer_cluster, torch_runtime(runtime))
    try:
        with managed_namespace(trainer_cluster, tmp_path, "tj-hook", FRAMEWORKS, options) as ns:
            yield ns, runtime
    finally:
        delete_runtime(trainer_cluster, runtime)


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
    created = create_until_suspended(trainer_cluster, TRAINJOBS.format(ns=ns), manifest)
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
