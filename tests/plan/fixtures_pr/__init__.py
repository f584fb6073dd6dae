"""Real Git repositories built from repo-template for the pull-request plan tests and benchmark."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

TEMPLATE = Path(__file__).resolve().parents[3] / "repo-template"
PEOPLE = {
    "alice": ("Alice Admin", "alice@example.com"),     # platform
    "carol": ("Carol Chen", "carol@example.com"),      # ml-research
    "erin": ("Erin Okafor", "erin@example.com"),       # data-science
    "farid": ("Farid Haddad", "farid@example.com"),    # serving
}


class TemplateRepo:
    """A work tree holding repo-template with its first commit on ``main`` (by the platform team)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.clock = 0
        shutil.copytree(TEMPLATE, root, ignore=shutil.ignore_patterns("traces"))
        self.git("init", "-q", "-b", "main")
        self.commit("the repository template", "alice")

    def git(self, *args: str, who: str = "alice") -> str:
        name, email = PEOPLE[who]
        self.clock += 60  # fixed dates: the same commits get the same ids on every run (docs/plan.md's sample)
        when = f"{1_767_603_600 + self.clock} +0000"
        env = {**os.environ, "GIT_AUTHOR_DATE": when, "GIT_COMMITTER_DATE": when,
               "GIT_AUTHOR_NAME": name, "GIT_AUTHOR_EMAIL": email, "GIT_COMMITTER_NAME": name,
               "GIT_COMMITTER_EMAIL": email, "GIT_CONFIG_NOSYSTEM": "1", "HOME": str(self.root.parent)}
        done = subprocess.run(["git", *args], cwd=self.root, env=env, capture_output=True, text=True, check=True)
        return done.stdout.strip()

    def commit(self, message: str, who: str) -> str:
        self.git("add", "-A", who=who)
        self.git("commit", "-q", "--allow-empty", "-m", message, who=who)
        return self.git("rev-parse", "HEAD")

    def branch(self, name: str, start: str = "main") -> None:
        self.git("checkout", "-q", "-B", name, start)

    def edit(self, path: str, change: Callable[[str], str]) -> None:
        file = self.root / path
        before = file.read_text(encoding="utf-8")
        after = change(before)
        assert after != before, f"edit of {path} changed nothing"
        file.write_text(after, encoding="utf-8")

    def replace(self, path: str, old: str, new: str) -> None:
        self.edit(path, lambda text: text.replace(old, new, 1))

    def write(self, path: str, text: str) -> None:
        file = self.root / path
        file.parent.mkdir(parents=True, exist_ok=True)
        file.write_text(text, encoding="utf-8")

    def remove(self, path: str) -> None:
        (self.root / path).unlink()

    def move(self, old: str, new: str) -> None:
        (self.root / new).parent.mkdir(parents=True, exist_ok=True)
        self.git("mv", old, new)


DS_CPU = '{name: cpu, nominalQuota: "96", borrowingLimit: "32"}'


def raise_data_science_cpu(repo: TemplateRepo, to: str = "128") -> str:
    """The sample pull request: data-science raises its on-demand CPU quota (a commit on branch raise-cpu)."""
    repo.branch("raise-cpu")
    repo.replace("teams/data-science/cluster-queue.yaml", DS_CPU,
                 f'{{name: cpu, nominalQuota: "{to}", borrowingLimit: "32"}}')
    return repo.commit(f"data-science: on-demand CPU 96 → {to}", "erin")
