"""Forges (Gitea, GitHub, GitLab): commit statuses, pull-request comments, approvals from reviews, and the
notifications gitopsq sends to people (docs/source.md "Forges", docs/notifications.md).

The interface is `Forge` (gitopsq.forge.port); `open_forge` picks the REST client for a forge's name.
"""

from __future__ import annotations

from gitopsq.errors import UsageError
from gitopsq.forge.gitea import Gitea
from gitopsq.forge.github import GitHub
from gitopsq.forge.gitlab import GitLab
from gitopsq.forge.http import Backoff, ForgeError, Secret, load_token
from gitopsq.forge.port import FORGES, Approval, Comment, Forge, State, Status

DEFAULT_URLS = {"github": "https://api.github.com", "gitlab": "https://gitlab.com"}

__all__ = ["FORGES", "Approval", "Backoff", "Comment", "Forge", "ForgeError", "Secret", "State", "Status",
           "load_token", "open_forge"]


def open_forge(kind: str, url: str | None, slug: str, token: Secret, *, timeout: float = 10.0,
               backoff: Backoff | None = None) -> Forge:
    """The client for ``kind`` (gitea, github, gitlab) on ``url`` (GitHub and GitLab default to their SaaS)."""
    if slug.count("/") < 1 or not all(slug.split("/")):
        raise UsageError(f"repository slug {slug!r} is not owner/name")
    if kind not in FORGES:
        raise UsageError(f"unknown forge {kind!r}: expected one of {', '.join(FORGES)}")
    base = url or DEFAULT_URLS.get(kind)
    if not base:
        raise UsageError(f"--forge-url is required for {kind}")
    if kind == "gitea":
        return Gitea(base, slug, token, timeout=timeout, backoff=backoff)
    if kind == "github":
        return GitHub(base, slug, token, timeout=timeout, backoff=backoff)
    if kind == "gitlab":
        return GitLab(base, slug, token, timeout=timeout, backoff=backoff)
    raise UsageError(f"unknown forge {kind!r}: expected one of {', '.join(FORGES)}")
