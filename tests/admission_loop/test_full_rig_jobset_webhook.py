"""gitopsq's job webhook for JobSets on the full rig (real JobSet controller): rules from the integration registry,
a queued JobSet created suspended, an unlabelled one refused in a managed namespace, and the child Jobs the JobSet
controller creates there (no queue label) let through."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cluster_rig import get, rest, wait_for
from envtest_rig import FullCluster
from job_webhook_rig import MERGE, create_until_suspended, managed_namespace
from jobset_rig import JOBSETS, jobset, replicated

from gitopsq.errors import ClusterError

pytestmark = pytest.mark.envtest


@pytest.fixture
def managed(jobset_cluster: FullCluster, tmp_path: Path) -> Iterator[str]:
    """A fresh managed namespace behind gitopsq's webhook registered for batch/job and JobSet."""
    with managed_namespace(jobset_cluster, tmp_path, "js-hook", ["batch/job", "jobset.x-k8s.io/jobset"]) as ns:
        yield ns


def test_jobsets_are_suspended_or_refused_and_their_jobs_let_through(full_cluster: FullCluster,
                                                                     managed: str) -> None:
    """A labelled JobSet submitted running is stored suspended; an unlabelled JobSet is refused in the managed
    namespace, naming the label; once the queued JobSet is unsuspended, the JobSet controller's unlabelled child
    Jobs are admitted by the webhook in that namespace and are not suspended."""
    ns = managed
    created = create_until_suspended(full_cluster, JOBSETS.format(ns=ns),
                                     jobset(ns, "queued", replicated("w", replicas=2, pods=1, gpus=0), suspend=False))
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
