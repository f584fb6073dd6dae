"""Approvals read from Git history: merge commits and Reviewed-by / Approved-by trailers."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pygit2
import pytest

from gitopsq.audit.approvals import approvals_between, independent_approvals, parse_trailers


@pytest.mark.parametrize(("message", "expected"), [
    ("Raise quota\n\nReviewed-by: Bob B <bob@example.com>\n", [("Reviewed-by", "Bob B", "bob@example.com")]),
    ("Raise quota\n\nbody text\n\nApproved-by: Carol <carol@example.com>\nSigned-off-by: Ann <ann@example.com>",
     [("Approved-by", "Carol", "carol@example.com")]),
    ("Raise quota\n\nreviewed-by: Dan <dan@example.com>", [("Reviewed-by", "Dan", "dan@example.com")]),
    ("Reviewed-by: Bob <bob@example.com>", []),
    ("Raise quota\n\nReviewed-by: Bob <bob@example.com>\n\nlater paragraph without trailers", []),
    ("Raise quota\n\nReviewed-by: no email here", []),
], ids=["reviewed-by-trailer", "approved-by-among-other-trailers", "trailer-key-case-insensitive",
        "subject-line-alone-is-not-a-trailer", "trailers-only-count-in-the-last-paragraph", "trailer-without-email"])
def test_parse_trailers(message: str, expected: list[tuple[str, str, str]]) -> None:
    """Approval trailers are read from the last paragraph only, with a name and an email."""
    assert parse_trailers(message) == expected


def _git(repo: Path, *args: str, who: str = "Ann") -> None:
    env = {**os.environ, "GIT_AUTHOR_NAME": who, "GIT_AUTHOR_EMAIL": f"{who.lower()}@example.com",
           "GIT_COMMITTER_NAME": who, "GIT_COMMITTER_EMAIL": f"{who.lower()}@example.com"}
    subprocess.run(["git", "-C", str(repo), *args], check=True, env=env, capture_output=True)


def test_approvals_between_revisions_come_from_merges_and_trailers(tmp_path: Path) -> None:
    """Commits new since the previous revision yield the merger and the trailer approvers, nothing older."""
    repo = tmp_path / "queues"
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True)
    _git(repo, "commit", "--allow-empty", "-m", "base\n\nReviewed-by: Old <old@example.com>")
    base = pygit2.Repository(str(repo)).head.target
    _git(repo, "checkout", "-q", "-b", "feature")
    _git(repo, "commit", "--allow-empty", "-m", "raise quota\n\nApproved-by: Carol <carol@example.com>")
    _git(repo, "checkout", "-q", "main")
    _git(repo, "merge", "--no-ff", "-q", "-m", "Merge feature", "feature", who="Bob")
    approvals = approvals_between(pygit2.Repository(str(repo)), "main", str(base))
    assert sorted((a.email, a.source) for a in approvals) == [("bob@example.com", "merge"),
                                                              ("carol@example.com", "Approved-by")]


def test_the_author_approving_their_own_change_is_not_independent() -> None:
    """Segregation of duties: an approval by the author's own email does not count."""
    approvals = [{"email": "Ann@example.com"}, {"email": "bob@example.com"}]
    assert independent_approvals(approvals, "ann@example.com") == [{"email": "bob@example.com"}]
