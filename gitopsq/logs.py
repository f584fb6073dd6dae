"""structlog set-up: JSON lines for the controller, human-readable lines for the CLI. Secrets never logged."""

from __future__ import annotations

import logging
import sys
import threading
from collections.abc import MutableMapping
from typing import Any

import structlog

_SECRET_KEYS = ("token", "password", "secret", "private_key", "authorization", "credentials")


def _redact(_: Any, __: str, event: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    """Replace the value of any key that looks like a credential, wherever a caller put it."""
    for key in list(event):
        if any(s in key.lower() for s in _SECRET_KEYS):
            event[key] = "[redacted]"
    return event


class _StderrLogger:
    """Writes each rendered line to the `sys.stderr` of the moment of writing, not of configuring.

    A stream captured at `configure` time goes stale when a caller swaps `sys.stderr` and later closes its stand-in
    (click's CliRunner does both): every logger would then raise "I/O operation on closed file".
    """

    _lock = threading.Lock()

    def msg(self, message: str) -> None:
        with self._lock:
            stream = sys.stderr
            stream.write(message + "\n")
            stream.flush()

    log = debug = info = warn = warning = msg
    fatal = failure = err = error = critical = exception = msg


def _stderr_logger(*_: Any) -> _StderrLogger:
    return _StderrLogger()


def configure(*, json: bool, level: str = "info") -> None:
    """Configure structlog once per process."""
    renderer: Any = structlog.processors.JSONRenderer() if json else structlog.dev.ConsoleRenderer(colors=False)
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            _redact,
            structlog.processors.format_exc_info,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(logging.getLevelName(level.upper())),
        logger_factory=_stderr_logger,
        # No caching: a cached logger keeps the level and renderer of its first use, and a later `configure`
        # (another command in the same process, a test) would not reach module-level loggers.
        cache_logger_on_first_use=False,
    )


def get(name: str) -> Any:
    """A logger bound to a component name.

    A lazy proxy that binds on every use, so one module-level ``_log = logs.get(...)`` follows whichever
    `configure` is in force (and whichever stream is `sys.stderr`) when it writes.
    """
    return structlog.get_logger(name, component=name)
