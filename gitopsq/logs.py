"""structlog set-up: JSON lines for the controller, human-readable lines for the CLI. Secrets never logged."""

from __future__ import annotations

import logging
import sys
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
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=True,
    )


def get(name: str) -> Any:
    """A logger bound to a component name.

    The logger stays a lazy proxy until its first use, so module-level loggers follow `configure` even when
    their module was imported before it ran (binding eagerly would freeze structlog's default, stdout, config).
    """
    return structlog.get_logger(name, component=name)
