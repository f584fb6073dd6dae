"""Gitea (and Forgejo) REST client: ``/api/v1``, ``Authorization: token T``; tested against a real Gitea 1.26."""

from __future__ import annotations

import urllib.parse
from typing import Any

from gitopsq.forge.http import Backoff, ForgeError, Http, Secret
from gitopsq.forge.port import Approval, Comment, Review, State, Status, latest_verdicts

# Gitea has no "running": a running check is pending there.
_TO_GITEA: dict[State, str] = {"pending": "pending", "running": "pending", "success": "success",
                               "failure": "failure", "error": "error"}
_FROM_GITEA: dict[str, State] = {"pending": "pending", "success": "success", "failure": "failure", "error": "error",
                                 "warning": "failure", "skipped": "success"}


class Gitea:
    """One repository on one Gitea instance."""

    name = "gitea"

    def __init__(self, url: str, slug: str, token: Secret, *, timeout: float = 10.0,
                 backoff: Backoff | None = None) -> None:
        self.slug = slug
        self._repo = "/repos/" + "/".join(urllib.parse.quote(p, safe="") for p in slug.split("/", 1))
        self.http = Http("gitea", url.rstrip("/") + "/api/v1", secret_headers={"Authorization": _auth(token)},
                         timeout=timeout, backoff=backoff or Backoff())

    def set_status(self, sha: str, state: State, *, context: str, description: str,
                   target_url: str | None = None) -> None:
        body = {"state": _TO_GITEA[state], "context": context, "description": description[:255],
                "target_url": target_url or ""}
        self.http.json("POST", f"{self._repo}/statuses/{sha}", body)

    def statuses(self, sha: str) -> tuple[Status, ...]:
        rows = self.http.pages(f"{self._repo}/commits/{sha}/statuses", size_param="limit",
                               # newest first: Gitea's default orders by a time in whole seconds (ties are
                               # arbitrary), and its "leastindex" means index DESC (models/git/commit_status.go)
                               query=[("sort", "leastindex")])
        return tuple(Status(context=r.get("context") or "", state=_FROM_GITEA.get(r.get("status") or "", "pending"),
                            description=r.get("description") or "", target_url=r.get("target_url") or None)
                     for r in rows)

    def upsert_comment(self, pr: int, marker: str, body: str) -> Comment:
        for c in self.http.pages(f"{self._repo}/issues/{pr}/comments", size_param="limit"):
            if marker in (c.get("body") or ""):
                self.http.json("PATCH", f"{self._repo}/issues/comments/{c['id']}", {"body": body})
                return Comment(id=int(c["id"]), created=False)
        made = self.http.json("POST", f"{self._repo}/issues/{pr}/comments", {"body": body})
        return Comment(id=int(made["id"]), created=True)

    def approvals(self, pr: int) -> tuple[Approval, ...]:
        rows: list[Review] = []
        emails: dict[str, str] = {}
        for r in self.http.pages(f"{self._repo}/pulls/{pr}/reviews", size_param="limit"):
            if r.get("dismissed"):
                continue
            who = _login(r.get("user"))
            email = str((r.get("user") or {}).get("email") or "")
            if who and email:  # a reviewer who keeps it private shows a placeholder that matches no maintainer
                emails[who] = email
            rows.append((who, str(r.get("state") or ""), r.get("submitted_at"), r.get("commit_id")))
        verdicts = latest_verdicts(rows)
        return tuple(Approval(reviewer=who, at=at, commit=commit, forge=self.name, email=emails.get(who))
                     for who, (verdict, at, commit) in verdicts.items() if verdict == "APPROVED" and who)

    def pull_request_of(self, sha: str) -> int | None:
        try:
            pr = self.http.json("GET", f"{self._repo}/commits/{sha}/pull")
        except ForgeError as err:
            if err.status == 404:
                return None
            raise
        if not isinstance(pr, dict) or not pr.get("merged") or pr.get("merge_commit_sha") != sha:
            return None
        return int(pr["number"])


def _auth(token: Secret) -> Secret:
    return Secret("token " + token.reveal())


def _login(user: Any) -> str:
    return str((user or {}).get("login") or "") if isinstance(user, dict) else ""
