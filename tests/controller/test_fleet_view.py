"""How `gitopsq status` shows a fleet (pure): rows per cluster and source, notes for drift and waiting queues,
the JSON document, and the exit code ladder (unreachable over troubled over in sync)."""

from __future__ import annotations

from gitopsq.controller.fleet import ClusterView, QueueView, SourceView, Target, targets
from gitopsq.controller.fleet_view import exit_code, to_json, to_text

SHA = "0123456789abcdef" * 2 + "01234567"


def source(cluster: str, *, ready: str = "True", drift: tuple[tuple[str, str], ...] | None = (),
           error: str = "") -> SourceView:
    return SourceView("gitopsq-system", "queues", cluster, "file:///q", SHA, SHA, ready, "ReconciliationSucceeded",
                      "", drift, error)


def cluster(name: str, *sources: SourceView, queues: tuple[QueueView, ...] = ()) -> ClusterView:
    return ClusterView(Target(f"{name}.yaml", None), True, "", sources, queues)


def test_targets_are_every_kubeconfig_with_every_context() -> None:
    """Two kubeconfigs and two contexts are four targets; none given is the default kubeconfig's current one."""
    assert [(t.kubeconfig, t.context) for t in targets(["a", "b"], ["x", "y"])] == [
        ("a", "x"), ("a", "y"), ("b", "x"), ("b", "y")]
    assert [(t.kubeconfig, t.context) for t in targets([], [])] == [(None, None)]


def test_exit_code_ladder() -> None:
    """0 in sync; 1 drift, not Ready or unknown drift; 3 when any cluster is unreachable, whatever else."""
    assert exit_code([cluster("east", source("east")), cluster("west", source("west"))]) == 0
    assert exit_code([cluster("east", source("east", drift=(("ClusterQueue/a", "differs"),)))]) == 1
    assert exit_code([cluster("east", source("east", ready="False"))]) == 1
    assert exit_code([cluster("east", source("east", drift=None, error="repository unreadable"))]) == 1
    down = ClusterView(Target("west.yaml", None), False, "connection refused")
    assert exit_code([cluster("east", source("east", drift=(("ClusterQueue/a", "differs"),))), down]) == 3


def test_text_names_each_cluster_its_revision_drift_and_waiting_queues() -> None:
    """A row per cluster and source; drifted objects, waiting queues and unreachable clusters get a note each."""
    views = [cluster("east", source("east"), queues=(QueueView("team-a", "main", "team-a", 0),)),
             cluster("west", source("west", drift=(("ClusterQueue/team-a", "differs"),)),
                     queues=(QueueView("team-a", "main", "team-a", 2),)),
             ClusterView(Target("north.yaml", "prod"), False, "connection refused")]
    text = to_text(views)
    rows = text.splitlines()
    assert rows[0].split() == ["CLUSTER", "SOURCE", "REVISION", "READY", "DRIFT", "PENDING"]
    assert rows[1].split() == ["east", "gitopsq-system/queues", SHA[:12], "True", "0", "0"]
    assert rows[2].split() == ["west", "gitopsq-system/queues", SHA[:12], "True", "1", "2"]
    assert rows[3].split() == ["prod", "-", "-", "unreachable", "-", "-"]
    assert "west: ClusterQueue/team-a differs" in text
    assert "west: queue team-a/main -> team-a: 2 pending" in text
    assert "prod: unreachable: connection refused" in text


def test_json_carries_revisions_drift_queues_and_the_exit_code() -> None:
    """The JSON document has per cluster its sources (revision, drift) and queues, and the exit code."""
    shown = to_json([cluster("west", source("west", drift=(("ClusterQueue/team-a", "missing"),)),
                             queues=(QueueView("team-a", "main", "team-a", 1),))])
    west = shown["clusters"][0]
    assert west["cluster"] == "west" and west["reachable"] is True
    assert west["sources"][0]["appliedRevision"] == SHA
    assert west["sources"][0]["drift"] == [{"object": "ClusterQueue/team-a", "state": "missing"}]
    assert west["queues"] == [{"namespace": "team-a", "name": "main", "clusterQueue": "team-a", "pending": 1}]
    assert shown["exitCode"] == 1
