"""Admissions in flight (inflight.py): assumed while their write is out, forgotten once it is answered."""

from __future__ import annotations

import threading
import time
from typing import Any

from gitopsq.cluster.admission.inflight import InFlight, assumed_raw, overlay
from gitopsq.cluster.admission.live_workload import ADMITTED, PENDING, LiveWorkload, read_workload
from gitopsq.cluster.admission.workload_status import reserved_status


def _raw(name: str, version: str, *, uid: str = "") -> dict[str, Any]:
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
            "metadata": {"name": name, "namespace": "ns", "uid": uid or f"uid-{name}", "resourceVersion": version,
                         "creationTimestamp": "2026-11-26T10:00:00Z", "generation": 1},
            "spec": {"queueName": "q", "podSets": [{"name": "main", "count": 1, "template": {"spec": {
                "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}}}]},
            "status": {"conditions": [{"type": "QuotaReserved", "status": "False", "reason": "Pending",
                                       "message": "", "lastTransitionTime": "2026-11-26T10:00:00Z"}]}}


def _view(raw: dict[str, Any]) -> LiveWorkload:
    view = read_workload(raw)
    assert view is not None
    return view


def _admission(w: LiveWorkload) -> dict[str, Any]:
    return reserved_status(w.raw, "cq", w.pod_sets, {"main": {"cpu": "default"}}, (), 1_800_000_000.0)


def test_assumed_raw_is_the_merge_patch_applied() -> None:
    """The assumed object is what the status merge patch makes of it: fields replaced, None removed, the
    resourceVersion the write carries unchanged."""
    raw = _raw("a", "7")
    raw["status"]["requeueState"] = {"count": 1}
    merged = assumed_raw(raw, {"admission": {"clusterQueue": "cq"}, "requeueState": None})
    assert merged["status"]["admission"] == {"clusterQueue": "cq"}
    assert "requeueState" not in merged["status"]
    assert merged["status"]["conditions"] == raw["status"]["conditions"]
    assert merged["metadata"]["resourceVersion"] == "7"
    assert raw["status"]["requeueState"] == {"count": 1}  # the cached object is not touched


def test_overlay_keeps_newer_versions_and_adds_missing_ones() -> None:
    """Assumed admissions replace the version they were computed from and fill in Workloads the pass did not
    read; a newer version (the answer, or another writer's change) stays as read and is not overlaid."""
    a, b, c = _view(_raw("a", "5")), _view(_raw("b", "6")), _view(_raw("c", "9"))
    in_flight = InFlight(1)
    gate = threading.Event()
    try:
        for w in (a, b, c):
            in_flight.send(w, _admission(w), gate.wait)
        snapshot = in_flight.snapshot()
        newer_b = _view(_raw("b", "8"))
        live = {"ns/a": a, "ns/b": newer_b}  # c: beyond the pass's window
        overlaid = overlay(live, snapshot)
        assert overlaid == {"ns/a", "ns/c"}
        assert live["ns/a"].state == ADMITTED and live["ns/a"].cluster_queue == "cq"
        assert live["ns/c"].state == ADMITTED
        assert live["ns/b"] is newer_b and newer_b.state == PENDING
    finally:
        gate.set()
        in_flight.close(5)


def test_writes_are_not_awaited_and_queued_ones_count_as_unsent() -> None:
    """`send` returns at once; while the only sender is busy the next write waits unsent (the pass subtracts
    it from the tokens it spends); answered writes are forgotten and `drain` waits for them."""
    in_flight = InFlight(1)
    gate, answered = threading.Event(), []
    a, b = _view(_raw("a", "5")), _view(_raw("b", "6"))
    try:
        started = time.monotonic()
        in_flight.send(a, _admission(a), lambda: (gate.wait(), answered.append("a")))
        in_flight.send(b, _admission(b), lambda: answered.append("b"))
        assert time.monotonic() - started < 0.5
        deadline = time.monotonic() + 5
        while in_flight.unsent != 1 and time.monotonic() < deadline:  # a taken by the sender, b queued
            time.sleep(0.01)
        assert in_flight.unsent == 1
        assert len(in_flight) == 2
        assert not in_flight.drain(0.1)
        gate.set()
        assert in_flight.drain(5)
        assert answered == ["a", "b"]
        assert in_flight.unsent == 0 and len(in_flight) == 0 and in_flight.snapshot() == {}
    finally:
        gate.set()
        in_flight.close(5)


def test_a_failed_or_raising_write_is_forgotten() -> None:
    """A write that raises (a bug, logged) is forgotten like one the API server refused: the next pass decides
    that Workload again from what the cache holds."""
    in_flight = InFlight(2)
    a = _view(_raw("a", "5"))

    def boom() -> None:
        raise RuntimeError("bug")

    in_flight.send(a, _admission(a), boom)
    assert in_flight.drain(5)
    assert in_flight.snapshot() == {}
    in_flight.close(5)


def test_an_older_answer_does_not_forget_a_newer_send() -> None:
    """Sent again from a newer version (the first write will be a 409), the Workload stays assumed until the
    newer write is answered, whatever order the two answers come in."""
    in_flight = InFlight(2)
    first_gate, second_gate = threading.Event(), threading.Event()
    old, new = _view(_raw("a", "5")), _view(_raw("a", "8"))
    try:
        in_flight.send(old, _admission(old), first_gate.wait)
        in_flight.send(new, _admission(new), second_gate.wait)
        first_gate.set()
        deadline = time.monotonic() + 5
        while in_flight.unsent and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(0.1)  # the first write is answered
        assert in_flight.snapshot()["ns/a"].base_version == "8"
    finally:
        first_gate.set()
        second_gate.set()
        in_flight.close(5)
    assert in_flight.snapshot() == {}


def test_a_reason_in_flight_makes_its_workload_busy_until_answered() -> None:
    """A pending reason sent is not awaited; its Workload is `busy` (the pass sends it no second one) and holds
    no quota (nothing is assumed) until the answer, and it counts as unsent while queued."""
    in_flight = InFlight(1)
    gate = threading.Event()
    a = _view(_raw("a", "5"))
    try:
        in_flight.send(a, _admission(a), gate.wait)
        in_flight.send_write("ns/b", lambda: None)
        assert in_flight.busy() == {"ns/a", "ns/b"}
        assert set(in_flight.snapshot()) == {"ns/a"}
        assert in_flight.unsent >= 1  # b waits behind a's write
        gate.set()
        assert in_flight.drain(5)
        assert in_flight.busy() == set() and in_flight.unsent == 0
    finally:
        gate.set()
        in_flight.close(5)
