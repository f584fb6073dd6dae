"""The side-by-side benchmark's timeline of a run's first minutes (benchmarks/kueue_side_by_side/timeline.py)."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

from kueue_side_by_side.timeline import describe, ramp, timeline


@dataclass
class Times:
    created: dict[str, float] = field(default_factory=dict)
    admitted: dict[str, float] = field(default_factory=dict)
    finished: dict[str, float] = field(default_factory=dict)


def stalled_run() -> Times:
    """Ten Workloads created over 0–9 s; four admitted at 1–4 s, then nothing until one finishes at 8 s and the
    next is admitted at 8.5 s (quota full meanwhile); the rest after the creations."""
    t = Times()
    for i in range(10):
        t.created[f"w{i}"] = float(i)
    for i, at in enumerate([1.0, 2.0, 3.0, 4.0, 8.5, 12.0, 13.0]):
        t.admitted[f"w{i}"] = at
    t.finished["w0"] = 8.0
    t.finished["w1"] = 11.0
    return t


def test_timeline_counts_what_was_seen_by_each_step() -> None:
    points = timeline(stalled_run(), step=5.0, until=15.0)
    assert [(p.at_s, p.created, p.admitted, p.finished) for p in points] == [
        (5.0, 6, 4, 0), (10.0, 10, 5, 1), (15.0, 10, 7, 2)]


def test_ramp_reports_the_state_at_the_end_of_the_creations_and_the_longest_stall() -> None:
    r = ramp(stalled_run())
    assert r is not None
    assert r.creations_end_s == 9.0
    assert (r.admitted, r.finished) == (5, 1)
    # 4.0 → 8.5 s with Workloads waiting: the stall the quota made
    assert r.quota_stall_s == pytest.approx(4.5)


def test_a_gap_with_nothing_waiting_is_not_a_stall() -> None:
    """Admitted as soon as created, with long gaps between creations: no stall, whatever the gaps."""
    t = Times(created={"a": 0.0, "b": 10.0, "c": 30.0}, admitted={"a": 0.1, "b": 10.1, "c": 30.1})
    r = ramp(t)
    assert r is not None
    assert r.quota_stall_s == pytest.approx(0.1)  # only the moments between a creation and its admission
    assert r.admitted == 2  # c was admitted after the last creation


def test_describe_prints_a_row_per_step_until_a_minute_past_the_creations() -> None:
    text = describe(stalled_run())
    rows = [line for line in text.splitlines() if line[:1].isdigit()]
    assert [row.split(" | ")[0] for row in rows] == [str(10 * k) for k in range(1, 7)]  # 10 … 60 s, ends 69 s
    assert "creations ended at 9 s: 5 admitted and 1 finished" in text
    assert text.splitlines()[-1].endswith("before then: 4.5 s")


def test_long_runs_get_coarser_steps() -> None:
    t = Times(created={f"w{i}": float(i) for i in range(1000)})
    rows = [line for line in describe(t).splitlines() if line[:1].isdigit()]
    assert len(rows) <= 15
    assert rows[0].startswith("80 |")  # (999 + 60) s in at most 15 steps of a multiple of 10 s


def test_nothing_seen() -> None:
    assert ramp(Times()) is None
    assert describe(Times()) == "no Workload timestamps seen by the harness's watch"
    with pytest.raises(ValueError):
        timeline(Times(), step=0, until=10)


def test_the_watch_takes_the_objects_own_timestamps_not_when_it_saw_them() -> None:
    """A watch that saw a Workload late (here: now, an hour after the start) still files the times its object
    carries: created 5 s, quota reserved 7 s, finished 9 s after the start; the watch's own times are kept apart."""
    import datetime
    import time

    from kueue_side_by_side.observe import WorkloadClock

    start = datetime.datetime(2026, 11, 27, 9, 0, 0, tzinfo=datetime.UTC)
    clock = WorkloadClock(Path("unused"), zero=time.monotonic() - 3600, zero_wall=start.timestamp())
    obj = {"metadata": {"name": "w", "namespace": "ns", "creationTimestamp": "2026-11-27T09:00:05Z"},
           "status": {"admission": {"clusterQueue": "cq"}, "conditions": [
               {"type": "QuotaReserved", "status": "True", "lastTransitionTime": "2026-11-27T09:00:07Z"},
               {"type": "Admitted", "status": "True", "lastTransitionTime": "2026-11-27T09:00:07Z"},
               {"type": "Finished", "status": "True", "lastTransitionTime": "2026-11-27T09:00:09.250000Z"}]}}
    clock._see(obj)
    stamps = clock.times.stamps
    assert (stamps.created["ns/w"], stamps.admitted["ns/w"], stamps.finished["ns/w"]) == (5.0, 7.0, 9.25)
    assert clock.times.created["ns/w"] == pytest.approx(3600, abs=5)  # when the watch saw it
    # a later event with a new transition (evicted, admitted again) does not move the first stamps
    obj["status"]["conditions"][0]["lastTransitionTime"] = "2026-11-27T09:00:30Z"
    clock._see(obj)
    assert stamps.admitted["ns/w"] == 7.0


def test_a_condition_that_is_not_true_or_has_no_time_stamps_nothing() -> None:
    import time

    from kueue_side_by_side.observe import WorkloadClock

    clock = WorkloadClock(Path("unused"), zero=time.monotonic(), zero_wall=time.time())
    clock._see({"metadata": {"name": "w", "namespace": "ns", "creationTimestamp": "garbage"},
                "status": {"conditions": [{"type": "QuotaReserved", "status": "False",
                                           "lastTransitionTime": "2026-11-27T09:00:07Z"},
                                          {"type": "Finished", "status": "True"}]}})
    stamps = clock.times.stamps
    assert stamps.created == stamps.admitted == stamps.finished == {}
    assert "ns/w" in clock.times.created  # the watch still saw it
