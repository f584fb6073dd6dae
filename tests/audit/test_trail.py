"""AuditTrail against real bare remotes: batching, dedup, outages, races, torn WAL lines, signed commits."""

from __future__ import annotations

import socket
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pygit2
import pytest

from gitopsq.audit.sink import NullAuditTrail, audit_target, settings_from_config
from gitopsq.audit.trail import AuditTrail
from gitopsq.audit.verify import verify_branch
from gitopsq.audit.wal import WalLockedError

from .conftest import BRANCH, admitted, bare_repo, fast_settings, verified, workload_names


def test_records_land_on_the_branch_in_order_with_an_intact_chain(trail: AuditTrail, remote: Path) -> None:
    """Recorded records reach the audit branch in submission order and verify."""
    for i in range(20):
        trail.record(admitted(i))
    assert trail.flush(30)
    assert workload_names(remote) == [f"w{i}" for i in range(20)]
    result = verified(remote)
    assert result.ok and result.head_seq == 20


def test_submit_then_wait_durable_gives_the_same_result_as_record(trail: AuditTrail, remote: Path) -> None:
    """The admission path's submit + one wait_durable makes a group durable and lands it like record()."""
    tickets = [trail.submit(admitted(i)) for i in range(50)]
    trail.wait_durable(tickets[-1])
    assert trail.status().durable >= tickets[-1]
    assert trail.flush(30)
    assert workload_names(remote) == [f"w{i}" for i in range(50)]


def test_a_re_emitted_record_is_stored_once_even_across_restarts(remote: Path, tmp_path: Path) -> None:
    """The same record recorded twice, and again after a restart with a fresh WAL, appears once."""
    with AuditTrail.open(str(remote), tmp_path / "wal", settings=fast_settings()) as trail:
        trail.record(admitted(1))
        trail.record(admitted(1))
        assert trail.flush(30)
    with AuditTrail.open(str(remote), tmp_path / "other-wal", settings=fast_settings()) as trail:
        trail.record(admitted(1))
        trail.record(admitted(2))
        assert trail.flush(30)
    assert workload_names(remote) == ["w1", "w2"]


def test_an_unreachable_remote_holds_records_until_it_returns_in_order(remote: Path, tmp_path: Path) -> None:
    """With the remote gone across failed rounds and a restart, records wait in the WAL and land later in order."""
    wal = tmp_path / "wal"
    with AuditTrail.open(str(remote), wal, settings=fast_settings()) as trail:
        trail.record(admitted(0))
        assert trail.flush(30)
    hidden = remote.with_name("away.git")
    remote.rename(hidden)
    trail = AuditTrail.open(str(remote), wal, settings=fast_settings())
    for i in range(1, 11):
        trail.record(admitted(i))
    assert not trail.flush(60)  # answered by the first failed round; the timeout only bounds a hang
    assert trail.status().last_error is not None
    trail.close()
    with AuditTrail.open(str(remote), wal, settings=fast_settings()) as trail:  # restarted during the outage
        for i in range(11, 16):
            trail.record(admitted(i))
        assert not trail.flush(60)
        hidden.rename(remote)
        assert trail.flush(30)
    assert workload_names(remote) == [f"w{i}" for i in range(16)]
    assert verified(remote).ok


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_a_closed_port_is_an_outage_not_a_loss(tmp_path: Path) -> None:
    """A remote URL on a closed port fails the push fast; the records stay in the WAL for the next start."""
    url = f"git://127.0.0.1:{_closed_port()}/queues.git"
    wal = tmp_path / "wal"
    with AuditTrail.open(url, wal, settings=fast_settings()) as trail:
        trail.record(admitted(1))
        assert not trail.flush(60)
        assert "reach" in (trail.status().last_error or "")
    remote = bare_repo(tmp_path / "recovered.git")
    with AuditTrail.open(str(remote), wal, settings=fast_settings()) as trail:
        assert trail.flush(30)
    assert workload_names(remote) == ["w1"]


def test_two_writers_racing_on_one_branch_keep_the_chain_intact(remote: Path, tmp_path: Path) -> None:
    """Two writers pushing concurrently: losers retry on the new tip; every record lands once, chain intact."""
    flushes: list[bool] = []

    def run(prefix: str, wal: Path) -> None:
        with AuditTrail.open(str(remote), wal, settings=fast_settings(batch_seconds=0.01)) as trail:
            for i in range(60):
                trail.record(admitted(i, prefix=prefix))
                if i % 10 == 9:
                    flushes.append(trail.flush(30))

    threads = [threading.Thread(target=run, args=(p, tmp_path / f"wal-{p}")) for p in ("a", "b")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert flushes == [True] * 12, "every flush of both writers reached the branch"
    result = verified(remote)
    assert result.ok, result.summary()
    names = [s.entry["workload"]["name"] for s in result.entries]
    for prefix in ("a", "b"):
        mine = [n for n in names if n.startswith(prefix)]
        assert mine == [f"{prefix}{i}" for i in range(60)]
    assert result.commits > 2


def test_a_torn_wal_line_is_reported_and_the_rest_lands(remote: Path, tmp_path: Path) -> None:
    """A torn last WAL line from a crash is reported in status and dropped; earlier records still land."""
    wal = tmp_path / "wal"
    hidden = remote.with_name("away.git")
    remote.rename(hidden)
    with AuditTrail.open(str(remote), wal, settings=fast_settings()) as trail:
        for i in range(5):
            trail.record(admitted(i))
    segment = sorted(wal.glob("wal-*.jsonl"), key=lambda p: p.stat().st_size)[-1]
    with segment.open("ab") as handle:
        handle.write(b'{"r":{"id":"half')
    hidden.rename(remote)
    with AuditTrail.open(str(remote), wal, settings=fast_settings()) as trail:
        torn = trail.status().torn
        assert torn is not None and torn.path == str(segment)
        assert trail.flush(30)
    assert workload_names(remote) == [f"w{i}" for i in range(5)]


def test_the_wal_is_compacted_once_records_are_pushed(trail: AuditTrail, tmp_path: Path) -> None:
    """After a push the WAL's closed segments are deleted; closing leaves no pushed records behind."""
    for i in range(30):
        trail.record(admitted(i))
    assert trail.flush(30)
    trail.close()
    leftover = [line for path in (tmp_path / "wal").glob("wal-*.jsonl") for line in path.read_bytes().splitlines()]
    assert leftover == []


def test_a_second_trail_on_the_same_wal_is_refused(trail: AuditTrail, remote: Path, tmp_path: Path) -> None:
    """One writer at a time: opening the same WAL directory again fails while the first trail runs."""
    with pytest.raises(WalLockedError):
        AuditTrail.open(str(remote), tmp_path / "wal")


def test_the_source_repository_can_hold_its_own_audit_branch(tmp_path: Path) -> None:
    """A non-bare source repository gains the audit branch; its checked-out branch is untouched."""
    source = tmp_path / "queues"
    subprocess.run(["git", "init", "-q", "-b", "main", str(source)], check=True)
    subprocess.run(["git", "-C", str(source), "-c", "user.name=A", "-c", "user.email=a@x", "commit", "-q",
                    "--allow-empty", "-m", "init"], check=True)
    main_before = pygit2.Repository(str(source)).head.target
    with AuditTrail.open(str(source), tmp_path / "wal", settings=fast_settings()) as trail:
        trail.record(admitted(1))
        assert trail.flush(30)
    repo = pygit2.Repository(str(source))
    assert repo.head.target == main_before
    assert verify_branch(repo, BRANCH).ok


def test_signed_audit_commits_verify_with_the_allowed_signers(remote: Path, tmp_path: Path) -> None:
    """With a signing key every audit commit is SSH-signed; verify accepts the right key and refuses another."""
    key = tmp_path / "audit_key"
    other = tmp_path / "other_key"
    for path in (key, other):
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path)], check=True)
    allowed = tmp_path / "allowed_signers"
    allowed.write_text(f"gitopsq@localhost {key.with_suffix('.pub').read_text()}")
    wrong = tmp_path / "wrong_signers"
    wrong.write_text(f"gitopsq@localhost {other.with_suffix('.pub').read_text()}")
    with AuditTrail.open(str(remote), tmp_path / "wal", settings=fast_settings(signing_key=str(key))) as trail:
        trail.record(admitted(1))
        assert trail.flush(30)
    repo = pygit2.Repository(str(remote))
    assert verify_branch(repo, BRANCH, allowed_signers=str(allowed)).ok
    refused = verify_branch(repo, BRANCH, allowed_signers=str(wrong))
    assert [p.kind for p in refused.problems] == ["signature"]


def test_the_null_trail_accepts_everything_and_stores_nothing() -> None:
    """NullAuditTrail offers the same calls and does nothing, for commands run without an audit target."""
    with NullAuditTrail() as trail:
        trail.record(admitted(1))
        trail.wait_durable(trail.submit(admitted(2)))
        assert trail.flush()


def test_settings_come_from_the_gitopsq_yaml_audit_block() -> None:
    """The audit block's branch, batchSeconds and batchRecords configure the writer; repository picks the target."""
    block = {"repository": "", "branch": "audit/queues", "batchSeconds": 2, "batchRecords": 50}
    settings = settings_from_config(block)
    assert (settings.branch, settings.batch_seconds, settings.batch_records) == ("audit/queues", 2.0, 50)
    assert audit_target(block, "https://git.example.com/q.git") == "https://git.example.com/q.git"
    assert audit_target({"repository": "/srv/audit.git"}, "https://x") == "/srv/audit.git"


def test_a_long_outage_spills_to_the_wal_instead_of_memory(remote: Path, tmp_path: Path) -> None:
    """Beyond memory_records the backlog lives only in the WAL; after the outage and a restart all land in order."""
    wal = tmp_path / "wal"
    hidden = remote.with_name("away.git")
    remote.rename(hidden)
    settings = fast_settings(memory_records=10, max_batch=15)
    with AuditTrail.open(str(remote), wal, settings=settings) as trail:
        for i in range(40):
            trail.record(admitted(i))
        assert trail.status().in_memory <= 10
        assert not trail.flush(60)
    with AuditTrail.open(str(remote), wal, settings=settings) as trail:  # restart: replay keeps 10 in memory
        assert trail.status().in_memory == 10
        for i in range(40, 60):
            trail.record(admitted(i))
        hidden.rename(remote)
        assert trail.flush(30)
        assert trail.status().in_memory == 0
    assert workload_names(remote) == [f"w{i}" for i in range(60)]
    assert verified(remote).ok


def test_flush_with_nothing_waiting_returns_at_once(remote: Path, tmp_path: Path) -> None:
    """A reopened trail with an empty backlog reports everything pushed without waiting for a commit."""
    with AuditTrail.open(str(remote), tmp_path / "wal", settings=fast_settings()) as trail:
        trail.record(admitted(1))
        assert trail.flush(30)
    with AuditTrail.open(str(remote), tmp_path / "wal", settings=fast_settings(batch_seconds=60)) as trail:
        assert trail.flush(0.5)


def test_a_push_refused_by_a_hook_is_reported_and_the_records_wait(remote: Path, tmp_path: Path) -> None:
    """A server-side refusal is not a race: it is reported as such and nothing is lost; it lands once allowed."""
    hook = remote / "hooks" / "pre-receive"
    hook.write_text("#!/bin/sh\necho 'audit branch is protected' >&2\nexit 1\n")
    hook.chmod(0o755)
    with AuditTrail.open(str(remote), tmp_path / "wal", settings=fast_settings()) as trail:
        trail.record(admitted(1))
        assert not trail.flush(60)
        assert "refused by the remote" in (trail.status().last_error or "")
        hook.unlink()
        assert trail.flush(30)
    assert workload_names(remote) == ["w1"]


def test_a_flush_is_not_answered_by_a_round_that_began_before_it(remote: Path, tmp_path: Path) -> None:
    """A round under way when flush() is called, failing after the remote recovered, does not fail the flush."""
    gate = tmp_path / "gate"
    gate.mkdir()
    (gate / "refuse").touch()
    hook = remote / "hooks" / "pre-receive"
    # The first push is held until the test releases it, then refused; every later push is accepted.
    hook.write_text(f"#!/bin/sh\ncd '{gate}'\n[ -e refuse ] || exit 0\ntouch entered\n"
                    "while [ ! -e release ]; do sleep 0.01; done\nrm refuse\necho held and refused >&2\nexit 1\n")
    hook.chmod(0o755)
    with AuditTrail.open(str(remote), tmp_path / "wal", settings=fast_settings()) as trail:
        trail.record(admitted(1))  # the batch timer starts a round, whose push the hook holds
        wait_until((gate / "entered").exists, "the first push reaches the hook")
        answers: list[bool] = []
        flusher = threading.Thread(target=lambda: answers.append(trail.flush(60)))
        flusher.start()
        wait_until(lambda: trail._flush_requested, "flush() has registered its request")  # no public view of it
        (gate / "release").touch()  # the held round now fails, although the remote accepts pushes again
        flusher.join(90)
        assert answers == [True]
    assert workload_names(remote) == ["w1"]


def wait_until(condition: Callable[[], object], what: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting until {what}"
        time.sleep(0.01)


@pytest.mark.parametrize(("record", "problem"), [
    ({"schemaVersion": 1, "type": "admission.admitted", "id": "x", "time": "2026-01-01T00:00:00Z",
      "when": object()}, "not JSON data"),
    ({"schemaVersion": 1, "type": "made.up", "id": "x", "time": "2026-01-01T00:00:00Z"}, "unknown record type"),
], ids=["value-that-is-not-json", "unknown-type"])
def test_a_malformed_plain_record_is_refused_at_submit(trail: AuditTrail, record: dict[str, object],
                                                       problem: str) -> None:
    """A record handed in as a plain mapping is checked on the caller's thread, before it can reach the WAL."""
    from gitopsq.errors import AuditError

    with pytest.raises(AuditError, match=problem):
        trail.submit(record)
    trail.record(admitted(1))  # the trail keeps working
