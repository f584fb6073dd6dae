"""The admission loop's audit records: admitted, preempted and finished transitions reach the audit sink."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from cluster_rig import admitted, apply, create_job, finish_job, job_manifest, queue_setup, wait_for
from envtest_rig import Envtest
from running_loop import FAST

from gitopsq.admission_loop.loop import AdmissionLoop
from gitopsq.audit.records import Record, validate_record

pytestmark = pytest.mark.envtest



class RecordingSink:
    """An AuditSink that keeps records in memory (the real trail is tested in tests/audit): a submitted record
    counts as kept only once a ``wait_durable`` covers its ticket, as the WAL's fsync would."""

    def __init__(self) -> None:
        self.records: list[dict[str, Any]] = []  # durable
        self.submitted: list[tuple[int, dict[str, Any]]] = []  # not yet durable
        self.tickets = 0
        self.waits = 0
        self.lock = threading.Lock()

    def submit(self, record: Record) -> int:
        with self.lock:
            self.tickets += 1
            self.submitted.append((self.tickets, dict(record.data)))
            return self.tickets

    def wait_durable(self, ticket: int | None = None, timeout: float | None = None) -> None:
        with self.lock:
            self.waits += 1
            upto = self.tickets if ticket is None else ticket
            self.records += [r for t, r in self.submitted if t <= upto]
            self.submitted = [(t, r) for t, r in self.submitted if t > upto]

    def record(self, record: Record) -> None:
        raise AssertionError("the admission pass submits its records and waits once per pass")

    def of(self, kind: str) -> list[dict[str, Any]]:
        with self.lock:
            return [r for r in self.records if r["type"] == kind]


def test_transitions_are_audited(kueue_clean: Envtest) -> None:
    """Admission, preemption, completion and re-admission each produce a well-formed admission.* record, in
    order, naming the workload, its ClusterQueue and flavors."""
    env = kueue_clean
    ns = env.new_namespace("audit")
    apply(env, queue_setup(ns, "audit-cq", priority_classes={"urgent": 100}, preemption="LowerPriority"))
    sink = RecordingSink()
    api = env.api_client()
    loop = AdmissionLoop(api, FAST, audit=sink)
    stop = threading.Event()
    thread = threading.Thread(target=loop.run, args=(stop, lambda: True), daemon=True)
    thread.start()
    try:
        create_job(env, job_manifest(ns, "low", "queue", {"cpu": "1"}))
        wait_for("low admitted", lambda: admitted(env, ns, "low"))
        create_job(env, job_manifest(ns, "urgent", "queue", {"cpu": "1"},
                                     labels={"kueue.x-k8s.io/priority-class": "urgent"}))
        wait_for("urgent admitted", lambda: admitted(env, ns, "urgent"), timeout=30)
        finish_job(env, ns, "urgent")
        wait_for("low admitted again once urgent finished", lambda: len(sink.of("admission.admitted")) == 3)
    finally:
        stop.set()
        loop.cache.changed.set()
        thread.join(30)
        api.close()
    assert sink.submitted == [], "every submitted record was made durable by its pass"
    assert 1 <= sink.waits <= loop.passes
    assert all(validate_record(r) == [] for r in sink.records)
    story = [(r["type"].split(".")[1], r["workload"]["name"].split("-")[1]) for r in sink.records]
    assert story == [("admitted", "low"), ("preempted", "low"), ("admitted", "urgent"), ("finished", "urgent"),
                     ("admitted", "low")]
    admissions = sink.of("admission.admitted")
    assert {r["clusterQueue"] for r in admissions} == {"audit-cq"}
    assert admissions[0]["flavors"] == {"main": {"cpu": "default-flavor"}}
    (preempted,) = sink.of("admission.preempted")
    assert preempted["workload"]["name"].startswith("job-low-") and preempted["reason"] == "InClusterQueue"
    (finished,) = sink.of("admission.finished")
    assert finished["workload"]["name"].startswith("job-urgent-")
