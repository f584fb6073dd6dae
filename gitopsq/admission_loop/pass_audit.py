"""The admission pass's audit records: one ``admission.*`` record per decision written, durable once per pass.

Each decision the pass writes to the API server (admitted, preempted, evicted; finished when it sees one) is
handed to the audit sink with ``submit`` — about a microsecond, no fsync — right after its write succeeded,
from whichever write thread made it. At the end of the pass one ``wait_durable`` covers every record the pass
submitted: a pass of fifty admissions costs one WAL fsync instead of fifty, and no decision of a finished pass
is left un-durable. (As with one fsync per record, a process killed between an API write and the fsync loses
that write's record: the window is the rest of the pass instead of one call.)
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from datetime import UTC, datetime

from gitopsq import logs
from gitopsq.admission_loop.live_workload import LiveWorkload
from gitopsq.admission_loop.ports import DecisionSink
from gitopsq.audit import records
from gitopsq.errors import AuditError

_log = logs.get("admission")


def _at(t: float) -> datetime:
    return datetime.fromtimestamp(t, UTC)


class PassAudit:
    """Submits records for one loop; `durable` waits once for everything submitted since the last call."""

    def __init__(self, sink: DecisionSink | None) -> None:
        self.sink = sink  # a gitopsq.audit AuditSink, or None: no auditing
        self._lock = threading.Lock()
        self._ticket: int | None = None  # the highest ticket submitted and not yet waited for
        self.waits = 0  # wait_durable calls made (one per pass that submitted something)

    def submit(self, transition: str, w: LiveWorkload, cq: str, flavors: Mapping[str, Mapping[str, str]],
               now: float, *, reason: str = "", message: str = "", times: Mapping[str, float] | None = None) -> None:
        """Queue one ``admission.<transition>`` record (thread-safe: write threads call it)."""
        if self.sink is None:
            return
        record = records.admission(
            transition, time=_at(now), workload=records.WorkloadRef(w.namespace, w.name, w.uid or None),
            cluster_queue=cq, flavors=flavors, reason=reason, message=message, local_queue=w.queue,
            priority=w.priority, times={k: _at(v) for k, v in (times or {"created": w.created}).items()})
        try:
            ticket = self.sink.submit(record)
        except AuditError as err:
            _log.warning("audit record not submitted", workload=w.key, transition=transition, error=str(err))
            return
        with self._lock:
            self._ticket = ticket if self._ticket is None else max(self._ticket, ticket)

    def durable(self) -> None:
        """One ``wait_durable`` for every record submitted since the last call (none submitted: no call)."""
        with self._lock:
            ticket, self._ticket = self._ticket, None
        if ticket is None or self.sink is None:
            return
        self.waits += 1
        try:
            self.sink.wait_durable(ticket)
        except AuditError as err:
            _log.warning("audit records not made durable", up_to=ticket, error=str(err))
