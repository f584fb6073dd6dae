"""The audit branch rewound or rewritten behind the writer's back: nothing appended to it, nothing lost, the
incident raised, and `audit verify` says ``rewound`` from the anchor alone (no head kept by a person)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pygit2
import pytest
from click.testing import CliRunner

from gitopsq.audit.anchor import Anchor, status_anchor
from gitopsq.audit.known_tip import KNOWN_TIP_FILE, RECOVERY_PREFIX
from gitopsq.audit.trail import AuditTrail
from gitopsq.audit.verify import verify_branch
from gitopsq.commands.audit import command
from gitopsq.errors import AuditError

from .conftest import BRANCH, admitted, fast_settings, verified, workload_names
from .tamper import commit_on_tip, edit_lines, read_files, record_files

ROOT = Path(__file__).resolve().parents[2]
ANCHOR = f"refs/gitopsq/audit-anchor/{BRANCH}"


def _writer(remote: Path, wal: Path, start: int, count: int, *extra: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "tests.audit.writer_process", str(remote), str(wal), str(start),
                             str(count), *extra], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})


def _ref(remote: Path, name: str) -> str | None:
    ref = pygit2.Repository(str(remote)).references.get(name)
    return str(ref.target) if ref is not None else None


def _history(remote: Path) -> list[str]:
    """The branch's commits, oldest first."""
    repo = pygit2.Repository(str(remote))
    commit = repo.references[f"refs/heads/{BRANCH}"].peel(pygit2.Commit)
    out = [str(commit.id)]
    while commit.parent_ids:
        commit = commit.parents[0]
        out.append(str(commit.id))
    return out[::-1]


def _force_push(remote: Path, commit: str, tmp_path: Path) -> None:
    """What a person with push rights does: clone, then force-push an older commit onto the audit branch."""
    clone = tmp_path / "person.git"
    subprocess.run(["git", "clone", "-q", "--bare", str(remote), str(clone)], check=True)
    subprocess.run(["git", "-C", str(clone), "push", "-q", "--force", "origin", f"{commit}:refs/heads/{BRANCH}"],
                   check=True)


def _recovery_refs(remote: Path) -> list[str]:
    return sorted(n for n in pygit2.Repository(str(remote)).references if n.startswith(RECOVERY_PREFIX))


def _names_on(remote: Path, ref: str, tmp_path: Path) -> list[str]:
    """The records a ref holds, after verifying its chain (as a branch of a clone)."""
    clone = tmp_path / f"check-{ref.rsplit('/', 1)[-1]}.git"
    subprocess.run(["git", "init", "-q", "--bare", str(clone)], check=True)
    subprocess.run(["git", "-C", str(clone), "fetch", "-q", str(remote), f"{ref}:refs/heads/{BRANCH}"], check=True)
    result = verified(clone)
    assert result.ok, result.summary()
    return [s.entry["workload"]["name"] for s in result.entries]


def _wal_records(wal: Path) -> list[str]:
    return sorted({json.loads(line)["r"]["workload"]["name"] for path in wal.glob("wal-*.jsonl")
                   for line in path.read_bytes().splitlines()}, key=lambda n: int(n[1:]))


@dataclass
class Rewound:
    remote: Path
    wal: Path
    first: str        # the commit the branch was rewound to (records w0-w9)
    known: str        # the commit the writer last pushed before it was stopped


@pytest.fixture
def rewound(remote: Path, tmp_path: Path) -> Rewound:
    """Records w0-w49 pushed (w20-w49 by a writer process killed after its push, so still in its WAL), then the
    branch force-pushed back to its first commit while no writer runs."""
    wal = tmp_path / "wal"
    with AuditTrail.open(str(remote), wal, settings=fast_settings()) as trail:
        for batch in (range(10), range(10, 20)):
            for i in batch:
                trail.record(admitted(i))
            assert trail.flush(30)
    proc = _writer(remote, wal, 20, 30, "--flush-then-wait")
    assert proc.stdout is not None
    assert any(line.strip() == "pushed" for line in proc.stdout)
    proc.send_signal(signal.SIGKILL)
    proc.wait(10)
    known = _history(remote)[-1]
    assert workload_names(remote) == [f"w{i}" for i in range(50)]
    assert _ref(remote, ANCHOR) == known
    first = _history(remote)[0]
    _force_push(remote, first, tmp_path)
    assert workload_names(remote) == [f"w{i}" for i in range(10)]
    return Rewound(remote, wal, first, known)


def test_a_writer_restarted_on_a_rewound_branch_appends_nothing_to_it_and_loses_nothing(
        rewound: Rewound, tmp_path: Path) -> None:
    """The restarted writer leaves the rewound branch alone, logs both tips, keeps its WAL, and pushes every
    record (the removed ones and the new ones) onto the history it knows under a recovery ref."""
    proc = _writer(rewound.remote, rewound.wal, 50, 10, "--report")
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    assert "flushed False" in out, "a flush must not report records on the branch while it is rewound"
    [recovery] = _recovery_refs(rewound.remote)
    assert f"incident {recovery}" in out
    assert _history(rewound.remote) == [rewound.first], "nothing was appended to the rewound branch"
    assert _names_on(rewound.remote, recovery, tmp_path) == [f"w{i}" for i in range(60)], \
        "the recovery ref holds every record once, in order, on the history the writer knew"
    line = next(line for line in (out + err).splitlines() if "audit_branch_rewound" in line)
    assert rewound.first in line and rewound.known in line and recovery in line, \
        "the log line names both tips and the recovery ref"
    assert _wal_records(rewound.wal) == [f"w{i}" for i in range(20, 60)], \
        "the WAL keeps every record it held (none compacted) while the branch is rewound"


def test_verify_says_rewound_from_the_anchor_without_a_head_kept_by_a_person(rewound: Rewound) -> None:
    """No --since-head: the anchor ref the writer keeps in the repository is enough; exit 1, state rewound."""
    result = CliRunner().invoke(command, ["verify", str(rewound.remote)])
    assert result.exit_code == 1, result.output
    assert "REWOUND" in result.output and "chain head 50 " in result.output and rewound.known[:12] in result.output
    as_json = json.loads(CliRunner().invoke(command, ["verify", str(rewound.remote), "-o", "json"]).output)
    assert as_json["state"] == "rewound" and as_json["problems"][0]["kind"] == "rewound"
    # the branch alone is self-consistent: without the anchor it would have passed
    subprocess.run(["git", "-C", str(rewound.remote), "update-ref", "-d", ANCHOR], check=True)
    assert verified(rewound.remote).ok


def test_verify_after_the_writer_recovered_names_the_recovery_ref(rewound: Rewound) -> None:
    """Once the writer has pushed its records to a recovery ref, verify says where they are."""
    with AuditTrail.open(str(rewound.remote), rewound.wal, settings=fast_settings()) as trail:
        trail.record(admitted(50))
        assert not trail.flush(30)
    [recovery] = _recovery_refs(rewound.remote)
    result = CliRunner().invoke(command, ["verify", str(rewound.remote)])
    assert result.exit_code == 1 and "chain head 51 " in result.output and recovery in result.output


def test_the_branch_given_back_its_history_ends_the_incident(rewound: Rewound) -> None:
    """Restoring the branch from the recovery ref (a fast-forward) ends the incident: the writer appends to the
    branch again, flush succeeds, verify is intact and the WAL is compacted."""
    with AuditTrail.open(str(rewound.remote), rewound.wal, settings=fast_settings()) as trail:
        trail.record(admitted(50))
        assert not trail.flush(30)
        incident = trail.status().incident
        assert incident is not None and incident.found_commit == rewound.first
        assert incident.known_commit == rewound.known
        subprocess.run(["git", "-C", str(rewound.remote), "update-ref", f"refs/heads/{BRANCH}",
                        incident.recovery_ref], check=True)
        trail.record(admitted(51))
        assert trail.flush(30)
        assert trail.status().incident is None
    assert workload_names(rewound.remote) == [f"w{i}" for i in range(52)]
    result = CliRunner().invoke(command, ["verify", str(rewound.remote)])
    assert result.exit_code == 0, result.output
    assert _wal_records(rewound.wal) == [] if list(rewound.wal.glob("wal-*.jsonl")) else True


def test_a_writer_killed_while_recovering_resumes_on_the_same_recovery_ref(rewound: Rewound, tmp_path: Path) -> None:
    """SIGKILL while the records go to the recovery ref: on restart every acknowledged record is there once."""
    proc = _writer(rewound.remote, rewound.wal, 50, 400)
    assert proc.stdout is not None
    acked = []
    for line in proc.stdout:
        if not line.startswith("ack "):
            continue
        acked.append(int(line.split()[1]))
        if len(acked) % 10 == 0 and _recovery_refs(rewound.remote):
            break
    proc.send_signal(signal.SIGKILL)
    proc.wait(10)
    with AuditTrail.open(str(rewound.remote), rewound.wal, settings=fast_settings()) as trail:
        assert not trail.flush(30)
        incident = trail.status().incident
        assert incident is not None
    [recovery] = _recovery_refs(rewound.remote)
    assert incident.recovery_ref == recovery
    names = [int(n[1:]) for n in _names_on(rewound.remote, recovery, tmp_path)]
    assert len(names) == len(set(names)), "a record was duplicated"
    assert set(range(50)) | set(acked) <= set(names), "an acknowledged record was lost"
    assert names == sorted(names)
    assert _history(rewound.remote) == [rewound.first]


def test_a_rebuilt_branch_is_an_incident_too(remote: Path, tmp_path: Path) -> None:
    """A branch replaced by other commits (same records, new history) does not contain the writer's tip."""
    wal = tmp_path / "wal"
    with AuditTrail.open(str(remote), wal, settings=fast_settings()) as trail:
        for i in range(5):
            trail.record(admitted(i))
        assert trail.flush(30)
    repo = pygit2.Repository(str(remote))
    tip = repo.references[f"refs/heads/{BRANCH}"].peel(pygit2.Commit)
    who = pygit2.Signature("mallory", "mallory@example.com")
    rebuilt = repo.create_commit(None, who, who, tip.message, tip.tree.id, [])
    repo.references.create(f"refs/heads/{BRANCH}", rebuilt, force=True)
    with AuditTrail.open(str(remote), wal, settings=fast_settings()) as trail:
        trail.record(admitted(5))
        assert not trail.flush(30)
        incident = trail.status().incident
        assert incident is not None and "no longer contains" in incident.reason
    assert _history(remote) == [str(rebuilt)]
    [recovery] = _recovery_refs(remote)
    assert _names_on(remote, recovery, tmp_path) == [f"w{i}" for i in range(6)]


def test_a_commit_on_top_that_is_not_an_audit_append_is_an_incident(remote: Path, tmp_path: Path) -> None:
    """Someone fast-forwards the branch with an edit of a records file: the writer does not build on it."""
    wal = tmp_path / "wal"
    with AuditTrail.open(str(remote), wal, settings=fast_settings()) as trail:
        for i in range(3):
            trail.record(admitted(i))
        assert trail.flush(30)
    repo = pygit2.Repository(str(remote))
    [path] = record_files(read_files(repo, repo.references[f"refs/heads/{BRANCH}"].peel(pygit2.Commit).tree))
    tip_message = repo.references[f"refs/heads/{BRANCH}"].peel(pygit2.Commit).message
    commit_on_tip(remote, edit_lines(path, lambda lines: lines[:1]), message=tip_message)  # states a chain head
    with AuditTrail.open(str(remote), wal, settings=fast_settings()) as trail:
        trail.record(admitted(3))
        assert not trail.flush(30)
        incident = trail.status().incident
        assert incident is not None and f"changed {path}" in incident.reason
    [recovery] = _recovery_refs(remote)
    assert _names_on(remote, recovery, tmp_path) == [f"w{i}" for i in range(4)]


def test_another_writer_appending_is_not_an_incident(remote: Path, tmp_path: Path) -> None:
    """Writers sharing a branch (one per cluster) append to each other's tips: that is how the branch grows."""
    with AuditTrail.open(str(remote), tmp_path / "wal-a", settings=fast_settings()) as a:
        a.record(admitted(0, prefix="a"))
        assert a.flush(30)
        with AuditTrail.open(str(remote), tmp_path / "wal-b", settings=fast_settings()) as b:
            b.record(admitted(0, prefix="b"))
            assert b.flush(30)
        a.record(admitted(1, prefix="a"))
        assert a.flush(30)
        assert a.status().incident is None
    assert workload_names(remote) == ["a0", "b0", "a1"]
    assert _recovery_refs(remote) == []


def test_a_damaged_record_of_the_pushed_tip_stops_the_writer_with_a_clear_error(remote: Path, tmp_path: Path) -> None:
    """The writer must not forget what it pushed: an unreadable pushed.json is an error naming the file."""
    wal = tmp_path / "wal"
    with AuditTrail.open(str(remote), wal, settings=fast_settings()) as trail:
        trail.record(admitted(0))
        assert trail.flush(30)
    (wal / KNOWN_TIP_FILE).write_text("{not json", encoding="utf-8")
    with pytest.raises(AuditError, match=KNOWN_TIP_FILE):
        AuditTrail.open(str(remote), wal, settings=fast_settings())


def test_the_cluster_anchor_finds_a_rewind_when_the_anchor_ref_went_too(rewound: Rewound) -> None:
    """A rewinder who also moved the anchor ref back is still caught by the head the GitSource status states."""
    subprocess.run(["git", "-C", str(rewound.remote), "update-ref", ANCHOR, rewound.first], check=True)
    repo = pygit2.Repository(str(rewound.remote))
    assert verify_branch(repo, BRANCH).ok
    head = json.loads((rewound.wal / KNOWN_TIP_FILE).read_text())["branches"][BRANCH]
    status = {"audit": {"branch": BRANCH, "head": {"seq": head["seq"], "hash": head["hash"]},
                        "commit": head["commit"]}}
    anchor = status_anchor(status, "gitopsq-system/queues", BRANCH)
    assert anchor == Anchor("GitSource gitopsq-system/queues", 50, head["hash"], rewound.known)
    result = verify_branch(repo, BRANCH, anchors=[anchor])
    assert result.state == "rewound"
    assert "GitSource gitopsq-system/queues names chain head 50" in result.summary()
    with pytest.raises(AuditError, match=r"no status\.audit"):
        status_anchor({}, "gitopsq-system/queues", BRANCH)


def test_an_idle_writer_during_an_incident_backs_off_instead_of_spinning(rewound: Rewound) -> None:
    """With nothing to push, each round that finds the branch still rewound counts as failed and backs off."""
    settings = fast_settings(backoff_initial=0.5, backoff_max=1.0)
    with AuditTrail.open(str(rewound.remote), rewound.wal, settings=settings) as trail:
        assert not trail.flush(30)
        assert trail.status().incident is not None
        fetches = []
        real_fetch = trail._branch.fetch  # counted, still the real fetch from the real remote

        def counted() -> object:
            fetches.append(1)
            return real_fetch()

        trail._branch.fetch = counted  # type: ignore[method-assign]
        time.sleep(2.0)
    assert 1 <= len(fetches) <= 4, f"{len(fetches)} fetches in 2 s: the incident is rechecked with backoff"


def test_a_signed_anchor_is_checked_with_the_allowed_signers(remote: Path, tmp_path: Path) -> None:
    """The anchor ref names a signed audit commit: with --allowed-signers a genuine anchor proves the rewind, and
    an anchor someone pointed at an unsigned commit of their own is reported as such, not believed."""
    key = tmp_path / "audit_key"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    allowed = tmp_path / "allowed_signers"
    allowed.write_text(f"gitopsq@localhost {key.with_suffix('.pub').read_text()}")
    with AuditTrail.open(str(remote), tmp_path / "wal", settings=fast_settings(signing_key=str(key))) as trail:
        for batch in (range(3), range(3, 6)):
            for i in batch:
                trail.record(admitted(i))
            assert trail.flush(30)
    first = _history(remote)[0]
    subprocess.run(["git", "-C", str(remote), "update-ref", f"refs/heads/{BRANCH}", first], check=True)
    repo = pygit2.Repository(str(remote))
    genuine = verify_branch(repo, BRANCH, allowed_signers=str(allowed))
    assert genuine.state == "rewound", genuine.summary()
    tip = repo.references[ANCHOR].peel(pygit2.Commit)
    who = pygit2.Signature("mallory", "gitopsq@localhost")
    forged = repo.create_commit(None, who, who, tip.message, tip.tree.id, list(tip.parent_ids))
    repo.references.create(ANCHOR, forged, force=True)
    result = verify_branch(repo, BRANCH, allowed_signers=str(allowed))
    assert result.state == "broken" and "unsigned" in [p.kind for p in result.problems]


def test_a_deleted_branch_is_a_rewind_not_an_absent_one(rewound: Rewound, tmp_path: Path) -> None:
    """Deleting the branch loses every record: the writer raises the incident, verify says rewound (exit 1)."""
    subprocess.run(["git", "-C", str(rewound.remote), "update-ref", "-d", f"refs/heads/{BRANCH}"], check=True)
    result = CliRunner().invoke(command, ["verify", str(rewound.remote)])
    assert result.exit_code == 1 and "REWOUND" in result.output and "the branch is gone" in result.output
    with AuditTrail.open(str(rewound.remote), rewound.wal, settings=fast_settings()) as trail:
        trail.record(admitted(50))
        assert not trail.flush(30)
        incident = trail.status().incident
        assert incident is not None and incident.reason == "the branch no longer exists"
    assert _ref(rewound.remote, f"refs/heads/{BRANCH}") is None, "the writer did not start a new branch"
    assert _names_on(rewound.remote, incident.recovery_ref, tmp_path) == [f"w{i}" for i in range(51)]
