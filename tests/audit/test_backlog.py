"""The backlog's bookkeeping: what is in memory, what is only in the WAL, and what the branch already holds."""

from __future__ import annotations

from gitopsq.audit.backlog import Backlog
from gitopsq.audit.wal import WalEntry


def _entries(first: int, last: int) -> list[WalEntry]:
    return [WalEntry(n, {"id": f"id-{n}"}) for n in range(first, last + 1)]


def test_records_beyond_the_limit_stay_only_in_the_wal() -> None:
    """After the limit, new records are counted but not held; batches then come as WAL ranges."""
    backlog = Backlog(3, [], 0)
    backlog.add(_entries(1, 2))
    backlog.add(_entries(3, 5))
    assert [e.wal_seq for e in backlog.memory] == [1, 2] and backlog.spilling and len(backlog) == 5
    batch, low, high = backlog.next_batch(10)
    assert batch is not None and (low, high) == (1, 2)
    backlog.done_through(2)
    assert backlog.next_batch(10) == (None, 3, 5)
    backlog.done_through(5)
    assert not backlog.spilling and len(backlog) == 0


def test_a_replay_larger_than_memory_starts_spilled() -> None:
    """Replayed records beyond what was kept in memory are read back later, not forgotten."""
    backlog = Backlog(2, _entries(1, 2), 9)
    assert backlog.spilling and len(backlog) == 9 and backlog.pushed == 0


def test_what_the_branch_holds_is_skipped_in_memory_and_on_read_back() -> None:
    """The writer's watermark and known ids drop replayed records, whether held in memory or read back."""
    backlog = Backlog(3, _entries(1, 3), 6)
    dropped = backlog.skip(2, {"id-5"})
    assert dropped == 2 and [e.wal_seq for e in backlog.memory] == [3] and backlog.pushed == 2
    assert [e.wal_seq for e in backlog.keep(_entries(4, 6))] == [4, 6]


def test_known_ids_are_forgotten_once_the_replayed_records_are_pushed() -> None:
    """Skipping by id applies to replayed records only; later records with new ids are never dropped."""
    backlog = Backlog(10, _entries(1, 2), 2)
    backlog.skip(0, {"id-9"})
    backlog.done_through(2)
    assert backlog.skip_ids == frozenset()
