"""Sync records carry approvals read from the forge's reviews of the merged pull request (GitHub, recorded
protocol), matched to maintainers by their ``forgeUser`` login: a squash merge shows its approval."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from queue_repo import QueueRepo

from gitopsq.forge import Secret, open_forge
from gitopsq.source import open_source
from gitopsq.sync.audit_sink import SyncAuditRecords

from .recorder import Recorder

TEAM_A = """  - name: team-a
    paths: ["queues/team-a.yaml"]
    namespaces: [{ns}]
    maintainers: [{{name: Ann, email: ann@example.com, forgeUser: ann-gh}}]
"""


def repo_with_squash(tmp: Path) -> tuple[QueueRepo, str, str]:
    repo = QueueRepo(tmp / "q", "s")
    config = (repo.path / "gitopsq.yaml").read_text().replace(f"[{repo.team_a}, ", "[")
    repo.write("gitopsq.yaml", config.replace("capacity:", TEAM_A.format(ns=repo.team_a) + "capacity:"))
    base = repo.commit("set-up")
    repo.write("queues/team-a.yaml", repo.cq(repo.team_a, cpu="12") + repo.lq(repo.team_a))
    head = repo.commit("team-a: 12 cpu (#9)", author=("Nick", "nick@example.com"))  # the squash, as GitHub writes it
    return repo, base, head


def enrich(repo: QueueRepo, base: str, head: str, forge: Any) -> dict[str, Any]:
    sink = SyncAuditRecords(None, open_source(str(repo.path)), forge=forge)
    return dict(sink.enrich({"type": "sync.attempt", "revision": head, "previousRevision": base}).data)


def test_a_github_review_by_the_owner_satisfies_the_squash(recorder: Recorder, tmp_path: Path) -> None:
    """Ann (login ann-gh) approved PR 9, which GitHub squash-merged as the head: the record lists her review
    with her e-mail from gitopsq.yaml, and team-a's approval is present."""
    repo, base, head = repo_with_squash(tmp_path)
    recorder.route("GET", f"/repos/acme/quotas/commits/{head}/pulls", (200, [
        {"number": 9, "merge_commit_sha": head, "merged_at": "2026-11-02T10:00:00Z"}]))
    recorder.route("GET", "/repos/acme/quotas/pulls/9/reviews", (200, [
        {"user": {"login": "ann-gh"}, "state": "APPROVED", "submitted_at": "2026-11-02T09:00:00Z",
         "commit_id": "c" * 40}]))
    record = enrich(repo, base, head, open_forge("github", recorder.url, "acme/quotas", Secret("ghp_x")))
    (review,) = record["approvals"]
    assert (review["source"], review["email"], review["login"], review["pullRequest"], review["forge"]) == \
        ("review", "ann@example.com", "ann-gh", 9, "github")
    assert [(n["team"], n["present"]) for n in record["requiredApprovals"]] == [("team-a", True)]


def test_without_the_forge_the_squash_lacks_its_approval(tmp_path: Path) -> None:
    """The same squash read from Git alone carries no approval: team-a's is missing (what the export lists)."""
    repo, base, head = repo_with_squash(tmp_path)
    record = enrich(repo, base, head, None)
    assert record["approvals"] == [] and [(n["team"], n["present"]) for n in record["requiredApprovals"]] == \
        [("team-a", False)]


def test_an_unknown_reviewer_counts_for_nobody(recorder: Recorder, tmp_path: Path) -> None:
    """A reviewer whose login no maintainer lists is recorded with an empty e-mail and satisfies nothing."""
    repo, base, head = repo_with_squash(tmp_path)
    recorder.route("GET", f"/repos/acme/quotas/commits/{head}/pulls", (200, [
        {"number": 9, "merge_commit_sha": head, "merged_at": "2026-11-02T10:00:00Z"}]))
    recorder.route("GET", "/repos/acme/quotas/pulls/9/reviews", (200, [
        {"user": {"login": "mallory"}, "state": "APPROVED", "submitted_at": "2026-11-02T09:00:00Z"}]))
    record = enrich(repo, base, head, open_forge("github", recorder.url, "acme/quotas", Secret("ghp_x")))
    assert [(a["login"], a["email"]) for a in record["approvals"]] == [("mallory", "")]
    assert [n["present"] for n in record["requiredApprovals"]] == [False]
