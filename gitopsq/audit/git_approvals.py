"""Approvals and commit facts for audit records, from the Git source's own values (gitopsq.source.facts).

Two kinds of approval evidence count:
1. a merge commit: whoever authored the merge (the person who pressed "merge") approved what it brings in;
2. ``Reviewed-by:`` and ``Approved-by:`` trailers (``Name <email>``); the trailer block is parsed once, by the
   source (gitopsq.source.trailers), so the audit and the policies read the same approvals.

Typical use in the sync loop::

    commits = source.commits_between(last_applied, revision)
    approvals = approvals_from_commits(commits)
    commit = commit_info(source.commit_info(revision), signature_status)
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from gitopsq.audit import records

if TYPE_CHECKING:
    from gitopsq.source.facts import CommitInfo, Person, SignatureStatus

APPROVAL_TRAILERS = ("Reviewed-by", "Approved-by")
_IDENTITY = re.compile(r"^\s*(?P<name>[^<]*?)\s*<(?P<email>[^<>\s]+)>\s*$")
# The source's verdicts, in the words an auditor reads in a record.
_SIGNATURE_STATES = {"good": "verified", "bad": "invalid", "unknown-key": "unverified", "unsigned": "unsigned"}


def parse_identity(value: str) -> tuple[str, str] | None:
    """``("Name", "email")`` from ``Name <email>``; None when the value holds no email."""
    match = _IDENTITY.match(value)
    return (match["name"], match["email"]) if match else None


def person(who: Person) -> records.Person:
    return records.Person(who.name, who.email, who.when)


def approvals_from_commits(commits: Iterable[CommitInfo]) -> list[records.Approval]:
    """Approvals the commits carry, in commit order, one per (approver, kind, commit)."""
    seen: set[tuple[str, str, str]] = set()
    out: list[records.Approval] = []

    def add(approval: records.Approval) -> None:
        key = (approval.email.lower(), approval.source, approval.commit)
        if key not in seen:
            seen.add(key)
            out.append(approval)

    for commit in commits:
        for trailer in commit.trailers:
            kind = next((t for t in APPROVAL_TRAILERS if t.lower() == trailer.key.lower()), None)
            identity = parse_identity(trailer.value) if kind else None
            if kind and identity:
                add(records.Approval(identity[0], identity[1], kind, commit.sha, commit.committer.when))
        if commit.is_merge:
            add(records.Approval(commit.author.name, commit.author.email, "merge", commit.sha, commit.author.when))
    return out


def commit_info(commit: CommitInfo, signature: SignatureStatus | None = None) -> records.CommitInfo:
    """The commit block of a sync record: who wrote and committed it, and what signature checking concluded."""
    state = records.SignatureState()
    if signature is not None:
        state = records.SignatureState(_SIGNATURE_STATES.get(signature.state, signature.state), signature.signer,
                                       signature.fingerprint)
    elif commit.signature is not None:
        state = records.SignatureState("unverified")
    return records.CommitInfo(commit.sha, person(commit.author), person(commit.committer), commit.summary, state)


def independent_approvals(approvals: Sequence[dict[str, Any]], author_email: str | None) -> list[dict[str, Any]]:
    """Approvals by someone other than the author (segregation of duties)."""
    author = (author_email or "").lower()
    return [a for a in approvals if str(a.get("email", "")).lower() != author]
