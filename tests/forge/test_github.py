"""The GitHub client, as recorded-protocol tests: a loopback server answers in the shape of GitHub's documented
REST API (docs.github.com/rest: commits/statuses, issues/comments, pulls/reviews, commits/pulls). This pins the
requests gitopsq sends and how it reads the answers; it is not GitHub itself."""

from __future__ import annotations

from gitopsq.forge import Secret, open_forge

from .recorder import Recorder

SHA = "a" * 40


def _client(recorder: Recorder):  # type: ignore[no-untyped-def]
    return open_forge("github", recorder.url, "acme/quotas", Secret("ghp_secret"))


def test_set_status_sends_githubs_states_and_headers(recorder: Recorder) -> None:
    """gitopsq's "running" becomes GitHub's "pending"; the call carries the bearer token and API version."""
    recorder.route("POST", f"/repos/acme/quotas/statuses/{SHA}", (201, {"id": 1}))
    gh = _client(recorder)
    gh.set_status(SHA, "running", context="gitopsq/sync", description="applying", target_url="https://x/1")
    gh.set_status(SHA, "failure", context="gitopsq/sync", description="d" * 300)
    first, second = recorder.requests
    assert first.json() == {"state": "pending", "context": "gitopsq/sync", "description": "applying",
                            "target_url": "https://x/1"}
    assert first.headers["authorization"] == "Bearer ghp_secret"
    assert first.headers["x-github-api-version"] == "2022-11-28"
    assert second.json()["state"] == "failure" and len(second.json()["description"]) == 140


def test_statuses_read_back(recorder: Recorder) -> None:
    """The statuses listing maps GitHub's states back to gitopsq's words."""
    recorder.route("GET", f"/repos/acme/quotas/commits/{SHA}/statuses", (200, [
        {"context": "gitopsq/sync", "state": "success", "description": "applied", "target_url": None},
        {"context": "ci", "state": "error", "description": "", "target_url": "https://ci/2"}]))
    got = _client(recorder).statuses(SHA)
    assert [(s.context, s.state) for s in got] == [("gitopsq/sync", "success"), ("ci", "error")]


def test_comment_created_then_updated_by_marker(recorder: Recorder) -> None:
    """No comment has the marker: one is created; once one has it, that one is PATCHed and none is added."""
    comments: list[dict[str, object]] = [{"id": 7, "body": "LGTM"}]

    def create(r):  # type: ignore[no-untyped-def]
        comments.append({"id": 8, "body": r.json()["body"]})
        return 201, comments[-1]

    recorder.route("GET", "/repos/acme/quotas/issues/5/comments", lambda _r: (200, comments))
    recorder.route("POST", "/repos/acme/quotas/issues/5/comments", create)
    recorder.route("PATCH", "/repos/acme/quotas/issues/comments/8", (200, {"id": 8}))
    gh = _client(recorder)
    made = gh.upsert_comment(5, "<!-- gitopsq-plan -->", "<!-- gitopsq-plan -->\nplan 1")
    again = gh.upsert_comment(5, "<!-- gitopsq-plan -->", "<!-- gitopsq-plan -->\nplan 2")
    assert (made.id, made.created, again.id, again.created) == (8, True, 8, False)
    assert recorder.seen("PATCH")[0].json() == {"body": "<!-- gitopsq-plan -->\nplan 2"}
    assert len(recorder.seen("POST")) == 1


def test_approvals_are_each_reviewers_latest_verdict(recorder: Recorder) -> None:
    """An approval later dismissed or followed by "changes requested" does not count; a later comment keeps it."""
    recorder.route("GET", "/repos/acme/quotas/pulls/5/reviews", (200, [
        {"user": {"login": "ann"}, "state": "APPROVED", "submitted_at": "2026-11-01T10:00:00Z", "commit_id": SHA},
        {"user": {"login": "ann"}, "state": "COMMENTED", "submitted_at": "2026-11-01T11:00:00Z", "commit_id": SHA},
        {"user": {"login": "bob"}, "state": "APPROVED", "submitted_at": "2026-11-01T10:00:00Z", "commit_id": SHA},
        {"user": {"login": "bob"}, "state": "CHANGES_REQUESTED", "submitted_at": "2026-11-01T12:00:00Z",
         "commit_id": SHA},
        {"user": {"login": "cy"}, "state": "DISMISSED", "submitted_at": "2026-11-01T09:00:00Z", "commit_id": SHA}]))
    got = _client(recorder).approvals(5)
    assert [(a.reviewer, a.at, a.commit, a.forge) for a in got] == [("ann", "2026-11-01T10:00:00Z", SHA, "github")]


def test_pull_request_of_a_squash_commit(recorder: Recorder) -> None:
    """The PR whose merge_commit_sha is the commit is found; a PR that merely contains it is not."""
    recorder.route("GET", f"/repos/acme/quotas/commits/{SHA}/pulls", (200, [
        {"number": 3, "merge_commit_sha": "b" * 40, "merged_at": "2026-11-01T10:00:00Z"},
        {"number": 4, "merge_commit_sha": SHA, "merged_at": "2026-11-02T10:00:00Z"}]))
    assert _client(recorder).pull_request_of(SHA) == 4
    recorder.route("GET", f"/repos/acme/quotas/commits/{SHA}/pulls", (200, []))
    assert _client(recorder).pull_request_of(SHA) is None
