"""The GitLab client, as recorded-protocol tests: a loopback server answers in the shape of GitLab's documented
REST API (docs.gitlab.com/api: commits statuses, notes, merge_request_approvals, commits merge_requests). This pins
the requests gitopsq sends and how it reads the answers; it is not GitLab itself."""

from __future__ import annotations

from gitopsq.forge import Secret, open_forge

from .recorder import Recorder

SHA = "c" * 40
PROJECT = "/api/v4/projects/acme%2Fquotas"


def _client(recorder: Recorder):  # type: ignore[no-untyped-def]
    return open_forge("gitlab", recorder.url, "acme/quotas", Secret("glpat-secret"))


def test_set_status_maps_to_gitlab_states(recorder: Recorder) -> None:
    """failure and error become "failed", running stays "running"; the name field carries the context."""
    recorder.route("POST", f"{PROJECT}/statuses/{SHA}", (201, {"id": 1}))
    gl = _client(recorder)
    for state in ("running", "failure", "error", "success"):
        gl.set_status(SHA, state, context="gitopsq/sync", description="x")  # type: ignore[arg-type]
    assert [r.json()["state"] for r in recorder.requests] == ["running", "failed", "failed", "success"]
    assert recorder.requests[0].json()["name"] == "gitopsq/sync"
    assert recorder.requests[0].headers["private-token"] == "glpat-secret"


def test_project_id_is_the_url_encoded_path(recorder: Recorder) -> None:
    """owner/name goes into the URL as one encoded segment (acme%2Fquotas), as GitLab's API requires."""
    recorder.route("GET", f"{PROJECT}/repository/commits/{SHA}/statuses", (200, []))
    assert _client(recorder).statuses(SHA) == ()
    assert recorder.requests[0].path == f"{PROJECT}/repository/commits/{SHA}/statuses"
    assert (recorder.requests[0].query["order_by"], recorder.requests[0].query["sort"]) == ("id", "desc")


def test_statuses_read_back(recorder: Recorder) -> None:
    """GitLab's failed and canceled read back as failure and error."""
    path = f"{PROJECT}/repository/commits/{SHA}/statuses"
    recorder.route("GET", path, (200, [{"name": "gitopsq/sync", "status": "failed", "description": "refused"},
                                       {"name": "ci", "status": "canceled", "description": None}]))
    got = _client(recorder).statuses(SHA)
    assert [(s.context, s.state, s.description) for s in got] == [("gitopsq/sync", "failure", "refused"),
                                                                 ("ci", "error", "")]


def test_note_created_then_updated_by_marker(recorder: Recorder) -> None:
    """A system note that mentions the marker is ignored; gitopsq's own note is PUT in place the second time."""
    notes: list[dict[str, object]] = [{"id": 1, "body": "mentioned <!-- gitopsq-plan -->", "system": True}]

    def create(r):  # type: ignore[no-untyped-def]
        notes.append({"id": 2, "body": r.json()["body"], "system": False})
        return 201, notes[-1]

    recorder.route("GET", f"{PROJECT}/merge_requests/9/notes", lambda _r: (200, notes))
    recorder.route("POST", f"{PROJECT}/merge_requests/9/notes", create)
    recorder.route("PUT", f"{PROJECT}/merge_requests/9/notes/2", (200, {"id": 2}))
    gl = _client(recorder)
    assert gl.upsert_comment(9, "<!-- gitopsq-plan -->", "<!-- gitopsq-plan -->\nv1").created
    again = gl.upsert_comment(9, "<!-- gitopsq-plan -->", "<!-- gitopsq-plan -->\nv2")
    assert (again.id, again.created) == (2, False)
    assert recorder.seen("PUT")[0].json() == {"body": "<!-- gitopsq-plan -->\nv2"}


def test_approvals_with_time_from_system_notes(recorder: Recorder) -> None:
    """Approvers come from the approvals endpoint, each one's time from the newest "approved" system note."""
    recorder.route("GET", f"{PROJECT}/merge_requests/9/approvals",
                   (200, {"approved_by": [{"user": {"username": "mona"}}]}))
    recorder.route("GET", f"{PROJECT}/merge_requests/9/notes", (200, [
        {"id": 1, "system": True, "body": "approved this merge request", "author": {"username": "mona"},
         "created_at": "2026-11-01T10:00:00Z"},
        {"id": 2, "system": True, "body": "unapproved this merge request", "author": {"username": "mona"},
         "created_at": "2026-11-01T11:00:00Z"},
        {"id": 3, "system": True, "body": "approved this merge request", "author": {"username": "mona"},
         "created_at": "2026-11-01T12:00:00Z"}]))
    got = _client(recorder).approvals(9)
    assert [(a.reviewer, a.at, a.commit, a.forge) for a in got] == [("mona", "2026-11-01T12:00:00Z", None, "gitlab")]


def test_merge_request_of_a_squash_commit(recorder: Recorder) -> None:
    """The merged MR whose squash_commit_sha is the commit is found; an open one that contains it is not."""
    recorder.route("GET", f"{PROJECT}/repository/commits/{SHA}/merge_requests", (200, [
        {"iid": 4, "state": "opened", "merge_commit_sha": None, "squash_commit_sha": None},
        {"iid": 5, "state": "merged", "merge_commit_sha": None, "squash_commit_sha": SHA}]))
    assert _client(recorder).pull_request_of(SHA) == 5
