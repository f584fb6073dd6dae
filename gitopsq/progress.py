"""Progress of long work (a large check, an audit export, a sync) on a terminal, and silence everywhere else.

`for_stderr` returns a `TerminalProgress` only when standard error is a real terminal and the environment is not
CI (``CI`` set to anything but ``false``/``0``) and ``GITOPSQ_PROGRESS`` is not ``0``; otherwise a `NullProgress`
that does nothing. Callers (the sync included) only see the `Progress` protocol: ``start``, ``advance``, ``done``.
The line is redrawn at most ten times a second and erased when the work is done, so finished output stays clean.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator, Mapping, MutableMapping
from typing import Protocol, TextIO, TypeVar

V = TypeVar("V")

REDRAW_SECONDS = 0.1


class Progress(Protocol):
    def start(self, label: str, total: int | None = None) -> None: ...

    def advance(self, count: int = 1) -> None: ...

    def done(self) -> None: ...


class NullProgress:
    """Progress that shows nothing (not a terminal, CI, or turned off)."""

    def start(self, label: str, total: int | None = None) -> None:
        pass

    def advance(self, count: int = 1) -> None:
        pass

    def done(self) -> None:
        pass


class TerminalProgress:
    """One line on a terminal, rewritten in place: ``label: 1,234/5,000`` (or a bare count with no total)."""

    def __init__(self, stream: TextIO, clock: object = time.monotonic) -> None:
        self._stream = stream
        self._clock = clock
        self._label = ""
        self._total: int | None = None
        self._count = 0
        self._drawn_at = float("-inf")
        self._width = 0

    def start(self, label: str, total: int | None = None) -> None:
        self._label, self._total, self._count = label, total, 0
        self._drawn_at = float("-inf")
        self._draw()

    def advance(self, count: int = 1) -> None:
        self._count += count
        now = self._now()
        if now - self._drawn_at >= REDRAW_SECONDS:
            self._draw(now)

    def done(self) -> None:
        if self._width:
            self._stream.write("\r" + " " * self._width + "\r")
            self._stream.flush()
            self._width = 0

    def _now(self) -> float:
        clock = self._clock
        return float(clock())  # type: ignore[operator]

    def _draw(self, now: float | None = None) -> None:
        self._drawn_at = self._now() if now is None else now
        if self._total:
            text = f"{self._label}: {self._count:,}/{self._total:,} ({self._count * 100 // self._total}%)"
        else:
            text = f"{self._label}: {self._count:,}"
        pad = max(0, self._width - len(text))
        self._stream.write("\r" + text + " " * pad)
        self._stream.flush()
        self._width = len(text)


def quiet_environment(env: Mapping[str, str]) -> bool:
    """True when the environment asks for no progress: CI, or GITOPSQ_PROGRESS=0."""
    ci = env.get("CI", "").strip().lower()
    return (ci not in ("", "0", "false", "no")) or env.get("GITOPSQ_PROGRESS", "").strip() == "0"


def for_stream(stream: TextIO, env: Mapping[str, str] | None = None) -> Progress:
    """A terminal progress line on ``stream`` when it is a TTY and the environment allows it, else nothing."""
    env = os.environ if env is None else env
    try:
        tty = stream.isatty()
    except (AttributeError, ValueError):
        tty = False
    if not tty or quiet_environment(env):
        return NullProgress()
    return TerminalProgress(stream)


def for_stderr(env: Mapping[str, str] | None = None) -> Progress:
    """Progress on standard error (see the module docstring for when it shows)."""
    return for_stream(sys.stderr, env)


class CountingCache(MutableMapping[str, V]):
    """A parse-cache mapping that advances ``progress`` once per file the pipeline looks up (hit or miss)."""

    def __init__(self, inner: MutableMapping[str, V], progress: Progress) -> None:
        self.inner = inner
        self.progress = progress

    def __getitem__(self, key: str) -> V:
        self.progress.advance()
        return self.inner[key]

    def __setitem__(self, key: str, value: V) -> None:
        self.inner[key] = value

    def __delitem__(self, key: str) -> None:
        del self.inner[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self.inner)

    def __len__(self) -> int:
        return len(self.inner)
