"""GitHub REST client (``https://api.github.com`` or GitHub Enterprise's ``/api/v3``), bearer token.

Covered by recorded-protocol tests against a loopback server answering as GitHub's documented API, not by
GitHub itself (docs/source.md "Forges").
"""

from __future__ import annotations

import urllib.parse
from typing import Any

from gitopsq.forge.http import Backoff, Http, Secret
from gitopsq.forge.port import Approval, Comment, State, Status, latest_verdicts

_TO_GITHUB: dict[State, str] = {"pending": "pending", "running": "pending", "success": "success",
                                "failure": "failure", "error": "error"}
_FROM_GITHUB: dict[str, State] = {"pending": "pending", "success": "success", "failure": "failure", "error": "error"}


class GitHub:
    """One repository on github.com or a GitHub Enterprise server."""

    name = "github"

    def __init__(self, url: str, slug: str, token: Secret, *, timeout: float = 10.0,
                 backoff: Backoff | None = None) -> None:
        self.slug = slug
        self._repo = "/repos/" + "/".join(urllib.parse.quote(p, safe="") for p in slug.split("/", 1))
        self.http = Http("github", url.rstrip("/"),
                         headers={"Accept": "application/vnd.github+json", "X-GitHub-Api-Version": "2022-11-28"},
                         secret_headers={"Authorization": Secret("Bearer " + token.reveal())},
                         timeout=timeout, backoff=backoff or Backoff())

    def set_status(self, sha: str, state: State, *, context: str, description: str,
                   target_url: str | None = None) -> None:
        body: dict[str, Any] = {"state": _TO_GITHUB[state], "context": context, "description": description[:140]}
        if target_url:
            body["target_url"] = target_url
        self.http.json("POST", f"{self._repo}/statuses/{sha}", body)

    def statuses(self, sha: str) -> tuple[Status, ...]:
        rows = self.http.pages(f"{self._repo}/commits/{sha}/statuses", size_param="per_page", size=100)
        return tuple(Status(context=r.get("context") or "", state=_FROM_GITHUB.get(r.get("state") or "", "pending"),
                            description=r.get("description") or "", target_url=r.get("target_url") or None)
                     for r in rows)

    def upsert_comment(self, pr: int, marker: str, body: str) -> Comment:
        for c in self.http.pages(f"{self._repo}/issues/{pr}/comments", size_param="per_page", size=100):
            if marker in (c.get("body") or ""):
                self.http.json("PATCH", f"{self._repo}/issues/comments/{c['id']}", {"body": body})
                return Comment(id=int(c["id"]), created=False)
        made = self.http.json("POST", f"{self._repo}/issues/{pr}/comments", {"body": body})
        return Comment(id=int(made["id"]), created=True)

    def approvals(self, pr: int) -> tuple[Approval, ...]:
        rows = [(str((r.get("user") or {}).get("login") or ""), str(r.get("state") or ""), r.get("submitted_at"),
                 r.get("commit_id"))
                for r in self.http.pages(f"{self._repo}/pulls/{pr}/reviews", size_param="per_page", size=100)]
        verdicts = latest_verdicts(rows)  # a DISMISSED review replaces the approval it dismissed
        return tuple(Approval(reviewer=who, at=at, commit=commit, forge=self.name)
                     for who, (verdict, at, commit) in verdicts.items() if verdict == "APPROVED" and who)

    def pull_request_of(self, sha: str) -> int | None:
        for pr in self.http.pages(f"{self._repo}/commits/{sha}/pulls", size_param="per_page", size=100):
            if pr.get("merge_commit_sha") == sha and pr.get("merged_at"):
                return int(pr["number"])
        return None
