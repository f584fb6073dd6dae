"""Pending reasons: workloads held by a stopped LocalQueue each get their own reason and never take the place of
the ClusterQueue's real head, which gets its reason even when it can never fit."""

from __future__ import annotations

import pytest
from cluster_rig import apply, cond, create_job, job_manifest, queue_setup, wait_for, workload_of
from envtest_rig import Envtest

from gitopsq.admission_loop.decisions import Decisions, PendingReason, QueuePosition, heads

pytestmark = pytest.mark.envtest


def test_held_workloads_never_take_a_head_slot() -> None:
    """`heads` leaves out workloads their queue holds: the next one in queue order is the head."""
    order = {"a/held": ("cq", -9, 1.0), "a/real": ("cq", 0, 5.0), "a/later": ("cq", 0, 6.0)}
    decisions = Decisions(pending=dict.fromkeys(order, PendingReason("WaitingForQuota", "m")),
                          order={key: QueuePosition(*position) for key, position in order.items()})
    assert heads(decisions, 1) == {"a/held"}
    assert heads(decisions, 1, {"a/held"}) == {"a/real"}


@pytest.mark.usefixtures("admission")
def test_stopped_queue_workloads_and_the_real_head_all_get_reasons(kueue_clean: Envtest) -> None:
    """Older, higher-priority workloads of a stopped LocalQueue get their Suspended reason, and the real head of
    the ClusterQueue (a Job that can never fit its 1-CPU quota) still gets Kueue's quota message."""
    env = kueue_clean
    ns = env.new_namespace("heads")
    stopped = (f"apiVersion: kueue.x-k8s.io/v1beta2\nkind: LocalQueue\nmetadata: {{name: stopped, namespace: {ns}}}\n"
               f"spec: {{clusterQueue: heads-cq, stopPolicy: Hold}}\n")
    apply(env, queue_setup(ns, "heads-cq", cpu="1") + "---\n" + stopped)
    for i in range(3):
        create_job(env, job_manifest(ns, f"held-{i}", "stopped", {"cpu": "500m"}))
    for i in range(3):
        wait_for(f"held-{i} workload", lambda i=i: workload_of(env, ns, f"held-{i}"))
    create_job(env, job_manifest(ns, "too-big", "queue", {"cpu": "2"}))
    big = wait_for("the real head's reason", lambda: (c := cond(workload_of(env, ns, "too-big"), "QuotaReserved"))
                   and c["status"] == "False" and c)
    assert big["reason"] == "Inadmissible" or big["reason"].startswith("Waiting") or "insufficient" in big["message"]
    assert "cpu" in big["message"], big
    for i in range(3):
        held = wait_for(f"held-{i} reason", lambda i=i: (c := cond(workload_of(env, ns, f"held-{i}"),
                                                                   "QuotaReserved")) and c)
        assert held["status"] == "False"
        assert held["message"] == "LocalQueue stopped is inactive", held
