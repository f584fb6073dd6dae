"""The backlog: durable records (in the WAL) that are not on the audit branch yet.

Invariants, with WAL sequence numbers:
1. every record numbered ≤ ``pushed`` is on the branch, or was found there already (a replay after a crash);
2. every record numbered ≤ ``durable`` is fsync'd in the WAL;
3. ``memory`` holds the records ``pushed + 1 …`` in order, at most ``limit`` of them; when more arrive the
   backlog "spills": the newer records stay only in the WAL and the commit thread reads them back from there
   (``WriteAheadLog.read_range``). So a long outage costs disk, never unbounded memory. Spilling ends once
   the branch has caught up with everything durable.

Not thread-safe: the trail's lock guards it.
"""

from __future__ import annotations

from collections.abc import Iterable

from gitopsq.audit.wal import WalEntry


class Backlog:
    def __init__(self, limit: int, replayed: list[WalEntry], last_seq: int) -> None:
        self.limit = limit
        self.memory = list(replayed)
        self.durable = last_seq
        self.pushed = replayed[0].wal_seq - 1 if replayed else last_seq
        self.spilling = bool(replayed) and replayed[-1].wal_seq < last_seq
        # What the branch already holds, learnt on the first fetch; applies to records replayed from the WAL.
        self.replayed_upto = last_seq
        self.skip_upto = 0
        self.skip_ids: frozenset[str] = frozenset()

    def __len__(self) -> int:
        return self.durable - self.pushed

    def add(self, entries: list[WalEntry]) -> None:
        """Records just fsync'd (consecutive numbers after ``durable``)."""
        self.durable = entries[-1].wal_seq
        if not self.spilling and len(self.memory) + len(entries) <= self.limit:
            self.memory.extend(entries)
        else:
            self.spilling = True

    def next_batch(self, max_records: int) -> tuple[list[WalEntry] | None, int, int]:
        """The oldest waiting records: from memory, or None plus the WAL range (low, high) to read back."""
        if self.memory:
            batch = self.memory[:max_records]
            return batch, batch[0].wal_seq, batch[-1].wal_seq
        return None, self.pushed + 1, min(self.durable, self.pushed + max_records)

    def keep(self, entries: Iterable[WalEntry]) -> list[WalEntry]:
        """The entries the branch does not hold yet."""
        return [e for e in entries
                if e.wal_seq > self.skip_upto and str(e.record.get("id")) not in self.skip_ids]

    def skip(self, watermark: int, ids: Iterable[str]) -> int:
        """Learn what the branch holds; drop it from memory; returns how many records were dropped."""
        self.skip_upto = max(self.skip_upto, watermark)
        self.skip_ids = self.skip_ids | frozenset(ids)
        before = self.memory
        self.memory = self.keep(before)
        if self.memory:
            self.pushed = max(self.pushed, self.memory[0].wal_seq - 1)
        elif before:
            self.pushed = max(self.pushed, before[-1].wal_seq)
        return len(before) - len(self.memory)

    def done_through(self, wal_seq: int) -> None:
        """Everything numbered ≤ ``wal_seq`` is on the branch now."""
        self.pushed = max(self.pushed, wal_seq)
        self.memory = [e for e in self.memory if e.wal_seq > wal_seq]
        if self.pushed >= self.durable:
            self.spilling = False
        if self.pushed >= self.replayed_upto:
            self.skip_ids = frozenset()  # only replayed records could repeat what the branch holds
