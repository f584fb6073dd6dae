"""GitLab REST client (``/api/v4``, ``PRIVATE-TOKEN``); merge requests play the part of pull requests.

Covered by recorded-protocol tests against a loopback server answering as GitLab's documented API, not by
GitLab itself (docs/source.md "Forges").
"""

from __future__ import annotations

import urllib.parse
from typing import Any

from gitopsq.forge.http import Backoff, Http, Secret
from gitopsq.forge.port import Approval, Comment, State, Status

# GitLab's commit statuses: pending, running, success, failed, canceled. It has no "error": a check that could
# not run has failed as far as a merge is concerned.
_TO_GITLAB: dict[State, str] = {"pending": "pending", "running": "running", "success": "success",
                                "failure": "failed", "error": "failed"}
_FROM_GITLAB: dict[str, State] = {"pending": "pending", "created": "pending", "running": "running",
                                  "success": "success", "failed": "failure", "canceled": "error",
                                  "skipped": "success"}
APPROVED_NOTE = "approved this merge request"


class GitLab:
    """One project on gitlab.com or a self-managed GitLab."""

    name = "gitlab"

    def __init__(self, url: str, slug: str, token: Secret, *, timeout: float = 10.0,
                 backoff: Backoff | None = None) -> None:
        self.slug = slug
        self._project = "/projects/" + urllib.parse.quote(slug, safe="")
        self.http = Http("gitlab", url.rstrip("/") + "/api/v4", secret_headers={"PRIVATE-TOKEN": token},
                         timeout=timeout, backoff=backoff or Backoff())

    def set_status(self, sha: str, state: State, *, context: str, description: str,
                   target_url: str | None = None) -> None:
        body: dict[str, Any] = {"state": _TO_GITLAB[state], "name": context, "description": description[:255]}
        if target_url:
            body["target_url"] = target_url
        self.http.json("POST", f"{self._project}/statuses/{sha}", body)

    def statuses(self, sha: str) -> tuple[Status, ...]:
        rows = self.http.pages(f"{self._project}/repository/commits/{sha}/statuses", size_param="per_page", size=100,
                               query=[("order_by", "id"), ("sort", "desc")])  # GitLab lists oldest first
        return tuple(Status(context=r.get("name") or "", state=_FROM_GITLAB.get(r.get("status") or "", "pending"),
                            description=r.get("description") or "", target_url=r.get("target_url") or None)
                     for r in rows)

    def upsert_comment(self, pr: int, marker: str, body: str) -> Comment:
        notes = f"{self._project}/merge_requests/{pr}/notes"
        for n in self.http.pages(notes, size_param="per_page", size=100):
            if not n.get("system") and marker in (n.get("body") or ""):
                self.http.json("PUT", f"{notes}/{n['id']}", {"body": body})
                return Comment(id=int(n["id"]), created=False)
        made = self.http.json("POST", notes, {"body": body})
        return Comment(id=int(made["id"]), created=True)

    def approvals(self, pr: int) -> tuple[Approval, ...]:
        """Who approves now (the approvals endpoint); when, from the newest "approved" system note of each.

        GitLab does not say which commit an approval was given on, so ``commit`` is None.
        """
        state = self.http.json("GET", f"{self._project}/merge_requests/{pr}/approvals") or {}
        approvers = [str((a.get("user") or {}).get("username") or "") for a in state.get("approved_by") or ()]
        when: dict[str, str] = {}
        notes = self.http.pages(f"{self._project}/merge_requests/{pr}/notes", size_param="per_page", size=100,
                                query=[("sort", "asc"), ("order_by", "created_at")])
        for n in notes:
            if n.get("system") and (n.get("body") or "").strip() == APPROVED_NOTE:
                who = str((n.get("author") or {}).get("username") or "")
                when[who] = str(n.get("created_at") or "")
        return tuple(Approval(reviewer=who, at=when.get(who) or None, commit=None, forge=self.name)
                     for who in approvers if who)

    def pull_request_of(self, sha: str) -> int | None:
        mrs = self.http.pages(f"{self._project}/repository/commits/{sha}/merge_requests", size_param="per_page",
                              size=100)
        for mr in mrs:
            if mr.get("state") == "merged" and sha in (mr.get("merge_commit_sha"), mr.get("squash_commit_sha")):
                return int(mr["iid"])
        return None
