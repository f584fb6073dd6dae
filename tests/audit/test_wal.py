"""The write-ahead log: fsync'd appends, replay, torn last lines, corruption, the writer lock, compaction."""

from __future__ import annotations

from pathlib import Path

import pytest

from gitopsq.audit.wal import WalCorruptError, WalLockedError, WriteAheadLog


def _records(n: int, start: int = 1) -> list[dict[str, object]]:
    return [{"id": f"id-{i}", "n": i} for i in range(start, start + n)]


def _reopen(directory: Path) -> tuple[WriteAheadLog, list[int]]:
    wal = WriteAheadLog(directory)
    replay = wal.replay()
    return wal, [e.wal_seq for e in replay.entries]


def test_appended_records_replay_in_order_with_consecutive_numbers(tmp_path: Path) -> None:
    """Records appended in two groups come back in order, numbered 1..n, after a reopen."""
    wal = WriteAheadLog(tmp_path)
    wal.replay()
    assert wal.append(_records(3)) == 3
    assert wal.append(_records(2, 4)) == 5
    wal.close()
    wal, seqs = _reopen(tmp_path)
    assert seqs == [1, 2, 3, 4, 5]
    assert wal.next_seq == 6
    wal.close()


@pytest.mark.parametrize("tail", [b'{"r":{"id":"x"},"w":4', b'{"r":{"id":"x"},"w":4}', b"\x00\x00garbage"],
                         ids=["half-written-json", "complete-json-missing-newline", "binary-junk"])
def test_a_torn_last_line_is_reported_dropped_and_the_rest_kept(tmp_path: Path, tail: bytes) -> None:
    """A partial final line is detected, truncated away, and every earlier record survives."""
    wal = WriteAheadLog(tmp_path)
    wal.replay()
    wal.append(_records(3))
    wal.close()
    segment = sorted(tmp_path.glob("wal-*.jsonl"))[-1]
    with segment.open("ab") as handle:
        handle.write(tail)
    wal = WriteAheadLog(tmp_path)
    replay = wal.replay()
    assert [e.record["id"] for e in replay.entries] == ["id-1", "id-2", "id-3"]
    assert replay.torn is not None and replay.torn.line == 4 and replay.torn.size == len(tail)
    assert not segment.read_bytes().endswith(tail)
    wal.append(_records(1, 4))
    wal.close()
    wal, seqs = _reopen(tmp_path)
    assert seqs == [1, 2, 3, 4]
    wal.close()


def test_a_bad_line_before_the_end_is_corruption(tmp_path: Path) -> None:
    """Damage in the middle of the log is not a torn write: opening fails and names the line."""
    wal = WriteAheadLog(tmp_path)
    wal.replay()
    wal.append(_records(3))
    wal.close()
    segment = sorted(tmp_path.glob("wal-*.jsonl"))[-1]
    lines = segment.read_bytes().splitlines(keepends=True)
    segment.write_bytes(lines[0] + b"not json\n" + lines[2])
    with pytest.raises(WalCorruptError, match=":2:"):
        WriteAheadLog(tmp_path).replay()


def test_only_one_writer_holds_the_directory(tmp_path: Path) -> None:
    """A second writer on the same WAL directory is refused while the first holds the lock."""
    first = WriteAheadLog(tmp_path)
    with pytest.raises(WalLockedError):
        WriteAheadLog(tmp_path)
    first.close()
    WriteAheadLog(tmp_path).close()


def test_compaction_deletes_only_closed_segments_fully_pushed(tmp_path: Path) -> None:
    """Segments whose records are all pushed go away; the rest, and the active segment, stay."""
    wal = WriteAheadLog(tmp_path)
    wal.replay()
    wal.append(_records(3))
    wal.rotate()
    wal.append(_records(3, 4))
    wal.rotate()
    wal.append(_records(1, 7))
    assert wal.compact(4) == 1  # first segment (1-3) is gone, second (4-6) still holds 5 and 6
    wal.close()
    wal, seqs = _reopen(tmp_path)
    assert seqs == [4, 5, 6, 7]
    wal.close()


def test_the_writer_id_survives_reopening(tmp_path: Path) -> None:
    """The WAL keeps one writer id for its lifetime, which names it on the audit branch."""
    first = WriteAheadLog(tmp_path)
    first.replay()
    writer = first.writer_id
    first.close()
    second = WriteAheadLog(tmp_path)
    assert second.writer_id == writer
    second.close()


def test_a_wal_that_lost_all_its_segments_takes_a_new_writer_id(tmp_path: Path) -> None:
    """Without segments the numbering restarts, so the writer identity restarts too and no record is skipped."""
    first = WriteAheadLog(tmp_path)
    first.replay()
    first.append(_records(2))
    writer = first.writer_id
    first.close()
    for segment in tmp_path.glob("wal-*.jsonl"):
        segment.unlink()
    second = WriteAheadLog(tmp_path)
    assert second.writer_id != writer
    second.close()
