"""`gitopsq plan --post` on a real Gitea: the markdown plan lands on the PR as one comment that later runs update,
and forge errors exit 3 with a message that names the forge and never the token."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from forge_rig import GiteaRig

from .scene import Scene

DS_CPU = '{name: cpu, nominalQuota: "96", borrowingLimit: "32"}'
MARKER = "<!-- gitopsq-plan -->"


@pytest.fixture(scope="module")
def opened(gitea: GiteaRig, tmp_path_factory: pytest.TempPathFactory) -> tuple[Scene, int, Path]:
    """An open PR raising data-science's CPU to 128, and the member's token in a file."""
    work = tmp_path_factory.mktemp("post")
    scene = Scene(gitea, "quotas-post", work)
    scene.change("raise", "teams/data-science/cluster-queue.yaml", DS_CPU,
                 '{name: cpu, nominalQuota: "128", borrowingLimit: "32"}', "data-science: CPU 96 -> 128")
    pr = scene.open_pr("raise", "data-science: CPU 96 -> 128")
    token = work / "token"
    token.write_text(gitea.users["member"].token + "\n")
    return scene, pr, token


def _plan(scene: Scene, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gitopsq", "plan", str(scene.root), "--base", "main", "--head",
                           "raise", "--no-cache", *args], capture_output=True, text=True, check=False)


def _marked(gitea: GiteaRig, scene: Scene, pr: int) -> list[str]:
    status, comments = gitea.api("member", "GET", f"/repos/{scene.slug}/issues/{pr}/comments")
    assert status == 200
    return [c["body"] for c in comments if MARKER in c["body"]]


def test_post_creates_then_updates_one_plan_comment(gitea: GiteaRig, opened: tuple[Scene, int, Path]) -> None:
    """Two runs of plan --post leave exactly one marked comment on the PR, holding the markdown plan; the exit code
    stays the plan's (1: member is no maintainer of data-science, so the team-owns-path policy denies)."""
    scene, pr, token = opened
    post = ["--post", "--forge", "gitea", "--forge-url", gitea.url, "--repo-slug", scene.slug, "--pr", str(pr),
            "--token-file", str(token)]
    first = _plan(scene, *post)
    assert first.returncode == 1, first.stderr
    assert "posted as comment" in first.stderr and gitea.users["member"].token not in first.stderr + first.stdout
    second = _plan(scene, "--output", "markdown", *post)
    assert second.returncode == 1, second.stderr
    assert "updated in comment" in second.stderr
    (body,) = _marked(gitea, scene, pr)
    assert body.startswith(MARKER) and "data-science" in body and "128" in body and "team-owns-path" in body
    assert body.strip() == second.stdout.strip()  # what was posted is the markdown the command prints


def test_forge_refusal_exits_3_naming_the_forge(gitea: GiteaRig, opened: tuple[Scene, int, Path],
                                                tmp_path: Path) -> None:
    """A wrong token: exit 3, "gitea ... HTTP 401" on stderr, the token nowhere in the output."""
    scene, pr, _ = opened
    bad = tmp_path / "bad"
    bad.write_text("wrong-token-value-77")
    done = _plan(scene, "--post", "--forge", "gitea", "--forge-url", gitea.url, "--repo-slug", scene.slug, "--pr",
                 str(pr), "--token-file", str(bad))
    assert done.returncode == 3
    assert "gitea GET" in done.stderr and "HTTP 401" in done.stderr
    assert "wrong-token-value-77" not in done.stderr + done.stdout


@pytest.mark.parametrize(("args", "message"), [
    (["--post", "--forge", "gitea"], "--post needs --repo-slug, --pr"),
    (["--forge", "gitea"], "reading the pull request's reviews needs --forge-repo, --pr"),
    (["--post", "--forge", "gitea", "--repo-slug", "a/b", "--pr", "0"], "--pr must be a pull request number"),
    (["--post", "--forge", "gitea", "--repo-slug", "a/b", "--pr", "1", "--token-file", "/nonexistent/t"],
     "cannot read the forge token file /nonexistent/t"),
    (["--post", "--forge", "gitea", "--repo-slug", "ab", "--pr", "1", "--token-file", "TOKEN"], "is not owner/name"),
    (["--post", "--forge", "gitea", "--repo-slug", "a/b", "--pr", "1", "--token-file", "TOKEN"],
     "--forge-url is required for gitea"),
])
def test_post_options_are_checked_before_any_plan(tmp_path: Path, args: list[str], message: str) -> None:
    """Missing or wrong --post options exit 2 with a one-line reason, before the repository is even read."""
    token = tmp_path / "token"
    token.write_text("t")
    args = [str(token) if a == "TOKEN" else a for a in args]
    done = subprocess.run([sys.executable, "-m", "gitopsq", "plan", str(tmp_path / "nowhere"), "--base", "a",
                           "--head", "b", *args], capture_output=True, text=True, check=False)
    assert done.returncode == 2 and message in done.stderr and "Traceback" not in done.stderr
