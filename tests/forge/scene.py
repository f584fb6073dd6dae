"""Scenes on the real Gitea: an organisation repository holding repo-template, a work tree pushing to it over
HTTP with a user's token, pull requests opened, reviewed and merged through Gitea's own API."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

from forge_rig import GiteaRig

TEMPLATE = Path(__file__).resolve().parents[2] / "repo-template"
ORG = "platform"


class Scene:
    """A Gitea repository ``platform/<name>`` seeded with repo-template, and a local clone of it."""

    def __init__(self, gitea: GiteaRig, name: str, work: Path) -> None:
        self.gitea = gitea
        self.slug = f"{ORG}/{name}"
        self.root = work / name
        self.home = work
        _ensure_org(gitea)
        status, body = gitea.api("forge-admin", "POST", f"/orgs/{ORG}/repos",
                                 {"name": name, "auto_init": False, "default_branch": "main"})
        assert status == 201, body
        for user in ("member", "maintainer"):
            status, body = gitea.api("forge-admin", "PUT", f"/repos/{self.slug}/collaborators/{user}",
                                     {"permission": "write"})
            assert status == 204, body
        shutil.copytree(TEMPLATE, self.root, ignore=shutil.ignore_patterns("traces"))
        self.git("init", "-q", "-b", "main")
        self.git("add", "-A")
        self.git("commit", "-q", "-m", "the repository template", who="forge-admin")
        self.git("push", "-q", gitea.push_url("forge-admin", ORG, name), "main", who="forge-admin")
        self.wait_for_branch("main", self.git("rev-parse", "HEAD"))

    def git(self, *args: str, who: str = "member") -> str:
        user = self.gitea.users[who]
        env = {**{k: v for k, v in os.environ.items() if not k.startswith("GIT_")},
               "GIT_AUTHOR_NAME": user.name, "GIT_AUTHOR_EMAIL": user.email, "GIT_COMMITTER_NAME": user.name,
               "GIT_COMMITTER_EMAIL": user.email, "GIT_CONFIG_NOSYSTEM": "1", "HOME": str(self.home),
               "GIT_TERMINAL_PROMPT": "0"}
        done = subprocess.run(["git", *args], cwd=self.root, env=env, capture_output=True, text=True, check=False)
        assert done.returncode == 0, f"git {args[0]} failed: {done.stderr}"
        return done.stdout.strip()

    def change(self, branch: str, path: str, old: str, new: str, message: str, *, who: str = "member") -> str:
        """Commit an edit on a new branch off main and push it; returns the commit."""
        self.git("checkout", "-q", "-B", branch, "main")
        file = self.root / path
        text = file.read_text(encoding="utf-8")
        assert old in text, f"{old!r} not in {path}"
        file.write_text(text.replace(old, new, 1), encoding="utf-8")
        self.git("commit", "-q", "-am", message, who=who)
        self.git("push", "-q", self.gitea.push_url(who, ORG, self.slug.split("/")[1]), branch, who=who)
        sha = self.git("rev-parse", "HEAD")
        self.wait_for_branch(branch, sha)
        return sha

    def wait_for_branch(self, branch: str, sha: str) -> None:
        """Gitea records a pushed branch asynchronously (its push queue): wait until its API shows ``sha``."""
        for _ in range(100):
            status, body = self.gitea.api("forge-admin", "GET", f"/repos/{self.slug}/branches/{branch}")
            if status == 200 and body["commit"]["id"] == sha:
                return
            time.sleep(0.1)
        raise AssertionError(f"Gitea never showed {branch} at {sha}")

    def open_pr(self, branch: str, title: str, who: str = "member") -> int:
        status, body = self.gitea.api(who, "POST", f"/repos/{self.slug}/pulls",
                                      {"head": branch, "base": "main", "title": title, "body": "quota change"})
        assert status == 201, body
        return int(body["number"])

    def review(self, pr: int, who: str, event: str, commit: str) -> tuple[int, Any]:
        return self.gitea.api(who, "POST", f"/repos/{self.slug}/pulls/{pr}/reviews",
                              {"event": event, "commit_id": commit, "body": f"{event.lower()} by {who}"})

    def merge(self, pr: int, who: str, style: str = "squash") -> str:
        """Merge in the forge, retrying Gitea's 405 "try again later" while it checks mergeability."""
        for _ in range(60):
            status, body = self.gitea.api(who, "POST", f"/repos/{self.slug}/pulls/{pr}/merge", {"Do": style})
            if status != 405 or "try again later" not in str(body).lower():
                break
            time.sleep(0.25)
        assert status == 200, (status, body)
        status, pull = self.gitea.api(who, "GET", f"/repos/{self.slug}/pulls/{pr}")
        assert status == 200 and pull["merged"], pull
        return str(pull["merge_commit_sha"])


def _ensure_org(gitea: GiteaRig) -> None:
    status, body = gitea.api("forge-admin", "GET", f"/orgs/{ORG}")
    if status == 200:
        return
    status, body = gitea.api("forge-admin", "POST", "/orgs", {"username": ORG, "visibility": "public"})
    assert status == 201, body
