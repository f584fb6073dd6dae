"""The local write-ahead log: records are durable here before they reach the audit branch.

Layout of the WAL directory (one writer at a time, enforced by an exclusive ``fcntl`` lock on ``lock``)::

    lock                         the writer lock (held while a writer runs)
    writer.json                  {"writerId": "<uuid>"}: names this WAL on the audit branch
    wal-000000000001.jsonl       segments; the number is the first WAL sequence number in the file

Each line is ``{"r": <record>, "w": <wal seq>}`` in canonical JSON. Appends go to the newest segment only; a
segment is never rewritten, and compaction deletes whole closed segments whose records are all on the branch.
A crash can leave the newest segment's last line torn (no newline, or not JSON): opening the log detects it,
reports it, truncates it away and keeps everything before it. A bad line anywhere else is corruption.
"""

from __future__ import annotations

import contextlib
import fcntl
import itertools
import json
import os
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gitopsq.errors import AuditError

_SEGMENT_PREFIX = "wal-"
_SEGMENT_SUFFIX = ".jsonl"


class WalLockedError(AuditError):
    """Another writer holds the WAL directory."""


class WalCorruptError(AuditError):
    """A WAL line other than the newest segment's last one cannot be read."""


@dataclass(frozen=True, slots=True)
class WalEntry:
    wal_seq: int
    record: dict[str, Any]


@dataclass(frozen=True, slots=True)
class TornLine:
    """The partial line dropped on open: where it was and how many bytes it had."""

    path: str
    line: int
    size: int


@dataclass(frozen=True, slots=True)
class Replay:
    entries: list[WalEntry]
    torn: TornLine | None
    last_seq: int = 0


def _segment_name(first_seq: int) -> str:
    return f"{_SEGMENT_PREFIX}{first_seq:012d}{_SEGMENT_SUFFIX}"


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class WriteAheadLog:
    """Segmented, fsync'd, append-only JSON-lines log. Appends must come from one thread."""

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self._lock_fd = os.open(self.directory / "lock", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(self._lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError as err:
            os.close(self._lock_fd)
            raise WalLockedError(f"another audit writer holds {self.directory}") from err
        self.writer_id = self._writer_id()
        self._active: int | None = None  # file descriptor of the newest segment
        self._active_first = 0
        self.next_seq = 1

    def _writer_id(self) -> str:
        path = self.directory / "writer.json"
        # A log with no segment at all is new or lost its files: it takes a new identity, so the branch's memory
        # of the old one (its highest WAL number) can never hide records numbered afresh.
        if path.exists() and self.segments():
            return str(json.loads(path.read_text(encoding="utf-8"))["writerId"])
        writer_id = str(uuid.uuid4())
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps({"writerId": writer_id}), encoding="utf-8")
        tmp.replace(path)
        _fsync_dir(self.directory)
        return writer_id

    def segments(self) -> list[tuple[int, Path]]:
        found = []
        for path in self.directory.glob(f"{_SEGMENT_PREFIX}*{_SEGMENT_SUFFIX}"):
            digits = path.name[len(_SEGMENT_PREFIX):-len(_SEGMENT_SUFFIX)]
            if digits.isdigit():
                found.append((int(digits), path))
        return sorted(found)

    def replay(self, *, keep: int | None = None) -> Replay:
        """Read every segment, drop a torn last line, and open a fresh segment for appends.

        ``keep`` bounds how many entries come back (the oldest first); ``Replay.last_seq`` still names the
        newest, and the rest can be read later with ``read_range``.
        """
        entries: list[WalEntry] = []
        torn: TornLine | None = None
        last_seq = 0
        segments = self.segments()
        for index, (_, path) in enumerate(segments):
            data = path.read_bytes()
            offset = 0
            for number, raw in enumerate(data.splitlines(keepends=True), start=1):
                entry = _parse(raw)
                if entry is None:
                    is_last = index == len(segments) - 1 and offset + len(raw) == len(data)
                    if not is_last:
                        raise WalCorruptError(f"{path}:{number}: unreadable write-ahead log line")
                    torn = TornLine(str(path), number, len(raw))
                    with path.open("r+b") as handle:
                        handle.truncate(offset)
                        os.fsync(handle.fileno())
                    break
                if keep is None or len(entries) < keep:
                    entries.append(entry)
                last_seq = entry.wal_seq
                offset += len(raw)
        # A compacted log may be empty; its newest segment's name still says where numbering continues,
        # and numbers must never repeat (the audit branch remembers each writer's highest one).
        self.next_seq = max(last_seq + 1, segments[-1][0] if segments else 1)
        self._open_segment()
        return Replay(entries, torn, last_seq)

    def read_range(self, low: int, high: int) -> list[WalEntry]:
        """Entries with ``low ≤ wal seq ≤ high`` (all fsync'd), read back from the segments.

        Safe while appends continue: lines up to ``high`` are complete, and a half-written line beyond it is
        skipped.
        """
        segments = self.segments()
        out: list[WalEntry] = []
        for (first, path), next_first in zip(segments, [*(f for f, _ in segments[1:]), None], strict=True):
            if first > high or (next_first is not None and next_first <= low):
                continue
            try:
                data = path.read_bytes()
            except FileNotFoundError:  # compacted meanwhile: it held only pushed records
                continue
            for raw in data.splitlines(keepends=True):
                entry = _parse(raw)
                if entry is not None and low <= entry.wal_seq <= high:
                    out.append(entry)
        return out

    def _open_segment(self) -> None:
        if self._active is not None:
            os.close(self._active)
        self._active_first = self.next_seq
        path = self.directory / _segment_name(self.next_seq)
        self._active = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        _fsync_dir(self.directory)

    def append(self, records: list[dict[str, Any]]) -> int:
        """Append records with consecutive WAL sequence numbers, fsync once; returns the last number."""
        if self._active is None:
            raise AuditError("write-ahead log is not open: call replay() first")
        lines = []
        for record in records:
            lines.append(json.dumps({"r": record, "w": self.next_seq}, sort_keys=True, separators=(",", ":"),
                                    ensure_ascii=False).encode("utf-8") + b"\n")
            self.next_seq += 1
        payload = b"".join(lines)
        view = memoryview(payload)
        while view:
            written = os.write(self._active, view)
            view = view[written:]
        os.fsync(self._active)
        return self.next_seq - 1

    def rotate(self) -> None:
        """Start a new segment so the current one can be deleted once its records are on the branch."""
        if self._active is not None and self.next_seq == self._active_first:
            return  # the active segment is empty; nothing to close
        self._open_segment()

    def compact(self, upto: int) -> int:
        """Delete closed segments whose records all have WAL seq ≤ ``upto``; returns how many were deleted."""
        segments = self.segments()
        deleted = 0
        for (_first, path), (next_first, _) in itertools.pairwise(segments):
            if next_first - 1 <= upto and next_first <= self._active_first:
                path.unlink()
                deleted += 1
        if deleted:
            _fsync_dir(self.directory)
        return deleted

    def close(self) -> None:
        if self._active is not None:
            os.close(self._active)
            self._active = None
        with contextlib.suppress(OSError):
            fcntl.flock(self._lock_fd, fcntl.LOCK_UN)
            os.close(self._lock_fd)


def _parse(raw: bytes) -> WalEntry | None:
    if not raw.endswith(b"\n"):
        return None
    try:
        value = json.loads(raw)
    except ValueError:
        return None
    if not isinstance(value, dict) or not isinstance(value.get("w"), int) or not isinstance(value.get("r"), dict):
        return None
    return WalEntry(value["w"], value["r"])
