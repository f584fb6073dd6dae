"""Pull-request-shaped attacks on the trust model: each one is rejected by the built-in library with a clear message.

Each attack is a base revision and a head revision (objects with their files), the head commit, and the text
the rejection must contain. Every attack runs through the same path as `gitopsq check`: diff, context,
every built-in policy, on every backend. The base revision itself passes, so each rejection is the attack's.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from gitopsq.policy import SourcedObject, build_policy_input, diff_revisions, evaluate, load_policies

from .helpers import (
    BACKENDS,
    PLATFORM_KEY,
    TEAM_A_KEY,
    TEAM_B_KEY,
    cluster_queue,
    local_queue,
    repo_config,
    signed_commit,
    unsigned_commit,
)

ANN = signed_commit("ann@example.com", TEAM_A_KEY)
PAT = signed_commit("pat@example.com", PLATFORM_KEY)

BASE = [
    SourcedObject("platform/flavors.yaml", {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ResourceFlavor",
                                            "metadata": {"name": "default"}}),
    SourcedObject("teams/a/queues.yaml", cluster_queue("team-a-cq", namespaces=("team-a",), quota={"cpu": "40"})),
    SourcedObject("teams/a/queues.yaml", local_queue("train", "team-a", "team-a-cq"), 20),
    SourcedObject("teams/b/queues.yaml", cluster_queue("team-b-cq", namespaces=("team-b",), quota={"cpu": "40"})),
    SourcedObject("teams/b/queues.yaml", local_queue("infer", "team-b", "team-b-cq"), 20),
]


def _replace(objects: list[SourcedObject], name: str, path: str, obj: dict[str, Any] | None,
             new_path: str | None = None) -> list[SourcedObject]:
    out = [o for o in objects if not (o.key.name == name and o.path == path)]
    if obj is not None:
        out.append(SourcedObject(new_path or path, obj))
    return out


@dataclass(frozen=True)
class Attack:
    head: list[SourcedObject]
    expect: str
    commit: dict[str, Any] = field(default_factory=lambda: ANN)
    config: dict[str, Any] = field(default_factory=repo_config)
    earlier: tuple[dict[str, Any], ...] = ()  # commits the revision brings before the head


ATTACKS = {
    "edit another team's queue": Attack(
        _replace(BASE, "team-b-cq", "teams/b/queues.yaml",
                 cluster_queue("team-b-cq", namespaces=("team-b",), quota={"cpu": "1"})),
        "policy team-owns-path: ClusterQueue/team-b-cq (teams/b/queues.yaml): commit by ann@example.com (signed) "
        "changes teams/b/queues.yaml, which belongs to team team-b"),
    "move a file into another team's path": Attack(
        _replace(BASE, "team-a-cq", "teams/a/queues.yaml",
                 cluster_queue("team-a-cq", namespaces=("team-a",), quota={"cpu": "40"}), "teams/b/stolen.yaml"),
        "changes teams/b/stolen.yaml, which belongs to team team-b"),
    "widen a namespaceSelector to {}": Attack(
        _replace(BASE, "team-a-cq", "teams/a/queues.yaml",
                 {**cluster_queue("team-a-cq", quota={"cpu": "40"}),
                  "spec": {**cluster_queue("team-a-cq", quota={"cpu": "40"})["spec"], "namespaceSelector": {}}}),
        "policy namespace-selector-scoped: ClusterQueue/team-a-cq (teams/a/queues.yaml): ClusterQueue team-a-cq "
        "has an empty or absent namespaceSelector"),
    "join a production cohort": Attack(
        _replace(BASE, "team-a-cq", "teams/a/queues.yaml",
                 cluster_queue("team-a-cq", cohort="production", quota={"cpu": "40"})),
        "ClusterQueue team-a-cq joins cohort production, which team team-a may not join"),
    "raise nominal quota past capacity in one file": Attack(
        _replace(BASE, "team-a-cq", "teams/a/queues.yaml", cluster_queue("team-a-cq", quota={"cpu": "70"})),
        "default/cpu totals 110 > 100"),
    "raise nominal quota past capacity split over several files": Attack(
        [*BASE, SourcedObject("teams/a/more.yaml", cluster_queue("team-a-extra", quota={"cpu": "15"})),
         SourcedObject("teams/a/even-more.yaml", cluster_queue("team-a-spare", quota={"cpu": "15"}))],
        "default/cpu totals 110 > 100 (from ClusterQueue/team-a-spare (teams/a/even-more.yaml), "
        "ClusterQueue/team-a-extra (teams/a/more.yaml)"),
    "smuggle another team's object through a second document": Attack(
        [*BASE, SourcedObject("teams/a/queues.yaml", local_queue("sneaky", "team-b", "team-a-cq"), 40)],
        "LocalQueue/team-b/sneaky (teams/a/queues.yaml:40): LocalQueue/team-b/sneaky names namespace team-b, "
        "which belongs to team team-b, but teams/a/queues.yaml belongs to team team-a"),
    "smuggle a ClusterQueue through a YAML anchor copy": Attack(
        [*BASE, SourcedObject("teams/a/anchors.yaml", cluster_queue("team-b-cq", namespaces=("team-b",),
                                                                    quota={"cpu": "40"}))],
        "policy gitopsq-engine: ClusterQueue/team-b-cq (teams/a/anchors.yaml): ClusterQueue/team-b-cq is defined "
        "more than once (also in teams/b/queues.yaml)"),
    "duplicate an object in two files": Attack(
        [*BASE, SourcedObject("teams/a/copy.yaml", local_queue("train", "team-a", "team-a-cq"))],
        "LocalQueue/team-a/train is defined more than once"),
    "delete another team's LocalQueue": Attack(
        _replace(BASE, "infer", "teams/b/queues.yaml", None),
        "deleting LocalQueue team-b/infer needs team team-b or the platform team; commit by ann@example.com"),
    "unsigned commit where signing is required": Attack(
        _replace(BASE, "team-a-cq", "teams/a/queues.yaml", cluster_queue("team-a-cq", quota={"cpu": "30"})),
        "signing.mode is required, but commit deadbeef is not signed", unsigned_commit("ann@example.com")),
    "a commit signed with another team's key": Attack(
        _replace(BASE, "team-a-cq", "teams/a/queues.yaml", cluster_queue("team-a-cq", quota={"cpu": "30"})),
        "is signed by bob@example.com (team-b), not by a maintainer of team team-a",
        {**signed_commit("bob@example.com", TEAM_B_KEY), "author": {"name": "Ann", "email": "ann@example.com"}}),
    "a committer claiming to be a maintainer, signed by nobody": Attack(
        _replace(BASE, "team-b-cq", "teams/b/queues.yaml",
                 cluster_queue("team-b-cq", namespaces=("team-b",), quota={"cpu": "30"})),
        "commit deadbeef is not signed (author claims bob@example.com)", unsigned_commit("bob@example.com")),
    "an unsigned commit hidden behind a signed merge": Attack(
        _replace(BASE, "team-a-cq", "teams/a/queues.yaml", cluster_queue("team-a-cq", quota={"cpu": "30"})),
        "commit deadbeef (author eve@example.com, signature unsigned) changes teams/a/queues.yaml without the "
        "signature of a maintainer of team team-a",
        {**PAT, "changedPaths": ["teams/a/queues.yaml"]},
        earlier=({**unsigned_commit("eve@example.com"), "changedPaths": ["teams/a/queues.yaml"]},)),
    "disable a built-in policy from a team's commit": Attack(
        BASE, "built-in Deny policy 'team-owns-path' may only be disabled by the platform team",
        config=repo_config(policies={"disabled": ["team-owns-path"]})),
}


@pytest.fixture(scope="module")
def library() -> list[Any]:
    return load_policies(builtin=True)


def _verdicts(library: list[Any], head: list[SourcedObject], commit: dict[str, Any],
              config: dict[str, Any], backend: str, *, earlier: tuple[dict[str, Any], ...] = ()) -> list[Any]:
    touched = {c.path for c in diff_revisions(BASE, head)}
    pi = build_policy_input(BASE, head, config, repo_config(), commit=commit, commits=[*earlier, commit],
                            touched_paths=touched)
    return list(evaluate(library, pi, backend))


@pytest.mark.parametrize("backend", BACKENDS)
def test_base_revision_passes(library: list[Any], backend: str) -> None:
    """The base revision, created by the platform team, draws no denial: every rejection below is the attack's."""
    pi = build_policy_input([], BASE, repo_config(), None, commit=PAT, touched_paths={o.path for o in BASE},
                            first_revision=True)
    denied = [str(v) for v in evaluate(library, pi, backend) if not v.allowed]
    assert denied == []


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", list(ATTACKS))
def test_attack_is_rejected_with_its_message(library: list[Any], name: str, backend: str) -> None:
    """Each attack yields a Deny verdict whose formatted text explains the attack."""
    attack = ATTACKS[name]
    verdicts = _verdicts(library, attack.head, attack.commit, attack.config, backend, earlier=attack.earlier)
    denied = [str(v) for v in verdicts if v.denies]
    assert any(attack.expect in text for text in denied), denied


@pytest.mark.parametrize("backend", BACKENDS)
def test_same_change_by_the_owner_is_allowed(library: list[Any], backend: str) -> None:
    """Team-b's maintainer making the change that was an attack from team-a is accepted: the rules bind identity."""
    head = _replace(BASE, "team-b-cq", "teams/b/queues.yaml",
                    cluster_queue("team-b-cq", namespaces=("team-b",), quota={"cpu": "1"}))
    verdicts = _verdicts(library, head, signed_commit("bob@example.com", TEAM_B_KEY), repo_config(), backend)
    assert [str(v) for v in verdicts if not v.allowed] == []
