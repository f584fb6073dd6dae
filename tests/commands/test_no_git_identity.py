"""Every place gitopsq writes commits, notes or refs works on a machine with no git identity (an empty HOME, no
system configuration), as a CI runner is: the demo's repository, the audit branch written locally and pushed to a
remote by the audit writer, and the approvals note (on a real Gitea: tests/forge/test_notes_on_gitea.py). Each
runs as its own process with an environment that holds no identity at all."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pygit2
import pytest

from gitopsq.audit.gitstore import DEFAULT_BRANCH as BRANCH
from gitopsq.audit.verify import verify_branch

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def bare_env(tmp_path: Path) -> dict[str, str]:
    """The environment of a new machine: HOME an empty directory, git's system configuration ignored, no GIT_*."""
    home = tmp_path / "empty-home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GIT_", "GNUPG", "SSH_"))}
    env.update({"HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config"), "XDG_CACHE_HOME": str(home / ".cache"),
                "GIT_CONFIG_NOSYSTEM": "1", "PYTHONPATH": str(ROOT)})
    env.pop("GITOPSQ_KUSTOMIZE", None)  # the fleet step is not what this test is about: it is skipped, said why
    done = subprocess.run(["git", "var", "GIT_COMMITTER_IDENT"], env=env, capture_output=True, text=True,
                          check=False, cwd=tmp_path)
    assert done.returncode != 0, "the environment must hold no git identity, or this test proves nothing"
    return env


def _authors(repo: pygit2.Repository, ref: str) -> set[str]:
    return {f"{c.author.name} <{c.author.email}> / {c.committer.name} <{c.committer.email}>"
            for c in repo.walk(repo.references[ref].target)}


def test_demo_and_its_audit_branch_need_no_git_identity(tmp_path: Path, bare_env: dict[str, str]) -> None:
    """`gitopsq demo` commits the template and writes the audit branch with identities of its own."""
    done = subprocess.run([sys.executable, "-m", "gitopsq", "demo", "--dir", str(tmp_path / "tour")],
                          env=bare_env, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "✓ audit" in done.stdout and "✗" not in done.stdout
    repo = pygit2.Repository(str(tmp_path / "tour" / "queues"))
    assert verify_branch(repo, BRANCH).ok
    assert _authors(repo, f"refs/heads/{BRANCH}") == {"gitopsq demo <demo@gitopsq.invalid> / gitopsq demo "
                                                      "<demo@gitopsq.invalid>"}
    verified = subprocess.run([sys.executable, "-m", "gitopsq", "audit", "verify", str(tmp_path / "tour" / "queues")],
                              env=bare_env, capture_output=True, text=True, timeout=120, check=False)
    assert verified.returncode == 0, verified.stdout + verified.stderr


def test_the_audit_writer_pushes_to_a_remote_with_no_git_identity(tmp_path: Path, bare_env: dict[str, str]) -> None:
    """The controller's audit writer, in a process of its own, appends records to a remote's audit branch."""
    remote = tmp_path / "remote.git"
    subprocess.run(["git", "init", "-q", "--bare", str(remote)], check=True, env=bare_env)
    script = (
        "import sys\n"
        "from datetime import UTC, datetime\n"
        "from gitopsq.audit import AuditTrail, TrailSettings, records\n"
        "settings = TrailSettings(batch_seconds=0.1)\n"
        "record = records.sync_attempt(time=datetime.now(UTC), source_url='file:///queues', revision='0' * 40,\n"
        "                              previous_revision=None, result='applied')\n"
        "with AuditTrail.open(sys.argv[1], sys.argv[2], settings=settings) as trail:\n"
        "    trail.record(record)\n"
        "    sys.exit(0 if trail.flush(60) else 1)\n"
    )
    done = subprocess.run([sys.executable, "-c", script, str(remote), str(tmp_path / "wal")], env=bare_env,
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    repo = pygit2.Repository(str(remote))
    assert verify_branch(repo, BRANCH).ok
    assert _authors(repo, f"refs/heads/{BRANCH}") == {"gitopsq <gitopsq@localhost> / gitopsq <gitopsq@localhost>"}
