"""The side-by-side benchmark's write floor (benchmarks/kueue_side_by_side/floor.py)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

from kueue_side_by_side.floor import write_floor


def test_workloads_created_together_are_admitted_a_token_apart_after_the_burst() -> None:
    """Ten Workloads at t=0 with a burst of 4 at 2/s: four at once, then one every half second."""
    floor = write_floor([0.0] * 10, qps=2, burst=4)
    assert floor.wall_s == 5.0
    assert floor.last_admission_s == pytest.approx(3.0)
    # waits: 0,0,0,0 then 0.5,1.0,...,3.0
    assert floor.mean_admission_s == pytest.approx(sum(0.5 * k for k in range(1, 7)) / 10)


def test_workloads_created_slower_than_the_rate_wait_for_nothing() -> None:
    """Creation slower than the client's rate leaves every Workload a token: the bound is zero."""
    floor = write_floor([i * 1.0 for i in range(20)], qps=2, burst=1)
    assert floor.mean_admission_s == pytest.approx(0.0)
    assert floor.last_admission_s == pytest.approx(19.0)


def test_tokens_refill_only_up_to_the_burst() -> None:
    """A long idle gap refills at most ``burst`` tokens, not the idle time × qps."""
    created = [0.0] + [100.0] * 6
    floor = write_floor(created, qps=1, burst=2)
    # at 100: 2 tokens → two at once, then one a second: waits 0,0,1,2,3,4
    assert floor.mean_admission_s == pytest.approx((0 + 0 + 0 + 1 + 2 + 3 + 4) / 7)


def test_creation_order_does_not_matter_to_the_input() -> None:
    """Times come from a watch in arrival order; the floor sorts them."""
    assert write_floor([3.0, 0.0, 1.0], qps=1, burst=1) == write_floor([0.0, 1.0, 3.0], qps=1, burst=1)


def test_an_impossible_client_is_refused() -> None:
    """A zero rate has no floor: a clear error rather than a division by zero."""
    with pytest.raises(ValueError, match="qps"):
        write_floor([0.0], qps=0, burst=1)
