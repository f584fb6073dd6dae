"""Revision diffs by object identity, duplicate detection, path ownership, and binding signers to maintainers."""

from __future__ import annotations

import base64
import hashlib

import pytest
import yaml

from gitopsq.manifests.config import parse_config
from gitopsq.policy import SourcedObject, build_policy_input, diff_revisions, find_duplicates, normalise_repo_config
from gitopsq.policy.language import Operation
from gitopsq.policy.repo import key_fingerprint, owner_of_path

from .helpers import PLATFORM_KEY, TEAM_A_KEY, cluster_queue, local_queue, repo_config, signed_commit, unsigned_commit

CQ = cluster_queue("team-a-cq")
LQ = local_queue("train", "team-a", "team-a-cq")


def _ops(changes: list) -> list[tuple[str, str, str]]:  # type: ignore[type-arg]
    return [(c.operation.value, c.path, str(c.key)) for c in changes]


def test_create_update_delete_by_identity() -> None:
    """New identities are CREATE, changed content UPDATE, vanished identities DELETE; unchanged ones are absent."""
    old = [SourcedObject("a.yaml", CQ), SourcedObject("a.yaml", LQ)]
    changed = {**CQ, "spec": {**CQ["spec"], "stopPolicy": "Hold"}}
    new = [SourcedObject("a.yaml", changed), SourcedObject("b.yaml", local_queue("new", "team-a", "team-a-cq"))]
    assert _ops(diff_revisions(old, new)) == [
        ("UPDATE", "a.yaml", "ClusterQueue/team-a-cq"), ("DELETE", "a.yaml", "LocalQueue/team-a/train"),
        ("CREATE", "b.yaml", "LocalQueue/team-a/new")]


def test_api_version_change_is_the_same_object() -> None:
    """v1beta1 and v1beta2 of one object pair up as an UPDATE, not a DELETE and a CREATE."""
    newer = {**CQ, "apiVersion": "kueue.x-k8s.io/v1beta2"}
    assert _ops(diff_revisions([SourcedObject("a.yaml", CQ)], [SourcedObject("a.yaml", newer)])) == [
        ("UPDATE", "a.yaml", "ClusterQueue/team-a-cq")]


def test_move_is_delete_plus_create_with_both_paths() -> None:
    """A moved object is a DELETE at the old path (moved_to set) and a CREATE at the new one (old_path set)."""
    changes = diff_revisions([SourcedObject("teams/a/x.yaml", CQ)], [SourcedObject("teams/b/x.yaml", CQ)])
    delete, create = sorted(changes, key=lambda c: c.operation.value, reverse=True)
    assert (delete.operation, delete.path, delete.moved_to) == (Operation.DELETE, "teams/a/x.yaml", "teams/b/x.yaml")
    assert (create.operation, create.path, create.old_path) == (Operation.CREATE, "teams/b/x.yaml", "teams/a/x.yaml")
    assert delete.old_object == CQ and create.object == CQ


def test_duplicates_are_found_with_every_place() -> None:
    """An identity defined in two files is reported once with both places, in path order."""
    (dup,) = find_duplicates([SourcedObject("z.yaml", LQ, 3), SourcedObject("a.yaml", LQ, 7),
                              SourcedObject("a.yaml", CQ)])
    assert str(dup.key) == "LocalQueue/team-a/train" and dup.places == (("a.yaml", 7), ("z.yaml", 3))


@pytest.mark.parametrize(("path", "owner"), [
    ("teams/a/queues.yaml", "team-a"), ("teams/a/deep/x.yml", "team-a"), ("platform/f.yaml", "platform"),
    ("gitopsq.yaml", "platform"), ("teams/c/x.yaml", None), ("teams/ab/x.yaml", None),
], ids=["team file", "nested file", "platform file", "gitopsq.yaml is the platform's", "unowned",
        "prefix of another team's directory"])
def test_owner_of_path(path: str, owner: str | None) -> None:
    """Each path belongs to the team whose pattern matches it, or to nobody."""
    assert owner_of_path(normalise_repo_config(repo_config()), path) == owner


def test_most_specific_pattern_wins() -> None:
    """When two teams' patterns overlap, the one with the longer literal prefix owns the path."""
    config = repo_config(teams=[{"name": "platform", "paths": ["teams/**"]}, {"name": "a", "paths": ["teams/a/**"]}])
    repo = normalise_repo_config(config)
    assert (owner_of_path(repo, "teams/a/x.yaml"), owner_of_path(repo, "teams/b/x.yaml")) == ("a", "platform")


def test_normalised_repo_has_lookup_maps_and_defaults() -> None:
    """The ``repo`` variable has optional lists present, defaults filled and lookup maps added."""
    config = repo_config()
    del config["signing"], config["trustZones"]
    repo = normalise_repo_config(config)
    assert repo["signing"]["mode"] == "off" and repo["trustZones"] == [] and repo["cohortZone"] == {}
    assert repo["capacity"]["default"] == {"cpu": "100", "memory": "400Gi"}
    assert repo["namespaceOwner"]["team-a-dev"] == "team-a" and repo["teamsByName"]["platform"]["namespaces"] == []


def test_raw_and_parsed_configuration_give_the_same_repo() -> None:
    """A raw gitopsq.yaml dict and the manifest loader's RepoConfig normalise to the same ``repo`` value."""
    parsed = parse_config(yaml.safe_dump(repo_config()).encode()).config
    assert parsed is not None
    assert normalise_repo_config(parsed) == normalise_repo_config(repo_config()) == parsed.as_policy_dict()


def test_unusable_configuration_still_gives_a_repo() -> None:
    """A configuration the loader cannot use is shaped leniently, so policies run while the loader reports it."""
    repo = normalise_repo_config({"teams": [{"name": "a", "paths": ["teams/a/**"], "namespaces": ["a"]}],
                                  "include": "not-a-list", "capacity": {"x": {"cpu": 4}}})
    assert repo["namespaceOwner"] == {"a": "a"} and repo["capacity"] == {"x": {"cpu": "4"}}
    assert repo["signing"] == {"mode": "off"}


def test_ssh_key_fingerprint_matches_ssh_keygen_format() -> None:
    """An SSH public key is normalised to SHA256:<unpadded base64>, the form the source layer reports."""
    blob = b"\x00\x00\x00\x0bssh-ed25519" + bytes(range(36))
    key = "ssh-ed25519 " + base64.b64encode(blob).decode() + " ann@laptop"
    expected = "SHA256:" + base64.b64encode(hashlib.sha256(blob).digest()).decode().rstrip("=")
    assert key_fingerprint(key) == expected
    assert key_fingerprint(TEAM_A_KEY.lower()) == TEAM_A_KEY


def _actor(commit: dict, **config: object) -> dict:  # type: ignore[type-arg]
    pi = build_policy_input([], [], repo_config(**config), repo_config(**config), commit=commit)
    assert pi.actor is not None
    return dict(pi.actor)


def test_signature_binds_the_key_owner_not_the_author() -> None:
    """A good signature makes its key's maintainer the actor, whatever name the author field claims."""
    commit = {**signed_commit("pat@example.com", TEAM_A_KEY)}
    assert _actor(commit) == {"email": "ann@example.com", "teams": ["team-a"], "verified": True, "platform": False}


def test_unsigned_commit_is_only_a_claim() -> None:
    """Without a bound signature the author e-mail decides the teams, marked unverified."""
    assert _actor(unsigned_commit("Pat@Example.com")) == {
        "email": "pat@example.com", "teams": ["platform"], "verified": False, "platform": True}


def test_identity_is_bound_with_the_previous_trust_model() -> None:
    """A revision adding a key to the platform team cannot use that key to act as the platform in the same revision."""
    promoted = repo_config()
    promoted["teams"][0]["maintainers"].append({"name": "Ann", "email": "ann@example.com",
                                                "signingKeys": [TEAM_A_KEY]})
    pi = build_policy_input([], [], promoted, repo_config(), commit=signed_commit("ann@example.com", TEAM_A_KEY))
    assert pi.actor is not None and pi.actor["teams"] == ["team-a"] and not pi.actor["platform"]


def test_touched_files_without_objects_become_file_changes() -> None:
    """A changed policy file or README is a File change, so ownership rules see every touched path."""
    pi = build_policy_input([], [], repo_config(), repo_config(),
                            commit=signed_commit("pat@example.com", PLATFORM_KEY),
                            touched_paths=["policies/extra.yaml"])
    assert [(c.key.kind, c.path) for c in pi.changes] == [("File", "policies/extra.yaml")]


def test_config_change_is_a_repository_config_change() -> None:
    """An edited gitopsq.yaml appears as an UPDATE of RepositoryConfig/gitopsq.yaml with both versions."""
    pi = build_policy_input([], [], repo_config(signing={"mode": "off"}), repo_config())
    (change,) = pi.changes
    assert (change.operation, str(change.key)) == (Operation.UPDATE, "RepositoryConfig/gitopsq.yaml")
    assert change.old_object is not None and change.old_object["signing"] == {"mode": "required"}


def test_aggregate_sums_quota_over_files_and_kinds() -> None:
    """aggregate.quotas sums nominalQuota per flavor and resource over ClusterQueues and Cohorts."""
    cohort = {"apiVersion": "kueue.x-k8s.io/v1alpha1", "kind": "Cohort", "metadata": {"name": "research"},
              "spec": {"resourceGroups": [{"flavors": [{"name": "default", "resources": [
                  {"name": "cpu", "nominalQuota": "500m"}]}]}]}}
    new = [SourcedObject("a.yaml", cluster_queue("a", quota={"cpu": 2})), SourcedObject("b.yaml", cohort),
           SourcedObject("c.yaml", cluster_queue("c", quota={"cpu": "1", "memory": "1Gi"}))]
    pi = build_policy_input([], new, repo_config(), None)
    cells = {(q["flavor"], q["resource"]): q["nominalQuota"] for q in pi.aggregate["quotas"]}
    assert cells == {("default", "cpu"): "3500m", ("default", "memory"): "1073741824"}
