"""Findings: what validation tells a user about their input. Values, never exceptions."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from gitopsq.errors import Location


class Severity(Enum):
    ERROR = "error"
    WARNING = "warning"


@dataclass(frozen=True, slots=True, kw_only=True)
class Finding:
    """One problem with a file or object: where, which object, what rule, and a sentence a team lead understands.

    ``code`` is a stable identifier scripts can match on (e.g. ``unknown-field``, ``invalid-quantity``).
    """

    severity: Severity
    code: str
    message: str
    location: Location | None = None
    obj: str | None = None  # "ClusterQueue/team-a" or "LocalQueue/ns/name"

    @property
    def is_error(self) -> bool:
        return self.severity is Severity.ERROR

    def sort_key(self) -> tuple[str, int, int, str, str]:
        loc = self.location
        return (loc.path if loc else "", (loc.line or 0) if loc else 0, 0 if self.is_error else 1,
                self.code, self.message)

    def __str__(self) -> str:
        where = f"{self.location}: " if self.location else ""
        what = f"{self.obj}: " if self.obj else ""
        return f"{where}{self.severity.value}: {what}{self.message} [{self.code}]"


def error(code: str, message: str, *, location: Location | None = None, obj: str | None = None) -> Finding:
    return Finding(severity=Severity.ERROR, code=code, message=message, location=location, obj=obj)


def warning(code: str, message: str, *, location: Location | None = None, obj: str | None = None) -> Finding:
    return Finding(severity=Severity.WARNING, code=code, message=message, location=location, obj=obj)
