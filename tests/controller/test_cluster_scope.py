"""One controller per cluster, without a cluster: the revision a `--cluster` controller validates (on a real Git
repository), the start refusal of an undeclared name, and the names it stamps on audit records, metrics and
commit statuses."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from fleet_repo import fleet_repo
from prometheus_client import CollectorRegistry, Counter, generate_latest
from queue_repo import template_repo

from gitopsq.audit import records
from gitopsq.controller.cluster_names import exposed_registry, named_record, status_context
from gitopsq.controller.cluster_scope import REQUIRED, UNDECLARED, check_cluster, cluster_validator
from gitopsq.errors import UsageError
from gitopsq.reconcile.pairing import key_of_document
from gitopsq.source import open_source

ROOT = Path(__file__).resolve().parents[2]


def quotas(documents: tuple[dict, ...]) -> dict[str, str]:  # type: ignore[type-arg]
    return {d["metadata"]["name"]: d["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"]
            for d in documents if d["kind"] == "ClusterQueue"}


def test_each_cluster_validates_only_its_own_paths(tmp_path: Path) -> None:
    """The same ClusterQueue names in two clusters' overlays are each cluster's own: east sees east's quota."""
    repo = fleet_repo(tmp_path / "repo", "u")
    source = open_source(str(repo.path))
    head = source.resolve("main")
    east = cluster_validator("east")(source, head, None)
    west = cluster_validator("west")(source, head, None)
    assert not east.rejected and not west.rejected, (east.findings, west.findings)
    assert quotas(east.documents) == {f"{repo.tag}-a": "8", f"{repo.tag}-b": "4"}  # type: ignore[arg-type]
    assert quotas(west.documents) == {f"{repo.tag}-a": "16", f"{repo.tag}-b": "4"}  # type: ignore[arg-type]
    paths = {east.locations[key_of_document(d)][0] for d in east.documents}
    assert not any(p.startswith("clusters/west/") for p in paths)


def test_a_revision_that_drops_the_cluster_is_rejected_naming_the_declared_ones(tmp_path: Path) -> None:
    """A revision whose gitopsq.yaml no longer declares the controller's cluster is rejected with no objects."""
    repo = fleet_repo(tmp_path / "repo", "u")
    repo.declare("east")
    head = repo.commit("west leaves the fleet")
    judged = cluster_validator("west")(open_source(str(repo.path)), head, None)
    assert judged.rejected and judged.documents == ()
    assert judged.findings[0]["code"] == UNDECLARED
    assert "'west'" in judged.reason and "declared: east" in judged.reason


def test_starting_for_an_undeclared_cluster_is_a_usage_error_listing_the_names(tmp_path: Path) -> None:
    """`check_cluster` refuses a name the followed branch does not declare and lists the declared ones."""
    repo = fleet_repo(tmp_path / "repo", "u")
    source = open_source(str(repo.path))
    check_cluster(source, "main", "east")
    with pytest.raises(UsageError, match=r"--cluster north: .*declared clusters: east, west"):
        check_cluster(source, "main", "north")


def test_a_repository_with_clusters_needs_a_cluster_and_one_without_needs_none(tmp_path: Path) -> None:
    """Without --cluster a fleet repository is refused at start; --cluster on a repository without clusters too."""
    fleet = open_source(str(fleet_repo(tmp_path / "fleet", "u").path))
    with pytest.raises(UsageError, match=r"declares clusters \(east, west\): run one controller per cluster"):
        check_cluster(fleet, "main", "")
    single = open_source(str(template_repo(tmp_path / "single", "s").path))
    check_cluster(single, "main", "")
    with pytest.raises(UsageError, match=r"declared clusters: none"):
        check_cluster(single, "main", "east")


def test_the_implicit_cluster_rejects_a_revision_that_starts_declaring_clusters(tmp_path: Path) -> None:
    """A controller without --cluster rejects (writes nothing for) a revision that declares clusters, and
    accepts one that declares none."""
    repo = template_repo(tmp_path / "single", "s")
    source = open_source(str(repo.path))
    before = cluster_validator("")(source, source.resolve("main"), None)
    assert not before.rejected and before.documents
    repo.write("gitopsq.yaml", (repo.path / "gitopsq.yaml").read_text() + "clusters:\n  - name: east\n"
               "    paths: [namespaces.yaml, flavors.yaml, queues/]\n")
    after = cluster_validator("")(source, repo.commit("a fleet now"), None)
    assert after.rejected and after.documents == () and after.findings[0]["code"] == REQUIRED
    assert "declares clusters (east)" in after.reason


def test_controller_with_an_undeclared_cluster_exits_2(tmp_path: Path) -> None:
    """`gitopsq controller --cluster NAME` for an undeclared NAME exits 2 before touching any cluster."""
    repo = fleet_repo(tmp_path / "repo", "u")
    kubeconfig = tmp_path / "kubeconfig"  # a cluster nobody serves: the refusal comes before any API call
    kubeconfig.write_text("apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: "
                          "'https://127.0.0.1:9'}}]\nusers: [{name: u, user: {token: t}}]\n"
                          "contexts: [{name: x, context: {cluster: c, user: u}}]\ncurrent-context: x\n")
    done = subprocess.run([sys.executable, "-m", "gitopsq", "controller", "--repo", str(repo.path),
                           "--kubeconfig", str(kubeconfig), "--cluster", "north", "--no-leader-elect",
                           "--metrics-addr", "", "--health-addr", "127.0.0.1:0", "--log-format", "text"],
                          cwd=ROOT, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 2, done.stderr
    assert "declared clusters: east, west" in done.stderr


def test_audit_records_name_the_cluster_with_ids_of_their_own() -> None:
    """Two clusters rejecting one revision are two records; a replay of one is the same record."""
    from datetime import UTC, datetime
    rejected = records.sync_rejected(time=datetime(2026, 1, 1, tzinfo=UTC), source_url="file:///q",
                                     revision="a" * 40, reason="bad")
    east, west = named_record(rejected, "east"), named_record(rejected, "west")
    assert east.data["cluster"] == "east" and west.data["cluster"] == "west"
    assert len({rejected.id, east.id, west.id}) == 3
    assert named_record(rejected, "east").id == east.id
    assert named_record(east, "east") is east
    assert named_record(rejected, "") is rejected


def test_metrics_carry_the_cluster_label_only_for_a_named_cluster() -> None:
    """Every served series gains ``cluster="<name>"``; the implicit cluster serves the registry as it is."""
    registry = CollectorRegistry()
    Counter("gitopsq_sync_total", "passes", ["outcome"], registry=registry).labels("applied").inc()
    assert b'gitopsq_sync_total{cluster="east",outcome="applied"} 1.0' in generate_latest(
        exposed_registry(registry, "east"))
    assert exposed_registry(registry, "") is registry


def test_commit_status_context_is_per_cluster_unless_configured() -> None:
    """The default context becomes gitopsq/<cluster>; a configured one is kept."""
    assert status_context(None, "east") == "gitopsq/east"
    assert status_context("gitopsq/sync", "east") == "gitopsq/east"
    assert status_context("ci/queues", "east") == "ci/queues"
    assert status_context(None, "") == "gitopsq/sync"


def test_the_controller_flags_give_a_per_cluster_status_context() -> None:
    """`--cluster east` without `--status-context` posts statuses as gitopsq/east; an explicit context stays."""
    from gitopsq.controller.forge_wiring import forge_reporter

    flags = {"cluster": "east", "status_context": "gitopsq/sync"}
    assert forge_reporter(flags, "file:///q", CollectorRegistry()).context == "gitopsq/east"
    assert forge_reporter({**flags, "status_context": "ci/queues"}, "file:///q", CollectorRegistry()).context == \
        "ci/queues"
    assert forge_reporter({"status_context": "gitopsq/sync"}, "file:///q", CollectorRegistry()).context == \
        "gitopsq/sync"
