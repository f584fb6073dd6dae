"""Approvals as the Git history shows them.

Two kinds of evidence count:
1. a merge commit: whoever authored the merge (the person who pressed "merge") approved what it brings in;
2. ``Reviewed-by:`` and ``Approved-by:`` trailers (``Name <email>``) in the last paragraph of a commit message.

``parse_trailers`` is pure. ``approvals_between`` walks a repository (pygit2) over the commits that ``revision``
has and ``previous`` has not, which is what a sync applies.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

from gitopsq.audit.records import Approval

APPROVAL_TRAILERS = ("Reviewed-by", "Approved-by")
_TRAILER = re.compile(r"^(?P<key>[A-Za-z][A-Za-z0-9-]*):\s*(?P<name>[^<]*?)\s*<(?P<email>[^>]+)>\s*$")


def parse_trailers(message: str) -> list[tuple[str, str, str]]:
    """``(trailer, name, email)`` for each approval trailer in the message's last paragraph, in order."""
    paragraphs = [p for p in re.split(r"\n\s*\n", message.strip()) if p.strip()]
    if len(paragraphs) < 2:  # a subject line alone carries no trailers
        return []
    found = []
    for line in paragraphs[-1].splitlines():
        match = _TRAILER.match(line.strip())
        if match is None:
            continue
        key = next((t for t in APPROVAL_TRAILERS if t.lower() == match["key"].lower()), None)
        if key is not None:
            found.append((key, match["name"], match["email"]))
    return found


def _when(signature: Any) -> datetime:
    return datetime.fromtimestamp(signature.time, timezone(timedelta(minutes=signature.offset))).astimezone(UTC)


def approvals_from_commit(commit: Any) -> list[Approval]:
    """Approvals one pygit2 commit carries: its trailers, and its author if it is a merge."""
    sha = str(commit.id)
    out = [Approval(name, email, key, sha, _when(commit.committer))
           for key, name, email in parse_trailers(commit.message)]
    if len(commit.parent_ids) > 1:
        out.append(Approval(commit.author.name, commit.author.email, "merge", sha, _when(commit.author)))
    return out


def approvals_between(repo: Any, revision: str, previous: str | None, *, limit: int = 1000) -> list[Approval]:
    """Approvals on the commits reachable from ``revision`` but not from ``previous`` (newest first, unique)."""
    import pygit2

    walker = repo.walk(repo.revparse_single(revision).id, pygit2.enums.SortMode.TOPOLOGICAL)
    if previous:
        walker.hide(repo.revparse_single(previous).id)
    seen: set[tuple[str, str, str]] = set()
    out: list[Approval] = []
    for count, commit in enumerate(walker):
        if count >= limit:
            break
        for approval in approvals_from_commit(commit):
            key = (approval.email.lower(), approval.source, approval.commit)
            if key not in seen:
                seen.add(key)
                out.append(approval)
    return out


def independent_approvals(approvals: list[dict[str, Any]], author_email: str | None) -> list[dict[str, Any]]:
    """Approvals by someone other than the author (segregation of duties)."""
    author = (author_email or "").lower()
    return [a for a in approvals if str(a.get("email", "")).lower() != author]
