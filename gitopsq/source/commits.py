"""A pygit2 commit as a CommitInfo value: decoded defensively, parents as written in the object."""

from __future__ import annotations

import pygit2

from gitopsq.source.facts import CommitInfo, Person
from gitopsq.source.trailers import parse_trailers


def commit_info_of(commit: pygit2.Commit) -> CommitInfo:
    signature, payload = commit.gpg_signature
    message = _decode(commit.raw_message, commit.message_encoding)
    return CommitInfo(
        sha=str(commit.id),
        parents=written_parents(commit),
        author=_person(commit.author),
        committer=_person(commit.committer),
        message=message,
        trailers=parse_trailers(message),
        signature=signature,
        signed_payload=payload,
    )


def written_parents(commit: pygit2.Commit) -> tuple[str, ...]:
    """Parents as written in the commit object: a shallow clone hides them from ``commit.parent_ids``."""
    header = commit.read_raw().split(b"\n\n", 1)[0]
    return tuple(line[7:].decode() for line in header.split(b"\n") if line.startswith(b"parent "))


def _decode(raw: bytes, encoding: str | None) -> str:
    try:
        return raw.decode(encoding or "utf-8")
    except (LookupError, UnicodeDecodeError):
        return raw.decode("utf-8", "replace")


def _person(signature: pygit2.Signature) -> Person:
    return Person(
        name=signature.raw_name.decode("utf-8", "replace"),
        email=signature.raw_email.decode("utf-8", "replace"),
        timestamp=int(signature.time),
        offset_minutes=int(signature.offset),
    )
