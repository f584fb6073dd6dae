"""gitopsq.yaml's ``clusters:`` block (docs/fleet.md): parsing, validation with file:line, and per-cluster views."""

from __future__ import annotations

import pytest

from gitopsq.manifests.config import parse_config
from gitopsq.policy.repo import normalise_repo_config

HEAD = """apiVersion: gitopsq.dev/v1alpha1
kind: RepositoryConfig
platformTeam: platform
teams:
  - name: platform
    paths: ["queues/**"]
  - name: team-a
    paths: ["queues/base/team-a/**"]
    namespaces: [team-a]
capacity: {a100: {nvidia.com/gpu: "8"}}
trustZones:
  - {name: research, teams: [team-a], cohorts: [research]}
"""

TWO = HEAD + """clusters:
  - name: prod-eu
    paths: [queues/base/**, queues/clusters/prod-eu/**]
    capacity: {a100: {nvidia.com/gpu: "64"}}
  - name: prod-us
    paths: [queues/base/, queues/clusters/prod-us/]
    trustZones:
      - {name: shared, teams: [platform, team-a], cohorts: [shared]}
"""


def parsed(text: str):  # type: ignore[no-untyped-def]
    return parse_config(text.encode())


def test_without_clusters_there_is_one_implicit_cluster() -> None:
    """A gitopsq.yaml without clusters keeps working exactly as before: no names, one view, cluster ''."""
    result = parsed(HEAD.replace("platformTeam", "include: [queues/]\nplatformTeam"))
    assert result.ok, [str(f) for f in result.findings]
    config = result.config
    assert config.clusters == () and config.cluster_names() == () and config.cluster == ""
    assert config.views() == (config,)
    assert config.as_policy_dict()["cluster"] == "" and config.as_policy_dict()["clusters"] == []


def test_clusters_parse_into_specs_and_include_defaults_to_their_union() -> None:
    """Declared clusters keep file order; without a top-level include the repository is the union of their paths."""
    result = parsed(TWO)
    assert result.ok, [str(f) for f in result.findings]
    config = result.config
    assert config.cluster_names() == ("prod-eu", "prod-us")
    assert config.include == ("queues/base/**", "queues/clusters/prod-eu/**", "queues/base/",
                              "queues/clusters/prod-us/")
    assert config.clusters[0].line == 14


def test_for_cluster_is_a_view_with_its_paths_capacity_and_zones() -> None:
    """for_cluster replaces include, capacity and trust zones (inheriting what the cluster leaves out)."""
    config = parsed(TWO).config
    eu, us = config.for_cluster("prod-eu"), config.for_cluster("prod-us")
    assert eu.cluster == "prod-eu" and eu.include == ("queues/base/**", "queues/clusters/prod-eu/**")
    assert str(eu.capacity["a100"]["nvidia.com/gpu"]) == "64"
    assert [z.name for z in eu.trust_zones] == ["research"]  # inherited
    assert str(us.capacity["a100"]["nvidia.com/gpu"]) == "8"  # inherited
    assert [z.name for z in us.trust_zones] == ["shared"]
    assert eu.selects("queues/clusters/prod-eu/cq.yaml") and not eu.selects("queues/clusters/prod-us/cq.yaml")
    assert us.selects("queues/base/flavors.yaml") and not us.selects("queues/clusters/prod-eu/cq.yaml")
    assert eu.owner_of("queues/base/team-a/q.yaml") == "team-a"  # ownership is the repository's
    assert [v.cluster for v in config.views()] == ["prod-eu", "prod-us"]
    with pytest.raises(KeyError):
        config.for_cluster("nowhere")


def test_policies_see_the_cluster_they_judge() -> None:
    """The policy view of a cluster's configuration names the cluster and carries its own capacity."""
    view = normalise_repo_config(parsed(TWO).config.for_cluster("prod-eu"))
    assert view["cluster"] == "prod-eu"
    assert view["capacity"] == {"a100": {"nvidia.com/gpu": "64"}}
    assert [c["name"] for c in view["clusters"]] == ["prod-eu", "prod-us"]


@pytest.mark.parametrize(("clusters", "code", "line", "text"), [
    ("  - {name: a, paths: [x/]}\n  - {name: a, paths: [y/]}\n", "config-duplicate", 15, "declared twice"),
    ("  - {name: Prod_EU, paths: [x/]}\n", "config-invalid-name", 14, "DNS label"),
    ("  - {name: a, paths: [../x]}\n", "config-invalid-pattern", 14, "'..'"),
    ("  - name: a\n    paths: []\n", "invalid-value", 15, "at least one path"),
    ("  - name: a\n", "missing-field", 14, "needs paths"),
    ("  - name: a\n    paths: [x/]\n    region: eu\n", "unknown-field", 16, "region"),
    ("  - name: a\n    paths: [x/]\n    capacity: {a100: {nvidia.com/gpu: lots}}\n", "invalid-quantity", 16, ""),
    ("  - name: a\n    paths: [x/]\n    trustZones: [{name: z, teams: [nobody]}]\n", "config-unknown-team", 16,
     "nobody"),
    ("  name: a\n", "wrong-type", 13, "must be a list"),
], ids=["duplicate", "bad-name", "bad-path", "empty-paths", "no-paths", "unknown-key", "bad-capacity",
        "zone-unknown-team", "not-a-list"])
def test_bad_clusters_are_findings_with_file_and_line(clusters: str, code: str, line: int, text: str) -> None:
    """Each mistake in clusters: is an error naming gitopsq.yaml, the line and the reason, never a traceback."""
    result = parsed(HEAD + "clusters:\n" + clusters)
    assert not result.ok
    hits = [f for f in result.findings if f.code == code]
    assert hits, [str(f) for f in result.findings]
    assert hits[0].location is not None and hits[0].location.path == "gitopsq.yaml"
    assert hits[0].location.line == line, str(hits[0])
    assert text in hits[0].message


def test_a_repository_without_include_or_clusters_still_needs_include() -> None:
    """Dropping include is only allowed when clusters give the paths."""
    result = parsed(HEAD)
    assert any(f.code == "missing-field" and "include" in f.message for f in result.findings)


FLAVOR = b"apiVersion: kueue.x-k8s.io/v1beta2\nkind: ResourceFlavor\nmetadata: {name: a100}\n"


def _queue(gpus: int) -> bytes:
    return (b"apiVersion: kueue.x-k8s.io/v1beta2\nkind: ClusterQueue\nmetadata: {name: shared}\nspec:\n"
            b"  namespaceSelector: {}\n  resourceGroups:\n  - coveredResources: [nvidia.com/gpu]\n    flavors:\n"
            b"    - name: a100\n      resources: [{name: nvidia.com/gpu, nominalQuota: %d}]\n" % gpus)


def test_the_pipeline_checks_each_cluster_on_its_own_paths() -> None:
    """check_files(cluster=...) keeps only that cluster's files, so the same ClusterQueue in two cluster
    directories is two objects in two clusters, while the union of both would hold a duplicate."""
    from gitopsq.manifests.pipeline import check_files

    files = {"queues/base/flavors.yaml": FLAVOR, "queues/clusters/prod-eu/cq.yaml": _queue(64),
             "queues/clusters/prod-us/cq.yaml": _queue(8)}
    config = TWO.encode()
    eu = check_files(files, config, cluster="prod-eu")
    us = check_files(files, config, cluster="prod-us")
    assert eu.ok and us.ok, [str(f) for f in (*eu.findings, *us.findings)]
    assert eu.config.cluster == "prod-eu" and eu.files == ("queues/base/flavors.yaml",
                                                           "queues/clusters/prod-eu/cq.yaml")
    assert us.files == ("queues/base/flavors.yaml", "queues/clusters/prod-us/cq.yaml")
    whole = check_files(files, config)
    assert not whole.ok and any("shared" in (f.obj or "") for f in whole.errors)
    gone = check_files(files, config, cluster="prod-ap")  # a revision that does not declare the cluster
    assert gone.entries == () and gone.config.cluster == "prod-ap" and gone.config.include == ()
