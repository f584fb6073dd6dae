"""A forge's merge or squash commit, vouched for by the approvals given in the forge (docs/policy.md "Forge
merges"). Pure.

A commit whose signature verified with a key listed under ``forgeKeys`` (signer ``forge:<name>``) was made by the
forge, not by a person: the key proves only that the forge wrote it. The forge merged a pull request, and the
person who stands for the change is whoever approved that pull request in the forge. So the commit is bound to
the maintainers who approved it (their teams become the signature's teams), under two rules:

1. the approver is a maintainer in the trusted gitopsq.yaml, matched by e-mail or by ``forgeUser`` login;
2. the approver is not the commit's author (nobody approves their own change).

With no such approval the forge's signature binds the commit to nobody, and the author's claim judges it as it
would an unsigned commit. The approvals are read from the forge by the caller (``forgeApprovals`` on the commit:
``[{email, login, forge, at}]``); without a forge client there are none.

The same two rules judge a pull request before it merges (`gitopsq check`/`plan` with forge options): its
commits carry ``reviewApprovals``, the standing approvals given at the PR's head commit, and the teams of the
maintainers they name (never a commit's own author) join the author's teams (`review_block`), so a team member's
change passes ``team-owns-path`` once a maintainer of each touched team approved it, and the refusal until then
says whose approval it awaits.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

FORGE_PREFIX = "forge:"


def forge_of(signer: str) -> str:
    """The forge's name for a signer identity ``forge:<name>``; '' for a person."""
    return signer[len(FORGE_PREFIX):] if signer.startswith(FORGE_PREFIX) else ""


def vouching_maintainers(approvals: Sequence[Mapping[str, Any]] | Any, author_email: str,
                         repo: Mapping[str, Any]) -> tuple[dict[str, Any] | None, list[str], list[str]]:
    """(first approving maintainer, the teams of every approving maintainer, their e-mails) under the module's
    rules; (None, [], []) when no approval counts."""
    author = author_email.strip().lower()
    first: dict[str, Any] | None = None
    teams: list[str] = []
    emails: list[str] = []
    for given in approvals if isinstance(approvals, Sequence) else ():
        if not isinstance(given, Mapping):
            continue
        email = str(given.get("email") or "").strip().lower()
        login = str(given.get("login") or "").strip().lower()
        for team in repo.get("teams", []):
            for person in team["maintainers"]:
                by_email = bool(email) and person["email"] == email
                by_login = bool(login) and str(person.get("forgeUser") or "").lower() == login
                if not (by_email or by_login) or person["email"] == author or not person["email"]:
                    continue
                first = first or {"name": person["name"], "email": person["email"]}
                if team["name"] not in teams:
                    teams.append(team["name"])
                if person["email"] not in emails:
                    emails.append(person["email"])
    return first, teams, emails


def review_block(approvals: Sequence[Mapping[str, Any]] | Any, author_email: str,
                 repo: Mapping[str, Any]) -> dict[str, Any] | None:
    """The ``review`` of a commit under pull-request review: the maintainers whose approval counts and their
    teams; None when no forge was asked (``approvals`` absent), so rules then judge the author alone."""
    if approvals is None:
        return None
    _, teams, emails = vouching_maintainers(approvals, author_email, repo)
    return {"teams": teams, "approvedBy": emails}
