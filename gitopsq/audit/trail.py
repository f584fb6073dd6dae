"""``AuditTrail``: the one object the rest of gitopsq talks to.

    trail = AuditTrail.open("/srv/queues.git", "/var/lib/gitopsq/audit-wal")
    trail.record(records.sync_attempt(...))      # returns once the record is fsync'd in the WAL
    ticket = trail.submit(records.admission(...)) # admission path: cheap, not yet durable
    trail.wait_durable(ticket)                    # …durable before the Workload status is written
    trail.close()                                 # commits and pushes what it can; the rest waits in the WAL

Two background threads do the slow work:
1. the WAL thread takes every submitted record, appends the group to the WAL and fsyncs once (group commit),
   then wakes the waiters;
2. the commit thread turns durable records into one commit on the audit branch every ``batch_seconds`` or
   ``batch_records``, pushes it, retries a rejected push on the new tip (renumbering our records after the
   other writer's), backs off while the remote is unreachable, and compacts the WAL after a push.

The commit it last pushed is kept beside the WAL (``pushed.json``); a branch that no longer descends from it is an
incident (rewind_guard.py): records go onto the known history under a recovery ref, never onto the branch, and
the WAL is not compacted until the branch holds that history again.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from gitopsq import logs
from gitopsq.audit.backlog import Backlog
from gitopsq.audit.canonical import canonical_json
from gitopsq.audit.gitstore import AuditBranch, PushRejectedError, RemoteUnreachableError
from gitopsq.audit.known_tip import KnownTip, load_known_tip
from gitopsq.audit.records import Record, validate_record
from gitopsq.audit.redact import redact
from gitopsq.audit.rewind_guard import RewindGuard
from gitopsq.audit.signing import SshSigner
from gitopsq.audit.sink import TrailSettings, TrailStatus
from gitopsq.audit.wal import Replay, WalEntry, WriteAheadLog
from gitopsq.errors import AuditError

_log = logs.get("audit")


class AuditBranchRewoundError(AuditError):
    """The audit branch does not hold what this writer pushed: records go to the recovery ref, not the branch."""


class AuditTrail:
    """Durable, batched, hash-chained audit writer. Thread-safe for callers."""

    def __init__(self, wal: WriteAheadLog, branch: AuditBranch, settings: TrailSettings, *,
                 replay: Replay, clock: Callable[[], datetime], known: KnownTip | None = None) -> None:
        self._wal, self._branch, self._settings, self._clock = wal, branch, settings, clock
        self._guard = RewindGuard(branch, wal.directory, wal.writer_id, known, clock)
        self._torn = replay.torn
        self._cond = threading.Condition()
        self._incoming: list[dict[str, Any]] = []
        self._backlog = Backlog(settings.memory_records, replay.entries, wal.next_seq - 1)
        self._ids: dict[str, None] = {}  # insertion-ordered set, bounded by settings.dedup_window
        for entry in replay.entries:
            self._remember(str(entry.record.get("id")))
        self._submitted = wal.next_seq - 1
        self._synced = False          # fetched the branch at least once since opening
        self._flush_requested = False
        self._compact_upto = 0
        self._closing = self._stopped = False
        self._last_error: str | None = None
        # Commit rounds are numbered as they start. A flush() waiter stops waiting on the failure of a round that
        # started after its request: a round already under way may have tried a remote that has since come back.
        self._rounds = 0
        self._failed_round = 0
        self._flush_round = 0         # rounds started when the newest flush request came in
        self._oldest_wait: float | None = time.monotonic() if len(self._backlog) else None
        self._wal_thread = threading.Thread(target=self._wal_loop, name="audit-wal", daemon=True)
        self._commit_thread = threading.Thread(target=self._commit_loop, name="audit-commit", daemon=True)
        self._wal_thread.start()
        self._commit_thread.start()

    @classmethod
    def open(cls, target: str, wal_dir: str | Path, *, settings: TrailSettings | None = None,
             clock: Callable[[], datetime] | None = None) -> AuditTrail:
        """Lock the WAL directory, replay it, and start writing to ``target``'s audit branch."""
        settings = settings or TrailSettings()
        wal = WriteAheadLog(wal_dir)
        try:
            replay = wal.replay(keep=settings.memory_records)
            if replay.torn is not None:
                _log.warning("audit_wal_torn_line_dropped", path=replay.torn.path, line=replay.torn.line,
                             bytes=replay.torn.size)
            signer = SshSigner(settings.signing_key) if settings.signing_key else None
            branch = AuditBranch(Path(wal_dir) / "cache.git", target, settings.branch,
                                 identity=settings.identity, signer=signer)
            known = load_known_tip(Path(wal_dir), settings.branch)
        except BaseException:
            wal.close()
            raise
        return cls(wal, branch, settings, replay=replay, clock=clock or (lambda: datetime.now(UTC)), known=known)

    # -- the caller's side ------------------------------------------------------------------------------------

    def submit(self, record: Record | Mapping[str, Any]) -> int:
        """Queue a record; returns a ticket for ``wait_durable``. Not durable yet. A known id is dropped."""
        data = record.data if isinstance(record, Record) else _checked(record)
        record_id = str(data["id"])
        with self._cond:
            if self._closing:
                raise AuditError("audit trail is closed")
            if record_id in self._ids:
                return self._submitted
            self._remember(record_id)
            self._incoming.append(data)  # type: ignore[arg-type]
            self._submitted += 1
            self._cond.notify_all()
            return self._submitted

    def wait_durable(self, ticket: int | None = None, timeout: float | None = None) -> None:
        """Block until the record behind ``ticket`` (default: everything submitted) is fsync'd in the WAL."""
        with self._cond:
            goal = self._submitted if ticket is None else ticket
            if not self._cond.wait_for(lambda: self._backlog.durable >= goal or self._stopped, timeout):
                raise AuditError(f"audit record not durable after {timeout}s")
            if self._backlog.durable < goal:
                raise AuditError(f"audit trail stopped before the record was durable: {self._last_error}")

    def record(self, record: Record | Mapping[str, Any]) -> None:
        """Append a record and return once it is fsync'd in the WAL (the branch commit follows later)."""
        self.wait_durable(self.submit(record))

    def flush(self, timeout: float = 60.0) -> bool:
        """Commit and push everything submitted so far; False if it is not on the branch within ``timeout``, or
        as soon as a commit round started after this call fails (the records keep waiting in the WAL)."""
        self.wait_durable(timeout=timeout)
        with self._cond:
            goal, started = self._backlog.durable, self._rounds
            self._flush_requested = True
            self._flush_round = started
            self._cond.notify_all()
            self._cond.wait_for(lambda: self._backlog.pushed >= goal or self._stopped or self._failed_round > started,
                                timeout)
            return self._backlog.pushed >= goal and self._guard.incident is None

    def status(self) -> TrailStatus:
        with self._cond:
            return TrailStatus(self._submitted, self._backlog.durable, self._backlog.pushed, self._branch.tip.head,
                               self._last_error, self._torn, len(self._backlog.memory), self._guard.incident,
                               self._guard.known if self._guard.watermark() else None)

    def close(self, timeout: float = 30.0) -> None:
        """Make everything durable, try one last push, stop the threads and release the WAL lock."""
        with self._cond:
            if self._stopped:
                return
            self._closing = True
            self._cond.notify_all()
        try:
            self.flush(timeout)
        finally:
            with self._cond:
                self._stopped = True
                self._cond.notify_all()
            self._wal_thread.join(timeout)
            self._commit_thread.join(timeout)
            if self._backlog.pushed and not self._wal_thread.is_alive() and self._guard.incident is None:
                self._wal.rotate()
                self._wal.compact(self._backlog.pushed)
            self._wal.close()

    def __enter__(self) -> AuditTrail:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- the WAL thread ---------------------------------------------------------------------------------------

    def _wal_loop(self) -> None:
        while True:
            with self._cond:
                self._cond.wait_for(lambda: self._incoming or self._compact_upto or self._stopped)
                if self._stopped and not self._incoming:
                    return
                batch, self._incoming = self._incoming, []
                compact_upto, self._compact_upto = self._compact_upto, 0
            if batch:
                try:
                    last = self._wal.append(batch)
                except Exception as err:  # any failure here must wake the waiters, never hang them
                    with self._cond:
                        self._last_error = f"write-ahead log append failed: {err}"
                        self._stopped = True
                        self._cond.notify_all()
                    _log.error("audit_wal_append_failed", error=str(err))
                    return
                first = last - len(batch) + 1
                entries = [WalEntry(first + i, r) for i, r in enumerate(batch)]
                with self._cond:
                    if not len(self._backlog):
                        self._oldest_wait = time.monotonic()
                    self._backlog.add(entries)
                    self._cond.notify_all()
            if compact_upto:
                self._wal.rotate()
                self._wal.compact(compact_upto)

    # -- the commit thread ------------------------------------------------------------------------------------

    def _due(self) -> bool:
        if self._stopped or self._guard.incident is not None:  # an incident is rechecked every round (with backoff)
            return True
        waiting = len(self._backlog)
        if not waiting:
            return False
        if self._flush_requested or waiting >= self._settings.batch_records:
            return True
        return self._oldest_wait is not None and \
            time.monotonic() - self._oldest_wait >= self._settings.batch_seconds

    def _commit_loop(self) -> None:
        backoff = 0.0
        while True:
            with self._cond:
                self._cond.wait_for(self._due, timeout=min(self._settings.batch_seconds, 0.5))
                if self._stopped:
                    return
                if not self._due():
                    continue
                self._rounds += 1
                round_number = self._rounds
            try:
                self._commit_round()
                backoff = 0.0
            except (RemoteUnreachableError, AuditBranchRewoundError) as err:
                backoff = min(max(backoff * 2, self._settings.backoff_initial), self._settings.backoff_max)
                self._note_failure(str(err), round_number)
                if isinstance(err, RemoteUnreachableError):
                    _log.warning("audit_remote_unreachable", error=str(err), retry_in=backoff)
                self._sleep(backoff)
            except AuditError as err:
                self._note_failure(str(err), round_number)
                _log.error("audit_commit_failed", error=str(err))
                self._sleep(self._settings.backoff_initial)

    def _note_failure(self, message: str, round_number: int) -> None:
        with self._cond:
            self._last_error = message
            self._failed_round = round_number
            if round_number > self._flush_round:  # the flush waiters have their answer; records wait in the WAL
                self._flush_requested = False
            self._cond.notify_all()

    def _sleep(self, seconds: float) -> None:
        with self._cond:
            self._cond.wait_for(lambda: self._stopped or self._flush_requested, seconds)

    def _first_sync(self) -> None:
        """On the first fetch, learn which replayed records the branch already holds (crash after push)."""
        self._branch.fetch()
        self._guard.settle()
        watermark = self._branch.writer_watermark(self._wal.writer_id) if self._backlog.replayed_upto else 0
        watermark = max(watermark, self._guard.watermark())
        if watermark >= self._wal.next_seq:
            # The WAL lost its files (numbering restarted): numbers prove nothing, ids still do.
            _log.warning("audit_wal_numbering_behind_branch", watermark=watermark, next=self._wal.next_seq)
            watermark = 0
        known = self._branch.recent_ids(limit=self._settings.dedup_window)
        with self._cond:
            dropped = self._backlog.skip(watermark, known)
            for record_id in known:
                self._remember(record_id)
            self._after_progress()
        if dropped:
            _log.info("audit_wal_replay_already_on_branch", dropped=dropped, watermark=watermark)
        self._synced = True

    def _commit_round(self) -> None:
        """Commit and push the oldest waiting records (at most max_batch)."""
        if not self._synced:
            self._first_sync()
        elif self._guard.incident is not None:  # has the branch been given back its history?
            self._branch.fetch()
            self._guard.settle()
        with self._cond:
            batch, low, high = self._backlog.next_batch(self._settings.max_batch)
        if high >= low:
            if batch is None:  # spilled: read the records back from the WAL
                batch = self._wal.read_range(low, high)
                if [e.wal_seq for e in batch] != list(range(low, high + 1)):
                    raise AuditError(f"write-ahead log is missing records {low}-{high}")
            fresh = self._backlog.keep(batch)
            if fresh:
                self._push(fresh, writer={"id": self._wal.writer_id, "walSeq": high})
            with self._cond:
                self._backlog.done_through(high)
                self._after_progress()
        if self._guard.incident is not None:  # a failed round even with nothing to push: it backs off
            raise AuditBranchRewoundError(self._guard.incident.message())

    def _push(self, batch: list[WalEntry], *, writer: dict[str, Any]) -> None:
        for attempt in range(self._settings.push_retries):
            commit_id, head = self._branch.build([e.record for e in batch], writer=writer, now=self._clock())
            try:
                ref = self._guard.push(commit_id)  # during an incident: onto the known history, never the branch
                _log.info("audit_batch_pushed", records=len(batch), seq=head.seq, hash=head.hash, ref=ref)
                self._guard.pushed(commit_id, ref, writer)
                return
            except PushRejectedError:
                _log.info("audit_push_rejected_retrying", attempt=attempt + 1)
                time.sleep(random.uniform(0.01, 0.05) * (attempt + 1))
                self._branch.fetch()
                self._guard.settle()
                # A push that landed although we saw an error shows up as our own writer near the tip.
                landed = self._branch.writer_watermark(self._wal.writer_id, max_commits=64)
                batch = [e for e in batch if e.wal_seq > landed]
                if not batch:
                    return
        raise AuditError(f"audit push still rejected after {self._settings.push_retries} attempts")

    def _after_progress(self) -> None:
        """Release flush waiters and let the WAL compact what is on the branch. Lock held."""
        waiting = len(self._backlog)
        self._oldest_wait = time.monotonic() if waiting else None
        if not waiting:
            self._flush_requested = False
        if self._backlog.pushed > 0 and self._guard.incident is None:  # during an incident the WAL keeps every record
            self._compact_upto = max(self._compact_upto, self._backlog.pushed)
        self._last_error = None if self._guard.incident is None else self._guard.incident.message()
        self._cond.notify_all()

    def _remember(self, record_id: str) -> None:
        """Keep the id for duplicate checks; the oldest ids fall out beyond the dedup window. Lock held."""
        self._ids[record_id] = None
        if len(self._ids) > self._settings.dedup_window:
            del self._ids[next(iter(self._ids))]


def _checked(record: Mapping[str, Any]) -> dict[str, Any]:
    """A record handed in as a plain mapping: redact it and check its envelope."""
    data = redact(dict(record))
    try:
        canonical_json(data)
    except (TypeError, ValueError) as err:
        raise AuditError(f"invalid audit record: not JSON data ({err})") from err
    problems = validate_record(data)
    if problems:
        raise AuditError(f"invalid audit record: {'; '.join(problems)}")
    return data  # type: ignore[no-any-return]
