"""The side-by-side's CPU probe (benchmarks/kueue_side_by_side/probe.py): the machine's speed printed with the table."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

from kueue_side_by_side import probe


def test_the_probe_reports_its_fastest_round() -> None:
    """Contention only slows a round down, so the rate is the units over the shortest round's CPU seconds."""
    readings = iter([0.0, 0.5, 1.0, 1.2, 2.0, 2.4])  # rounds of 0.5, 0.2 and 0.4 CPU seconds
    assert probe.rate(lambda: None, units=100, rounds=3, cpu=lambda: next(readings)) == pytest.approx(500.0)


def test_the_probe_does_the_same_work_every_time() -> None:
    """Every round decodes and walks the same Workloads: 4 pods × 3 containers × 3 requests each."""
    assert probe.round_trips(10) == probe.round_trips(10) == 10 * 4 * 3 * 3


def test_the_header_line_names_both_readings() -> None:
    line = probe.describe(21_500.4, 32_808.0)
    assert "21,500 before" in line and "32,808 after" in line
