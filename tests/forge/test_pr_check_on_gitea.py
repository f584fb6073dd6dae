"""`gitopsq check` and `gitopsq plan` on a pull request, forge-aware, against a real Gitea 1.26: a team member's
change is refused until a maintainer of the team approves it at the head commit, passes once approved, and is
refused again after a new push (the approval was of an older head); the member's own approval is refused by
Gitea and counts for nothing. Without forge options the judgement is the old one (the author alone)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from forge_rig import GiteaRig

from .scene import Scene

DS_FILE = "teams/data-science/cluster-queue.yaml"
DS_CPU = '{name: cpu, nominalQuota: "96", borrowingLimit: "32"}'
RAISED = '{name: cpu, nominalQuota: "112", borrowingLimit: "32"}'
AWAITING = "awaiting approval by a maintainer of team data-science in the pull request"


def gitopsq(scene: Scene, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "GITOPSQ_CACHE_DIR": str(scene.home / "cache")}
    return subprocess.run([sys.executable, "-m", "gitopsq", *args], cwd=scene.root, env=env, capture_output=True,
                          text=True, timeout=120, check=False)


def forge_options(gitea: GiteaRig, scene: Scene, pr: int) -> list[str]:
    token = scene.home / "ci-token"
    token.write_text(gitea.users["member"].token + "\n")  # the CI job's token: the PR author's repository token
    return ["--forge", "gitea", "--forge-url", gitea.url, "--forge-repo", scene.slug,
            "--forge-token-file", str(token), "--pr", str(pr)]


def push_on_top(gitea: GiteaRig, scene: Scene, branch: str, cpu: str, message: str) -> str:
    """A further commit by member on the PR's branch, pushed: the PR's head moves on."""
    scene.git("checkout", "-q", branch)
    file = scene.root / DS_FILE
    file.write_text(file.read_text().replace(RAISED, cpu, 1))
    scene.git("commit", "-q", "-am", message)
    scene.git("push", "-q", gitea.push_url("member", "platform", "reviewed"), branch)
    sha = scene.git("rev-parse", "HEAD")
    scene.wait_for_branch(branch, sha)
    return sha


@pytest.fixture(scope="module")
def scene(gitea: GiteaRig, tmp_path_factory: pytest.TempPathFactory) -> Scene:
    """repo-template on Gitea whose data-science maintainer Erin is Gitea's ``maintainer`` (e-mail and login)."""
    made = Scene(gitea, "reviewed", tmp_path_factory.mktemp("reviewed"))
    config = made.root / "gitopsq.yaml"
    text = config.read_text()
    erin = "      - name: Erin Okafor\n        email: erin@example.com\n"
    assert erin in text
    config.write_text(text.replace(erin, "      - name: Erin Okafor\n        email: "
                                         f"{gitea.users['maintainer'].email}\n        forgeUser: maintainer\n"))
    made.git("commit", "-q", "-am", "data-science: Erin reviews on Gitea as maintainer", who="forge-admin")
    made.git("push", "-q", gitea.push_url("forge-admin", "platform", "reviewed"), "main", who="forge-admin")
    made.wait_for_branch("main", made.git("rev-parse", "HEAD"))
    return made


def test_a_members_pr_passes_once_a_maintainer_approves_its_head(gitea: GiteaRig, scene: Scene) -> None:
    """member's quota change: refused with the awaiting message; member's own approval is refused by Gitea and
    changes nothing; maintainer approves the head → check and plan pass; a new push makes that approval stale →
    refused again, and gitopsq says the approval was of an older head."""
    base = scene.git("rev-parse", "main")
    head = scene.change("raise-ds", DS_FILE, DS_CPU, RAISED, "data-science: on-demand CPU 96 -> 112")
    pr = scene.open_pr("raise-ds", "data-science: on-demand CPU 96 -> 112")
    options = forge_options(gitea, scene, pr)

    plain = gitopsq(scene, "check", ".", "--rev", head, "--base", base)
    assert plain.returncode == 1 and "the author is not a maintainer of any team" in plain.stdout
    assert AWAITING not in plain.stdout

    awaiting = gitopsq(scene, "check", ".", "--rev", head, "--base", base, *options)
    assert awaiting.returncode == 1, awaiting.stdout + awaiting.stderr
    assert f"{DS_FILE}:" in awaiting.stdout and AWAITING in awaiting.stdout

    status, body = scene.review(pr, "member", "APPROVED", head)
    assert status == 422, ("Gitea refuses the author's own approval", status, body)
    assert gitopsq(scene, "check", ".", "--rev", head, "--base", base, *options).returncode == 1

    status, body = scene.review(pr, "maintainer", "APPROVED", head)
    assert status == 200, body
    approved = gitopsq(scene, "check", ".", "--rev", head, "--base", base, *options)
    assert approved.returncode == 0, approved.stdout + approved.stderr
    plan = gitopsq(scene, "plan", ".", "--base", base, "--head", head, *options)
    assert plan.returncode == 0, plan.stdout + plan.stderr
    assert gitopsq(scene, "plan", ".", "--base", base, "--head", head).returncode == 1  # without the forge

    newer = push_on_top(gitea, scene, "raise-ds", RAISED.replace("112", "120"), "data-science: 120 after all")
    stale = gitopsq(scene, "check", ".", "--rev", newer, "--base", base, *options)
    assert stale.returncode == 1 and AWAITING in stale.stdout
    assert f"the approval by maintainer of {scene.slug}#{pr} was given on {head[:12]}" in stale.stderr


def test_a_forge_option_without_the_pull_request_is_a_usage_error(scene: Scene) -> None:
    """--forge without --forge-repo and --pr, and --pr with --worktree, are refused up front (exit 2)."""
    done = gitopsq(scene, "check", ".", "--forge", "gitea")
    assert done.returncode == 2 and "needs --forge-repo, --pr" in done.stderr
    on_disk = gitopsq(scene, "check", ".", "--worktree", "--forge", "gitea", "--forge-repo", scene.slug, "--pr", "1")
    assert on_disk.returncode == 2 and "--worktree" in on_disk.stderr
