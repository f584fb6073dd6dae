"""The manager runs each runnable for a leadership term; one that raises is logged and run again (no cluster)."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from gitopsq import logs
from gitopsq.controller.manager import Controller


class Flaky:
    """Raises on its first run, then works until stopped."""

    name = "flaky"

    def __init__(self) -> None:
        self.runs = 0
        self.working = threading.Event()

    def run(self, stop: threading.Event, may_write: Callable[[], bool]) -> None:
        self.runs += 1
        if self.runs == 1:
            raise RuntimeError("threads can only be started once")
        assert may_write()
        self.working.set()
        stop.wait()


def test_a_runnable_that_raises_is_logged_and_run_again(capsys: pytest.CaptureFixture[str]) -> None:
    """The failure is one log line naming the runnable, the error and where it was raised; a second later the
    runnable runs again and works — a dead thread would leave a replica that leads and does nothing."""
    logs.configure(json=True)
    flaky = Flaky()
    controller = Controller([flaky])
    thread = threading.Thread(target=controller.run, daemon=True)
    thread.start()
    try:
        assert flaky.working.wait(10), "the runnable was not run again"
    finally:
        controller.stop()
        thread.join(10)
    assert flaky.runs == 2
    err = capsys.readouterr().err
    lines = [json.loads(line) for line in err.splitlines() if line.startswith("{")]
    failed = [line for line in lines if line["event"] == "runnable failed; restarting it"]
    assert len(failed) == 1
    assert failed[0]["runnable"] == "flaky" and failed[0]["delay"] == 1.0
    assert failed[0]["error"] == "RuntimeError: threads can only be started once"
    source = Path(__file__).read_text().splitlines()
    raised_at = next(n for n, line in enumerate(source, 1) if "raise RuntimeError" in line)
    assert failed[0]["at"] == f"{__file__}:{raised_at}"
    assert "Traceback" not in err


def test_a_runnable_that_returns_is_not_run_again() -> None:
    """Returning is how a runnable ends its term on its own: no restart, no log of a failure."""
    calls: list[int] = []

    class Once:
        name = "once"

        def run(self, stop: threading.Event, may_write: Callable[[], bool]) -> None:
            calls.append(1)

    controller = Controller([Once()])
    thread = threading.Thread(target=controller.run, daemon=True)
    thread.start()
    try:
        controller.started.wait(5)
        threading.Event().wait(1.5)  # longer than the first restart delay
    finally:
        controller.stop()
        thread.join(10)
    assert calls == [1]
