"""Commit metadata: people, times, messages and trailers, exactly as recorded in the commit object."""

from __future__ import annotations

import pytest

from gitopsq.source import Trailer, open_source
from gitopsq.source.trailers import parse_trailers

from .conftest import GitRepo

TRAILERS = [
    pytest.param("Subject\n\nBody text.\n\nReviewed-by: Rita <rita@example.com>\nSigned-off-by: Ann <ann@x>\n",
                 [("Reviewed-by", "Rita <rita@example.com>"), ("Signed-off-by", "Ann <ann@x>")], id="two-trailers"),
    pytest.param("Subject\n\nApproved-by: A\nApproved-by: B\n", [("Approved-by", "A"), ("Approved-by", "B")],
                 id="repeated-key-kept-in-order"),
    pytest.param("Subject\n\nReviewed-by: Rita\n  <rita@example.com>\n",
                 [("Reviewed-by", "Rita <rita@example.com>")], id="continuation-line-folds"),
    pytest.param("Reviewed-by: only a subject\n", [], id="subject-is-never-a-trailer"),
    pytest.param("Subject\n\nReviewed-by: Rita\nthis line is prose\n", [], id="prose-paragraph-is-not-a-block"),
    pytest.param("Subject\n\nReviewed-by: Rita\n\nClosing words.\n", [], id="only-the-last-paragraph-counts"),
    pytest.param("Subject\n\nreviewed-by:rita\n# a comment\n", [("reviewed-by", "rita")], id="comments-skipped"),
    pytest.param("Subject\r\n\r\nSigned-off-by: Ann\r\n", [("Signed-off-by", "Ann")], id="crlf-message"),
]


@pytest.mark.parametrize(("message", "expected"), TRAILERS)
def test_trailer_parsing(message: str, expected: list[tuple[str, str]]) -> None:
    """Trailers are the last non-subject paragraph of Token: value lines, as git interpret-trailers reads them."""
    assert parse_trailers(message) == tuple(Trailer(k, v) for k, v in expected)


def test_commit_info_carries_people_times_and_trailers(repo: GitRepo) -> None:
    """commit_info reports author and committer separately, with their recorded times and offsets, and trailers."""
    env = {"GIT_AUTHOR_DATE": "2026-03-01T10:00:00+0200", "GIT_COMMITTER_DATE": "2026-03-02T08:30:00-0500"}
    sha = repo.commit("Raise team-a quota\n\nWhy: burst.\n\nReviewed-by: Rita <rita@example.com>\n"
                      "Approved-by: Paul <paul@example.com>\nSigned-off-by: Ann Author <ann@example.com>",
                      {"a.yaml": "x: 1\n"}, env=env)
    info = open_source(str(repo.path)).commit_info(sha)
    assert info.sha == sha and info.parents == () and not info.is_merge
    assert (info.author.name, info.author.email, info.author.offset_minutes) == ("Ann Author", "ann@example.com", 120)
    assert info.author.when.isoformat() == "2026-03-01T10:00:00+02:00"
    assert (info.committer.name, info.committer.offset_minutes) == ("Carl Committer", -300)
    assert info.summary == "Raise team-a quota"
    assert info.reviewed_by == ("Rita <rita@example.com>",)
    assert info.approved_by == ("Paul <paul@example.com>",)
    assert info.signed_off_by == ("Ann Author <ann@example.com>",)
    assert info.signature is None and info.signed_payload is None


def test_undecodable_names_and_messages_do_not_crash(repo: GitRepo) -> None:
    """A commit with a Latin-1 author name and message is read with replacement characters, not an error."""
    repo.write({"a.yaml": "x: 1\n"})
    repo.git("add", "-A")
    tree = repo.git("write-tree")
    raw = (f"tree {tree}\nauthor Jos\xe9 <j@x> 1700000000 +0000\ncommitter Jos\xe9 <j@x> 1700000000 +0000\n\n"
           "caf\xe9\n").encode("latin-1")
    sha = repo.git("hash-object", "-t", "commit", "-w", "--stdin", "--literally", input=raw)
    info = open_source(str(repo.path)).commit_info(sha)
    assert info.author.name == "Jos\ufffd" and info.message.startswith("caf\ufffd")
