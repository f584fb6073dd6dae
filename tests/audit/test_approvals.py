"""Approvals and commit facts for sync records, read through the real Git source."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from gitopsq.audit.git_approvals import approvals_from_commits, commit_info, independent_approvals, parse_identity
from gitopsq.source import open_source
from gitopsq.source.facts import SignatureStatus


@pytest.mark.parametrize(("value", "expected"), [
    ("Bob B <bob@example.com>", ("Bob B", "bob@example.com")),
    ("<carol@example.com>", ("", "carol@example.com")),
    ("no email here", None),
    ("Two <a@x> <b@x>", None),
], ids=["name-and-email", "email-only", "no-email-is-not-an-approval", "two-emails-is-ambiguous"])
def test_parse_identity(value: str, expected: tuple[str, str] | None) -> None:
    """An approval trailer value must be one `Name <email>` identity."""
    assert parse_identity(value) == expected


def _git(repo: Path, *args: str, who: str = "Ann") -> None:
    env = {**os.environ, "GIT_AUTHOR_NAME": who, "GIT_AUTHOR_EMAIL": f"{who.lower()}@example.com",
           "GIT_COMMITTER_NAME": who, "GIT_COMMITTER_EMAIL": f"{who.lower()}@example.com"}
    subprocess.run(["git", "-C", str(repo), *args], check=True, env=env, capture_output=True)


@pytest.fixture
def history(tmp_path: Path) -> tuple[Path, str]:
    """main: base ← merge of a feature branch (Approved-by trailer) made by Bob."""
    repo = tmp_path / "queues"
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True)
    _git(repo, "commit", "--allow-empty", "-m", "base\n\nReviewed-by: Old <old@example.com>")
    base = subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True,
                          check=True).stdout.strip()
    _git(repo, "checkout", "-q", "-b", "feature")
    _git(repo, "commit", "--allow-empty", "-m",
         "raise quota\n\nApproved-by: Carol <carol@example.com>\nReviewed-by: not an identity")
    _git(repo, "checkout", "-q", "main")
    _git(repo, "merge", "--no-ff", "-q", "-m", "Merge feature", "feature", who="Bob")
    return repo, base


def test_approvals_since_the_last_revision_come_from_merges_and_trailers(history: tuple[Path, str]) -> None:
    """Commits new since the previous revision yield the merger and the trailer approvers, nothing older."""
    repo, base = history
    source = open_source(str(repo))
    approvals = approvals_from_commits(source.commits_between(base, "main"))
    assert [(a.email, a.source) for a in approvals] == [("carol@example.com", "Approved-by"),
                                                        ("bob@example.com", "merge")]


@pytest.mark.parametrize(("state", "expected"), [
    ("good", "verified"), ("bad", "invalid"), ("unknown-key", "unverified"), ("unsigned", "unsigned"),
], ids=["good-signature-is-verified", "bad-signature-is-invalid", "unknown-key-is-unverified", "unsigned"])
def test_commit_info_maps_the_source_signature_verdict(history: tuple[Path, str], state: str,
                                                       expected: str) -> None:
    """The sync record's commit block carries author, committer and the verifier's conclusion in audit words."""
    repo, _ = history
    source = open_source(str(repo))
    status = SignatureStatus(state, "ssh", "bob" if state == "good" else None, "SHA256:abc", "")  # type: ignore[arg-type]
    info = commit_info(source.commit_info("main"), status)
    assert info.signature.state == expected
    assert (info.author.email, info.committer.email, info.subject) == ("bob@example.com", "bob@example.com",
                                                                       "Merge feature")


def test_the_author_approving_their_own_change_is_not_independent() -> None:
    """Segregation of duties: an approval by the author's own email does not count."""
    approvals = [{"email": "Ann@example.com"}, {"email": "bob@example.com"}]
    assert independent_approvals(approvals, "ann@example.com") == [{"email": "bob@example.com"}]
