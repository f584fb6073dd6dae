"""The pass's audit batching: records submitted from many write threads, one wait_durable per pass covering them."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from gitopsq.admission_loop.live_workload import read_workload
from gitopsq.admission_loop.pass_audit import PassAudit
from gitopsq.audit.records import Record, validate_record
from gitopsq.errors import AuditError


class Sink:
    """Tickets in submission order; ``waits`` lists the tickets wait_durable was called with."""

    def __init__(self, *, fail_submit: bool = False, fail_wait: bool = False) -> None:
        self.submitted: list[dict[str, Any]] = []
        self.waits: list[int | None] = []
        self.fail_submit, self.fail_wait = fail_submit, fail_wait
        self.lock = threading.Lock()

    def submit(self, record: Record) -> int:
        if self.fail_submit:
            raise AuditError("WAL full")
        with self.lock:
            self.submitted.append(dict(record.data))
            return len(self.submitted)

    def wait_durable(self, ticket: int | None = None, timeout: float | None = None) -> None:
        self.waits.append(ticket)
        if self.fail_wait:
            raise AuditError("fsync failed")


def workload(i: int) -> Any:
    return read_workload({
        "metadata": {"name": f"w-{i}", "namespace": "team", "uid": f"uid-{i}", "generation": 1,
                     "creationTimestamp": "2026-11-21T09:00:00Z"},
        "spec": {"queueName": "q", "priority": 10, "podSets": [{"name": "main", "count": 1, "template": {
            "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}}}]}})


def test_one_wait_covers_every_record_submitted_from_the_write_threads() -> None:
    """Fifty admissions submitted concurrently are all kept, and the pass waits once, for the highest ticket."""
    sink = Sink()
    audit = PassAudit(sink)
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda i: audit.submit("admitted", workload(i), "cq", {"main": {"cpu": "f"}}, 1.8e9,
                                             reason="Admitted"), range(50)))
    audit.durable()
    assert sink.waits == [50]
    assert sorted(r["workload"]["name"] for r in sink.submitted) == sorted(f"w-{i}" for i in range(50))
    assert all(validate_record(r) == [] for r in sink.submitted)


def test_a_pass_without_records_does_not_wait() -> None:
    """No record submitted since the last wait: no wait_durable call (no fsync for an idle pass)."""
    sink = Sink()
    audit = PassAudit(sink)
    audit.submit("finished", workload(1), "cq", {}, 1.8e9, reason="Finished")
    audit.durable()
    audit.durable()
    assert sink.waits == [1]


@pytest.mark.parametrize(("fail_submit", "fail_wait", "waits"), [
    pytest.param(True, False, [], id="a refused submit is logged and nothing is awaited"),
    pytest.param(False, True, [1], id="a failed wait is logged, not raised into the pass"),
])
def test_audit_failures_do_not_stop_the_pass(fail_submit: bool, fail_wait: bool, waits: list[int]) -> None:
    """An audit sink that fails costs a warning, never an exception in the admission pass."""
    sink = Sink(fail_submit=fail_submit, fail_wait=fail_wait)
    audit = PassAudit(sink)
    audit.submit("admitted", workload(1), "cq", {}, 1.8e9, reason="Admitted")
    audit.durable()
    assert sink.waits == waits


def test_no_sink_no_records() -> None:
    """Without an audit sink the pass neither builds records nor waits."""
    audit = PassAudit(None)
    audit.submit("admitted", workload(1), "cq", {}, 1.8e9)
    audit.durable()
    assert audit.waits == 0
