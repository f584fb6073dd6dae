"""Fault: the writer is killed (SIGKILL) mid-batch or right after a push; a restart loses and duplicates nothing."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pygit2

from gitopsq.audit.trail import AuditTrail

from .conftest import admitted, fast_settings, verified, workload_names

ROOT = Path(__file__).resolve().parents[2]


def _spawn(remote: Path, wal: Path, start: int, count: int, *extra: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "tests.audit.writer_process", str(remote), str(wal), str(start),
                             str(count), *extra], cwd=ROOT, stdout=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})


def _read_until(proc: subprocess.Popen[str], stop: str) -> list[int]:
    acked = []
    assert proc.stdout is not None
    for line in proc.stdout:
        if line.startswith("ack "):
            acked.append(int(line.split()[1]))
        if line.strip() == stop:
            break
    return acked


def _tip(remote: Path) -> str | None:
    ref = pygit2.Repository(str(remote)).references.get("refs/heads/gitopsq/audit")
    return str(ref.target) if ref is not None else None


def _read_past_a_commit(proc: subprocess.Popen[str], remote: Path, extra: int) -> list[int]:
    """Acknowledgements until the writer has pushed a new commit, then ``extra`` more (mid-stream, mid-batch)."""
    before, acked = _tip(remote), []
    assert proc.stdout is not None
    for line in proc.stdout:
        if line.startswith("ack "):
            acked.append(int(line.split()[1]))
            if len(acked) % 5 == 0 and _tip(remote) != before:
                break
    remaining = extra
    for line in proc.stdout:
        if line.startswith("ack "):
            acked.append(int(line.split()[1]))
            remaining -= 1
            if remaining <= 0:
                break
    return acked


def _kill(proc: subprocess.Popen[str]) -> None:
    proc.send_signal(signal.SIGKILL)
    proc.wait(10)


def test_killed_mid_batch_three_times_nothing_lost_nothing_duplicated(remote: Path, tmp_path: Path) -> None:
    """Three SIGKILLs after a batch was pushed and while the next fills: every acknowledged record lands once."""
    wal = tmp_path / "wal"
    acked: list[int] = []
    for round_start in (0, 1000, 2000):
        proc = _spawn(remote, wal, round_start, 1000)
        acked += _read_past_a_commit(proc, remote, 25)
        _kill(proc)
    with AuditTrail.open(str(remote), wal, settings=fast_settings()) as trail:
        for i in acked[-30:]:  # the controller re-emits its last events after a restart
            trail.record(admitted(i))
        assert trail.flush(30)
    names = workload_names(remote)
    numbers = [int(n[1:]) for n in names]
    result = verified(remote)
    assert result.ok
    assert result.commits >= 3, "each round pushed at least once before it was killed"
    assert len(numbers) == len(set(numbers)), "a record was duplicated"
    assert set(acked) <= set(numbers), "an acknowledged record was lost"
    assert numbers == sorted(numbers), "records landed out of order"


def test_killed_after_push_before_wal_compaction_replays_without_duplicates(remote: Path, tmp_path: Path) -> None:
    """A writer killed after pushing, with its records still in the WAL, does not push them again on restart."""
    wal = tmp_path / "wal"
    proc = _spawn(remote, wal, 0, 50, "--flush-then-wait")
    acked = _read_until(proc, "pushed")
    _kill(proc)
    in_wal = [json.loads(line)["w"] for path in wal.glob("wal-*.jsonl") for line in path.read_bytes().splitlines()]
    assert sorted(in_wal) == list(range(1, len(acked) + 1)), "the WAL should still hold the pushed records"
    with AuditTrail.open(str(remote), wal, settings=fast_settings()) as trail:
        trail.record(admitted(50))
        assert trail.flush(30)
    assert workload_names(remote) == [f"w{i}" for i in [*acked, 50]]
    assert verified(remote).ok
