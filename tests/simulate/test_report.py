"""The text report: timeline, per-ClusterQueue table, pending workloads; deterministic."""

from __future__ import annotations

import pytest

from gitopsq.simulate.result import QueueFinal, WorkloadFinal
from gitopsq.simulate.text_report import format_duration, format_time, percentile, render_text

from .builders import event, result


def _line(text: str, *needles: str) -> str:
    matches = [line for line in text.splitlines() if all(n in line for n in needles)]
    assert len(matches) == 1, (needles, text)
    return matches[0]


@pytest.mark.parametrize(("seconds", "text"), [
    (0, "0:00:00"), (59, "0:00:59"), (100, "0:01:40"), (3600 * 9 + 61, "9:01:01"), (0.25, "0:00:00.250"),
    (-30, "-0:00:30"),
], ids=["start", "under-a-minute", "minutes", "working-day", "fraction-of-a-second", "before-the-start"])
def test_times_print_as_clock_readings(seconds: float, text: str) -> None:
    """Simulated times print as H:MM:SS, with milliseconds only when needed."""
    assert format_time(seconds) == text


@pytest.mark.parametrize(("seconds", "text"), [
    (0, "0.0s"), (12.34, "12.3s"), (200, "3m 20s"), (7500, "2h 05m"),
], ids=["none", "seconds", "minutes", "hours"])
def test_waits_print_in_the_largest_useful_unit(seconds: float, text: str) -> None:
    """Waits print as seconds, minutes and seconds, or hours and minutes."""
    assert format_duration(seconds) == text


@pytest.mark.parametrize(("values", "fraction", "want"), [
    ((), 0.95, 0.0), ((5.0,), 0.95, 5.0), (tuple(float(i) for i in range(1, 21)), 0.95, 19.0),
    ((3.0, 1.0, 2.0), 0.5, 2.0),
], ids=["no-waits", "one-wait", "twenty-waits-p95-is-19th", "unsorted-median"])
def test_percentile_is_nearest_rank(values: tuple[float, ...], fraction: float, want: float) -> None:
    """p95 is the nearest-rank percentile of the waits."""
    assert percentile(values, fraction) == want


def test_reservation_followed_by_admission_is_one_timeline_line() -> None:
    """Without admission checks, QuotaReserved and Admitted at the same instant show as one Admitted line."""
    text = render_text(result(events=(event(0, "ns/a", "QuotaReserved", flavor="default"),
                                      event(0, "ns/a", "Admitted", flavor="default"))))
    assert "QuotaReserved" not in text
    assert _line(text, "ns/a", "Admitted").split() == ["0:00:00", "ns/a", "Admitted", "cq-a", "default", "-"]


def test_reservation_waiting_for_checks_keeps_both_lines() -> None:
    """With admission checks, the reservation and the later admission are two lines at their own times."""
    text = render_text(result(events=(event(0, "ns/a", "QuotaReserved", flavor="default"),
                                      event(30, "ns/a", "Admitted", flavor="default"))))
    assert _line(text, "ns/a", "QuotaReserved").startswith("  0:00:00")
    assert _line(text, "ns/a", "Admitted").startswith("  0:00:30")


def test_timeline_shows_preemption_reason() -> None:
    """A preemption line carries Kueue's preemption reason."""
    text = render_text(result(events=(event(10, "ns/low", "Preempted", reason="InClusterQueue", flavor="on-demand"),)))
    assert _line(text, "ns/low", "Preempted").split()[-1] == "InClusterQueue"


def test_long_timelines_can_be_cut() -> None:
    """max_events keeps the first events and says how many were left out."""
    events = tuple(event(i, f"ns/w{i}", "Finished", reason="Succeeded") for i in range(5))
    text = render_text(result(events=events), max_events=2)
    assert "ns/w1" in text and "ns/w2" not in text
    assert "… 3 more events" in text


def test_queue_table_counts_admissions_preemptions_waits_and_utilisation() -> None:
    """Per ClusterQueue: admissions and preemptions during the run, pending at the end, waits, utilisation."""
    events = (event(0, "ns/a", "Admitted"), event(5, "ns/a", "Preempted", reason="InClusterQueue"),
              event(5, "ns/b", "Admitted"), event(9, "ns/c", "Admitted", cq="cq-b"))
    text = render_text(result(
        events=events,
        queues={"cq-b": QueueFinal({}, 0, 1), "cq-a": QueueFinal({}, 1, 1)},
        waits={"cq-a": (0.0, 5.0), "cq-b": (90.0,)}, utilisation={"cq-a": 0.5, "cq-b": 1.25}))
    assert _line(text, "cq-a", "%").split() == ["cq-a", "2", "1", "1", "2.5s", "5.0s", "50%"]
    assert _line(text, "cq-b", "%").split() == ["cq-b", "1", "0", "0", "1m", "30s", "1m", "30s", "125%"]
    assert text.index("cq-a  ") < text.index("cq-b  "), "queues are listed by name"


def test_pending_workloads_say_why() -> None:
    """Workloads pending at the end are listed with their ClusterQueue, reason and message."""
    text = render_text(result(workloads={
        "ns/b": WorkloadFinal("Pending", "cq-a", (), "WaitingForQuota", "couldn't assign flavors …, 2 more needed"),
        "ns/a": WorkloadFinal("Admitted", "cq-a")}))
    assert "Still pending (1):" in text
    assert _line(text, "ns/b").strip() == "ns/b in cq-a: WaitingForQuota: couldn't assign flavors …, 2 more needed"
    assert "ns/a" not in text


def test_quiet_run_says_nothing_happened() -> None:
    """A run without events says so instead of printing an empty table."""
    assert "nothing happened" in render_text(result())


def test_report_is_deterministic_whatever_the_mapping_order() -> None:
    """The same result gives the same text, whatever order its mappings were built in."""
    queues = {"b": QueueFinal({}, 0, 0), "a": QueueFinal({}, 0, 0)}
    first = render_text(result(queues=queues, events=(event(1, "ns/x", "Finished", cq="a"),)))
    second = render_text(result(queues=dict(reversed(list(queues.items()))),
                                events=(event(1, "ns/x", "Finished", cq="a"),)))
    assert first == second
    assert first.splitlines()[0] == "Simulation hand-made: simulated until 0:01:40; 0 admitted, 0 preempted, 1 finished"
