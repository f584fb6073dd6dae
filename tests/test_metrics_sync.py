"""gitopsq's own series from the audit trail's status: backlog, last push, push failures (no cluster needed)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from prometheus_client import CollectorRegistry

from gitopsq.admission.topology import build_topology
from gitopsq.api.codec import decode
from gitopsq.audit.canonical import ChainHead
from gitopsq.audit.known_tip import RewindIncident
from gitopsq.audit.sink import TrailStatus
from gitopsq.metrics import SyncMetrics

V = "kueue.x-k8s.io/v1beta2"


def status(submitted: int, durable: int, pushed: int, error: str | None = None) -> TrailStatus:
    return TrailStatus(submitted, durable, pushed, ChainHead(), error, None)


def sample(metrics: SyncMetrics, name: str) -> float | None:
    return metrics.registry.get_sample_value(name)


@pytest.mark.parametrize(("samples", "pending", "last_push", "failures"), [
    pytest.param([(status(5, 5, 5), 100.0)], 0, 100.0, 0, id="first-sample-is-the-baseline"),
    pytest.param([(status(5, 5, 5), 100.0), (status(9, 8, 5), 110.0)], 4, 100.0, 0,
                 id="records-waiting-do-not-move-the-last-push"),
    pytest.param([(status(5, 5, 2), 100.0), (status(9, 9, 9), 120.0)], 0, 120.0, 0, id="a-push-moves-it"),
    pytest.param([(status(5, 5, 2), 100.0), (status(6, 6, 2, "unreachable"), 102.0),
                  (status(7, 7, 2, "unreachable"), 104.0), (status(8, 8, 2, "rejected"), 106.0)], 6, 100.0, 2,
                 id="each-distinct-error-counts-once"),
])
def test_audit_series_follow_the_trail_status(samples: list[tuple[TrailStatus, float]], pending: int,
                                              last_push: float, failures: int) -> None:
    """Pending records, the last push time and push failures as the alerts read them."""
    metrics = SyncMetrics(CollectorRegistry())
    for trail_status, now in samples:
        metrics.observe_audit(trail_status, now)
    assert sample(metrics, "gitopsq_audit_pending_records") == pending
    assert sample(metrics, "gitopsq_audit_last_push_timestamp_seconds") == last_push
    assert (sample(metrics, "gitopsq_audit_push_failures_total") or 0) == failures


def test_the_rewound_gauge_follows_the_incident() -> None:
    """gitopsq_audit_branch_rewound is 1 while the trail reports a rewind incident, 0 once it ends."""
    metrics = SyncMetrics(CollectorRegistry())
    metrics.observe_audit(status(5, 5, 5), 100.0)
    assert sample(metrics, "gitopsq_audit_branch_rewound") == 0
    incident = RewindIncident("gitopsq/audit", "a" * 40, ChainHead(9, "b" * 64), "c" * 40, ChainHead(3, "d" * 64),
                              "the branch no longer contains commit aaaaaaaaaaaa",
                              "refs/gitopsq/audit-recovery/20260301T120000Z-0123abcd", "2026-03-01T12:00:00Z")
    metrics.observe_audit(TrailStatus(6, 6, 6, ChainHead(), incident.message(), None, incident=incident), 102.0)
    assert sample(metrics, "gitopsq_audit_branch_rewound") == 1
    metrics.observe_audit(status(7, 7, 7), 104.0)
    assert sample(metrics, "gitopsq_audit_branch_rewound") == 0


def test_applied_revision_keeps_one_series_per_source() -> None:
    """Only the revision applied last is 1; the previous one's series goes away."""
    metrics = SyncMetrics(CollectorRegistry(), source="gitopsq-system/queues")

    class Result:
        def __init__(self, outcome: str, revision: str) -> None:
            self.outcome, self.revision = outcome, revision

    metrics.observe(Result("applied", "a" * 40))
    metrics.observe(Result("unchanged", "b" * 40))
    labels = {"source": "gitopsq-system/queues"}
    assert sample(metrics, "gitopsq_sync_applied_revision_info") is None
    assert metrics.registry.get_sample_value("gitopsq_sync_applied_revision_info",
                                             {**labels, "revision": "b" * 40}) == 1
    assert metrics.registry.get_sample_value("gitopsq_sync_applied_revision_info",
                                             {**labels, "revision": "a" * 40}) is None


def test_a_replica_that_stops_leading_drops_the_queue_state() -> None:
    """On losing the Lease the Kueue state gauges go (a follower runs no pass to keep them true) and
    kueue_build_info says follower; counters keep their leader-labelled totals."""
    from gitopsq import __version__
    from gitopsq.metrics import KueueMetrics

    metrics = KueueMetrics(CollectorRegistry(), replica_role="leader")
    topology = build_topology([decode(d).obj for d in (  # type: ignore[misc]
        {"apiVersion": V, "kind": "ClusterQueue", "metadata": {"name": "team-a"}, "spec": {"resourceGroups": []}},
        {"apiVersion": V, "kind": "LocalQueue", "metadata": {"name": "q", "namespace": "ns"},
         "spec": {"clusterQueue": "team-a"}})])
    tally = SimpleNamespace(pending=3, reserving=0, admitted=0, finished=1, reserved={}, used={})
    metrics.observe_queues(topology, {"team-a": tally}, {"ns/q": tally}, [("team-a", "Pending")] * 3,
                           {"team-a": 1})
    metrics.admitted_total.labels("team-a", "", "leader").inc()
    get = metrics.registry.get_sample_value
    inadmissible = {"cluster_queue": "team-a", "status": "inadmissible", "replica_role": "leader"}
    assert get("kueue_pending_workloads", inadmissible) == 3  # rendered from the pass's tallies when scraped
    assert get("kueue_local_queue_finished_workloads", {"name": "q", "namespace": "ns", "replica_role": "leader"}) == 1
    metrics.set_role("follower")
    assert get("kueue_pending_workloads", inadmissible) is None
    assert get("kueue_pending_workloads", {**inadmissible, "replica_role": "follower"}) is None
    assert get("kueue_local_queue_finished_workloads", {"name": "q", "namespace": "ns", "replica_role": "leader"}) \
        is None
    assert get("kueue_admitted_workloads_total", {"cluster_queue": "team-a", "priority_class": "",
                                                  "replica_role": "leader"}) == 1
    assert get("kueue_build_info", {"git_version": __version__, "replica_role": "follower"}) == 1
    assert get("kueue_build_info", {"git_version": __version__, "replica_role": "leader"}) is None
