"""gitopsq.progress: when a progress line may be drawn, and how it is drawn and erased (pure, on a string)."""

from __future__ import annotations

import io

import pytest

from gitopsq.progress import NullProgress, TerminalProgress, for_stream, quiet_environment


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@pytest.mark.parametrize(("env", "quiet"), [
    ({}, False), ({"CI": "true"}, True), ({"CI": "1"}, True), ({"CI": "false"}, False), ({"CI": "0"}, False),
    ({"GITOPSQ_PROGRESS": "0"}, True), ({"GITOPSQ_PROGRESS": "1"}, False),
], ids=["plain", "ci-true", "ci-1", "ci-false", "ci-0", "turned-off", "turned-on"])
def test_quiet_environment(env: dict[str, str], quiet: bool) -> None:
    """CI set to anything but false/0, or GITOPSQ_PROGRESS=0, silences progress."""
    assert quiet_environment(env) is quiet


def test_a_stream_that_is_not_a_terminal_gets_no_progress() -> None:
    """A StringIO (not a TTY) always gets the NullProgress, whatever the environment."""
    assert isinstance(for_stream(io.StringIO(), {}), NullProgress)


def test_terminal_progress_redraws_at_most_ten_times_a_second_and_erases() -> None:
    """Advances within 0.1 s are not drawn; a later one is; done() blanks the line and returns to column 0."""
    stream, clock = io.StringIO(), _Clock()
    progress = TerminalProgress(stream, clock)
    progress.start("reading", 200)
    for _ in range(50):
        progress.advance()
    clock.now = 0.15
    progress.advance(10)
    progress.done()
    text = stream.getvalue()
    assert text.split("\r")[1:3] == ["reading: 0/200 (0%)", "reading: 60/200 (30%)"]
    assert text.endswith("\r" + " " * len("reading: 60/200 (30%)") + "\r")
