"""A forge-signed merge stands for the maintainers who approved it in the forge, never for its author, and only
when the forge's key is listed under forgeKeys: the built-in policies judge it accordingly (pure, both rules of
gitopsq.policy.forge_merge)."""

from __future__ import annotations

from typing import Any

import pytest

from gitopsq.policy import build_policy_input, evaluate, load_policies
from gitopsq.policy.language import SourcedObject

FORGE_FPR = "F" * 40
CONFIG: dict[str, Any] = {
    "apiVersion": "gitopsq.dev/v1alpha1", "kind": "RepositoryConfig", "include": ["teams/"],
    "platformTeam": "platform",
    "teams": [{"name": "platform", "paths": ["platform/**"],
               "maintainers": [{"name": "Pat", "email": "pat@example.com"}]},
              {"name": "team-a", "paths": ["teams/a/**"], "namespaces": ["team-a"],
               "maintainers": [{"name": "Ann", "email": "ann@example.com", "forgeUser": "ann-gh"}]}],
    "forgeKeys": [{"name": "gitea", "keys": [FORGE_FPR]}],
}
POLICIES = load_policies(builtin=True)
PATH = "teams/a/queues.yaml"


def cq(cpu: str) -> SourcedObject:
    obj = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue",
           "metadata": {"name": "team-a", "labels": {"cpu": cpu}},
           "spec": {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "team-a"}},
                    "resourceGroups": []}}
    return SourcedObject(PATH, obj, 1)


def squash(author: str, approvals: list[dict[str, str]], *, signer: str = "forge:gitea",
           state: str = "good") -> dict[str, Any]:
    return {"sha": "5a1", "author": {"name": author, "email": author}, "committer": {"email": "merger@forge"},
            "changedPaths": [PATH], "forgeApprovals": approvals,
            "signature": {"state": state, "kind": "gpg", "signer": signer, "fingerprint": FORGE_FPR}}


def denials(commit: dict[str, Any], mode: str = "optional") -> set[str]:
    config = {**CONFIG, "signing": {"mode": mode}}
    policy_input = build_policy_input([cq("8")], [cq("12")], config, config, commit=commit, commits=[commit],
                                      touched_paths=[PATH])
    return {v.policy for v in evaluate(POLICIES, policy_input) if v.denies}


@pytest.mark.parametrize(("commit", "mode", "denied"), [
    pytest.param(squash("nick@example.com", [{"email": "ann@example.com", "login": "ann"}]), "optional", set(),
                 id="non-maintainer-approved-by-owner"),
    pytest.param(squash("nick@example.com", [{"email": "", "login": "Ann-GH"}]), "optional", set(),
                 id="approver-matched-by-forgeUser-login"),
    pytest.param(squash("nick@example.com", []), "optional", {"team-owns-path"}, id="unapproved-non-maintainer"),
    pytest.param(squash("nick@example.com", [{"email": "pat@example.com", "login": "pat"}]), "optional", set(),
                 id="approved-by-the-platform-team"),
    pytest.param(squash("nick@example.com", [{"email": "bob@example.com", "login": "bob"}]), "optional",
                 {"team-owns-path"}, id="approved-by-someone-who-is-no-maintainer"),
    pytest.param(squash("nick@example.com", [{"email": "ann@example.com", "login": "ann"}]), "required", set(),
                 id="required-mode-approved-forge-merge"),
    pytest.param(squash("nick@example.com", []), "required", {"signed-by-maintainer", "team-owns-path"},
                 id="required-mode-unapproved-forge-merge"),
    pytest.param(squash("nick@example.com", [{"email": "ann@example.com", "login": "ann"}], signer="ann@example.com",
                        state="unknown-key"), "required", {"signed-by-maintainer", "team-owns-path"},
                 id="approvals-count-only-on-a-forge-signed-commit"),
])
def test_forge_merge_judged_by_its_approvals(commit: dict[str, Any], mode: str, denied: set[str]) -> None:
    """Which built-in policies deny a forge squash merge of team-a's file, by who approved it in the forge."""
    assert denials(commit, mode) == denied


def test_the_author_approving_their_own_change_does_not_count() -> None:
    """Ann authored the change: her own approval (were the forge to allow it) vouches for nothing, so with signing
    required the forge's signature binds to nobody."""
    commit = squash("ann@example.com", [{"email": "ann@example.com", "login": "ann"}])
    assert denials(commit, "required") == {"signed-by-maintainer"}
    assert denials(commit, "optional") == set()  # the author's own claim: she maintains team-a
