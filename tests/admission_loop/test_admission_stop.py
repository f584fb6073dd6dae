"""An idle admission loop ends promptly when asked to stop, without anyone poking its cache."""

from __future__ import annotations

import time

import pytest
from envtest_rig import Envtest
from running_loop import RunningLoop

from gitopsq.admission_loop.options import LoopOptions

pytestmark = pytest.mark.envtest


def test_an_idle_loop_stops_within_a_second(kueue_clean: Envtest) -> None:
    """With a 10 s resync and nothing changing, setting the stop event alone ends the loop (and its watches)
    in well under a second, not after the resync's wait: the benchmark's SIGINT and a lost Lease rely on it."""
    running = RunningLoop(kueue_clean, LoopOptions(resync=10.0))
    with running:
        time.sleep(1.5)  # idle: waiting for a change
        started = time.monotonic()
        running.stop.set()
        running.thread.join(10)
        took = time.monotonic() - started
        assert not running.thread.is_alive()
        assert took < 1.0, f"stop took {took:.1f} s"
