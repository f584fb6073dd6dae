"""A writer run as a separate process by the crash tests: records admissions and acknowledges each on stdout.

Usage: python -m tests.audit.writer_process TARGET WAL_DIR START COUNT [--flush-then-wait | --report]
Prints ``ack <i>`` once record ``i`` is durable, ``pushed`` after a successful flush, then either exits or
(with --flush-then-wait) sleeps until killed. With --report it flushes, prints ``flushed True|False`` and the
incident (``incident <recovery ref>`` or ``incident none``), then closes. With --flush-then-wait the WAL is
never compacted, so the kill
always lands "after the push, before compaction" (on a busy machine compaction could otherwise win the race).
"""

from __future__ import annotations

import sys
import time

from gitopsq.audit.trail import AuditTrail
from gitopsq.audit.wal import WriteAheadLog

from .conftest import admitted, fast_settings


def main(argv: list[str]) -> None:
    target, wal_dir, start, count = argv[0], argv[1], int(argv[2]), int(argv[3])
    if "--flush-then-wait" in argv:
        WriteAheadLog.compact = lambda self, upto: 0  # type: ignore[method-assign]
    trail = AuditTrail.open(target, wal_dir, settings=fast_settings(batch_seconds=0.1, batch_records=40))
    for i in range(start, start + count):
        trail.record(admitted(i))
        sys.stdout.write(f"ack {i}\n")
        sys.stdout.flush()
    if "--report" in argv:
        sys.stdout.write(f"flushed {trail.flush(30)}\n")
        incident = trail.status().incident
        sys.stdout.write(f"incident {incident.recovery_ref if incident else 'none'}\n")
        sys.stdout.flush()
    if "--flush-then-wait" in argv:
        if trail.flush(30):
            sys.stdout.write("pushed\n")
            sys.stdout.flush()
        time.sleep(600)
    trail.close()


if __name__ == "__main__":
    main(sys.argv[1:])
