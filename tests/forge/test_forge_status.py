"""The controller's ForgeReporter never makes the sync wait for the forge: a slow or failing forge is posted to
from a worker thread, its failures counted and logged without the token; each (revision, state) is posted once;
rejections and repeated drift become notifications (a loopback recording server stands in for the forge's HTTP
side; the real Gitea run is tests/forge/test_controller_on_gitea.py)."""

from __future__ import annotations

import time
from types import SimpleNamespace

import structlog
from prometheus_client import CollectorRegistry

from gitopsq import logs
from gitopsq.controller.forge_status import ForgeReporter
from gitopsq.forge import Backoff, Secret, open_forge
from gitopsq.forge.notify import DriftRepeats, Notifier, Target
from gitopsq.sync.values import SyncResult, Validated

from .recorder import Recorder

SHA = "a" * 40
STATUS_PATH = f"/api/v1/repos/o/r/statuses/{SHA}"


def reporter(recorder: Recorder, *, notify: bool = False, drift: int = 3) -> tuple[ForgeReporter, CollectorRegistry]:
    registry = CollectorRegistry()
    forge = open_forge("gitea", recorder.url, "o/r", Secret("tok-123-secret"), timeout=5.0,
                       backoff=Backoff(attempts=2, base=0.01, cap=0.01))
    notifier = Notifier([Target(f"{recorder.url}/notify")], registry=registry,
                        backoff=Backoff(attempts=1)) if notify else None
    return ForgeReporter(forge, notifier, repository="o/r", drift=DriftRepeats(drift), registry=registry), registry


def wait(predicate, timeout: float = 10.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def test_a_slow_forge_never_delays_the_sync(recorder: Recorder) -> None:
    """With the forge taking 1 s per call, queuing pending and success returns at once; both arrive, in order."""
    recorder.delay = 1.0
    recorder.route("POST", STATUS_PATH, (201, {}))
    rep, registry = reporter(recorder)
    began = time.monotonic()
    rep.status(SHA, "pending", "validating")
    rep.status(SHA, "success", "applied")
    assert time.monotonic() - began < 0.1
    wait(lambda: len(recorder.seen("POST")) == 2)
    assert [r.json()["state"] for r in recorder.seen("POST")] == ["pending", "success"]
    rep.close()
    assert registry.get_sample_value("gitopsq_forge_status_total", {"outcome": "sent"}) == 2


def test_a_failing_forge_is_counted_not_raised(recorder: Recorder, capsys) -> None:  # type: ignore[no-untyped-def]
    """A forge answering 500 to every call costs the sync nothing: the failure is counted and the token never
    appears in the log."""
    logs.configure(json=True)  # to this test's captured stderr, whatever an earlier test left configured
    try:
        recorder.route("POST", STATUS_PATH, (500, {"message": "boom"}))
        rep, registry = reporter(recorder)
        rep.status(SHA, "failure", "rejected: x")
        wait(lambda: registry.get_sample_value("gitopsq_forge_status_total", {"outcome": "failed"}) == 1)
        rep.close()
        seen = capsys.readouterr()
    finally:
        structlog.reset_defaults()
    assert "commit status not set" in seen.out + seen.err and "tok-123-secret" not in seen.out + seen.err


def test_each_state_is_posted_once_per_revision(recorder: Recorder) -> None:
    """Polls that find the same revision applied again post nothing new."""
    recorder.route("POST", STATUS_PATH, (201, {}))
    rep, _ = reporter(recorder)
    applied = SyncResult("applied", SHA, False)
    for _ in range(3):
        rep.observe(applied)
        rep.observe(SyncResult("unchanged", SHA, False))
    rep.close()
    assert [r.json()["state"] for r in recorder.seen("POST")] == ["success"]


def test_a_rejection_sets_failure_with_the_finding_and_notifies_once(recorder: Recorder) -> None:
    """A rejected revision gets failure naming the first error (file:line: message) and one 'rejected'
    notification, however often the loop sees it again."""
    recorder.route("POST", STATUS_PATH, (201, {}))
    recorder.route("POST", "/notify", (200, {}))
    rep, _ = reporter(recorder, notify=True)
    finding = {"severity": "error", "path": "queues/a.yaml", "line": 3, "message": "apiVersion is required"}
    rejected = SyncResult("rejected", SHA, False, validated=Validated((), (finding,), True, "1 error(s)"))
    rep.observe(rejected)
    rep.observe(rejected)
    rep.close()
    (status,) = [r.json() for r in recorder.seen("POST") if r.path == STATUS_PATH]
    assert (status["state"], status["description"]) == ("failure", "rejected: queues/a.yaml:3: apiVersion is required")
    (told,) = [r.json() for r in recorder.seen("POST") if r.path == "/notify"]
    assert (told["kind"], told["revision"]) == ("rejected", SHA)


def test_repeated_drift_on_one_object_notifies(recorder: Recorder) -> None:
    """The second correction of the same object within the window (threshold 2) is notified, naming it."""
    recorder.route("POST", STATUS_PATH, (201, {}))
    recorder.route("POST", "/notify", (200, {}))
    rep, _ = reporter(recorder, notify=True, drift=2)
    drifted = SyncResult("applied", SHA, False, plan=SimpleNamespace(drifted=("ClusterQueue/team-a",)))  # type: ignore[arg-type]
    rep.observe(drifted)
    rep.observe(drifted)
    rep.close()
    (told,) = [r.json() for r in recorder.seen("POST") if r.path == "/notify"]
    assert told["kind"] == "drift_repeated" and told["details"] == {"object": "ClusterQueue/team-a"}
