"""Signed approvals notes (gitopsq.forge.notes) with real ssh-keygen keys: a note signed by a declared recorder
verifies; an edited, unsigned, moved or foreign-signed note is refused with its reason; a forge that cannot be
reached falls back to the verified note, one that refuses does not."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from gitopsq.forge import Backoff, ForgeError, Secret, open_forge
from gitopsq.forge.note_source import ForgeThenNotes, NoteApprovals
from gitopsq.forge.notes import payload_line, sign, verify
from gitopsq.forge.port import Approval

from .recorder import Recorder

COMMIT = "a" * 40


def keypair(directory: Path, name: str) -> tuple[Path, str]:
    key = directory / name
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", name, "-f", str(key)], check=True)
    return key, (directory / f"{name}.pub").read_text().strip()


@pytest.fixture(scope="module")
def keys(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, str]]:
    directory = tmp_path_factory.mktemp("recorder-keys")
    return {name: keypair(directory, name) for name in ("recorder", "mallory")}


def note(keys: dict[str, tuple[Path, str]], signer: str = "recorder", commit: str = COMMIT) -> str:
    line = payload_line(commit=commit, forge="gitea", repository="platform/q", pull_request=7,
                        recorded_at="2026-11-26T08:00:00Z",
                        approvals=[{"login": "maintainer", "email": "m@forge.test", "approvedCommit": "b" * 40,
                                    "at": "2026-11-26T07:59:00Z"}])
    return sign(line, keys[signer][0])


def test_a_note_signed_by_a_declared_recorder_verifies(keys: dict[str, tuple[Path, str]]) -> None:
    """The recorder's signature over the canonical line verifies and yields the PR and its approver."""
    found = verify(note(keys).encode(), COMMIT, {"ci": [keys["recorder"][1]]})
    assert (found.state, found.recorder) == ("verified", "ci")
    assert found.payload is not None and found.payload["pullRequest"] == 7
    assert found.payload["approvals"][0]["login"] == "maintainer"


@pytest.mark.parametrize(("mangle", "state", "reason"), [
    pytest.param(lambda t: t.replace('"login":"maintainer"', '"login":"mallory-x"'), "bad", "does not verify",
                 id="edited-after-signing"),
    pytest.param(lambda t: t.split("-----BEGIN")[0], "unsigned", "no SSH signature", id="unsigned"),
    pytest.param(lambda t: "not json\n" + t, "malformed", "not JSON", id="malformed"),
], )
def test_a_tampered_note_counts_for_nothing(keys: dict[str, tuple[Path, str]], mangle: object, state: str,
                                           reason: str) -> None:
    """An edited, unsigned or unparseable note is refused, each with its reason."""
    text = mangle(note(keys))  # type: ignore[operator]
    found = verify(text.encode(), COMMIT, {"ci": [keys["recorder"][1]]})
    assert (found.state, found.verified) == (state, False) and reason in found.reason


def test_a_note_by_another_key_or_moved_to_another_commit_is_refused(keys: dict[str, tuple[Path, str]]) -> None:
    """Mallory's signature binds no recorder; a genuine note copied onto another commit names the wrong one."""
    recorders = {"ci": [keys["recorder"][1]]}
    assert verify(note(keys, "mallory").encode(), COMMIT, recorders).state == "unknown-key"
    moved = verify(note(keys).encode(), "c" * 40, recorders)
    assert moved.state == "bad" and "not the commit it is attached to" in moved.reason
    assert verify(note(keys).encode(), COMMIT, {}).state == "unknown-key"


class _Notes(NoteApprovals):
    """NoteApprovals over a fixed verdict (the reading of Git is covered on Gitea)."""

    def __init__(self, text: str, recorders: dict[str, list[str]]) -> None:
        super().__init__(None)
        self.text, self.recorders = text, recorders

    def verdict(self, sha: str):  # type: ignore[no-untyped-def]
        return verify(self.text.encode(), sha, self.recorders)


def test_an_unreachable_forge_falls_back_to_the_note_a_refusing_one_does_not(keys: dict[str, tuple[Path, str]],
                                                                             recorder: Recorder) -> None:
    """Connection refused → the verified note answers (approvals marked via note); HTTP 401 → the error stands."""
    notes = _Notes(note(keys), {"ci": [keys["recorder"][1]]})
    down = open_forge("gitea", "http://127.0.0.1:9", "platform/q", Secret("t"), timeout=1.0,
                      backoff=Backoff(attempts=1))
    both = ForgeThenNotes(down, notes)
    assert both.pull_request_of(COMMIT) == 7
    (given,) = both.approvals(7)
    assert given == Approval("maintainer", "2026-11-26T07:59:00Z", "b" * 40, "gitea", "m@forge.test", via="note")
    recorder.route("GET", f"/api/v1/repos/platform/q/commits/{COMMIT}/pull", (401, {"message": "bad token"}))
    refusing = ForgeThenNotes(open_forge("gitea", recorder.url, "platform/q", Secret("t")), notes)
    with pytest.raises(ForgeError) as err:
        refusing.pull_request_of(COMMIT)
    assert err.value.status == 401


def test_one_pass_reads_a_prs_approvals_once(recorder: Recorder) -> None:
    """Validation and the audit record of the same merge share one read of the PR's reviews."""
    recorder.route("GET", "/api/v1/repos/platform/q/pulls/7/reviews", (200, [
        {"user": {"login": "maintainer"}, "state": "APPROVED", "submitted_at": "2026-11-26T07:59:00Z",
         "commit_id": "b" * 40}]))
    both = ForgeThenNotes(open_forge("gitea", recorder.url, "platform/q", Secret("t")), NoteApprovals(None))
    assert both.approvals(7) == both.approvals(7)
    reads = [r for r in recorder.seen("GET") if r.path == "/api/v1/repos/platform/q/pulls/7/reviews"]
    assert len(reads) == 1


def test_record_with_an_unusable_key_is_one_line_not_a_traceback(tmp_path: Path) -> None:
    """`gitopsq approvals record` whose key file is not a private key fails with exit 3 and one clear line (the
    forge is never asked: the key is checked first)."""
    bad = tmp_path / "not-a-key"
    bad.write_text("hello\n")
    bad.chmod(0o600)
    done = subprocess.run([sys.executable, "-m", "gitopsq", "approvals", "record", str(tmp_path), "--forge",
                           "gitea", "--forge-url", "http://127.0.0.1:9", "--forge-repo", "o/r", "--key-file",
                           str(bad)], capture_output=True, text=True, env={**os.environ, "GITOPSQ_FORGE_TOKEN": "t"},
                          check=False, timeout=60)
    assert done.returncode == 3 and "Traceback" not in done.stderr, done.stderr
    assert "is not a private SSH key" in done.stderr and len(done.stderr.strip().splitlines()) == 1
