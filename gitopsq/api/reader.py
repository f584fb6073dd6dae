"""A typed reader over one decoded YAML/JSON document that collects findings instead of raising.

Every access names a field path; type mismatches, invalid quantities and unknown fields become findings with the
line of that field (looked up through ``line_of``) so a user sees exactly which line to fix.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from gitopsq.api import findings
from gitopsq.api.findings import Finding
from gitopsq.api.frozenmap import FrozenMap
from gitopsq.api.quantity import Quantity, QuantityError, parse_quantity
from gitopsq.errors import Location

FieldPath = tuple[str | int, ...]
LineOf = Callable[[FieldPath], int | None]


def _no_lines(_: FieldPath) -> int | None:
    return None


def render_path(path: FieldPath) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else part)
    return out


class Reader:
    """Reads fields of one object; accumulates `Finding`s in ``self.findings``."""

    def __init__(self, *, file: str | None, doc_line: int | None, obj: str, line_of: LineOf | None = None) -> None:
        self.file = file
        self.doc_line = doc_line
        self.obj = obj
        self.line_of = line_of or _no_lines
        self.findings: list[Finding] = []

    # -- reporting -------------------------------------------------------------------------------------------

    def location(self, path: FieldPath) -> Location | None:
        if self.file is None:
            return None
        # Walk up the path until a line is known: a missing field is reported at its parent.
        probe = path
        while True:
            line = self.line_of(probe)
            if line is not None or not probe:
                break
            probe = probe[:-1]
        return Location(self.file, line if line is not None else self.doc_line)

    def error(self, path: FieldPath, code: str, message: str) -> None:
        self.findings.append(findings.error(code, message, location=self.location(path), obj=self.obj))

    def warn(self, path: FieldPath, code: str, message: str) -> None:
        self.findings.append(findings.warning(code, message, location=self.location(path), obj=self.obj))

    # -- structure -------------------------------------------------------------------------------------------

    def mapping(self, value: Any, path: FieldPath, *, allowed: Iterable[str],
                ignored: Iterable[str] = ()) -> Mapping[str, Any]:
        """Check that ``value`` is a mapping and report every key not in ``allowed`` (``ignored`` are dropped)."""
        if value is None:
            return {}
        if not isinstance(value, Mapping):
            self.error(path, "wrong-type", f"{render_path(path) or 'document'} must be a mapping, "
                       f"got {_type_name(value)}")
            return {}
        allowed_set = set(allowed)
        ignored_set = set(ignored)
        for key in value:
            if not isinstance(key, str):
                self.error(path, "wrong-type", f"key {key!r} in {render_path(path) or 'document'} is not a string")
            elif key not in allowed_set and key not in ignored_set:
                self.error((*path, key), "unknown-field", f"unknown field {render_path((*path, key))!r}"
                           + _did_you_mean(key, allowed_set))
        return value

    def sequence(self, value: Any, path: FieldPath) -> list[Any]:
        if value is None:
            return []
        if not isinstance(value, list):
            self.error(path, "wrong-type", f"{render_path(path)} must be a list, got {_type_name(value)}")
            return []
        return value

    # -- scalars ---------------------------------------------------------------------------------------------

    def string(self, value: Any, path: FieldPath, *, required: bool = False, default: str = "",
               choices: Iterable[str] | None = None) -> str:
        if value is None:
            if required:
                self.error(path, "missing-field", f"{render_path(path)} is required")
            return default
        if not isinstance(value, str):
            self.error(path, "wrong-type", f"{render_path(path)} must be a string, got {_type_name(value)}")
            return default
        if choices is not None:
            options = tuple(choices)
            if value not in options:
                self.error(path, "invalid-value",
                           f"{render_path(path)} must be one of {', '.join(options)}, got {value!r}")
                return default
        return value

    def optional_string(self, value: Any, path: FieldPath) -> str | None:
        if value is None:
            return None
        return self.string(value, path) or None

    def integer(self, value: Any, path: FieldPath, *, required: bool = False, default: int | None = None,
                minimum: int | None = None, maximum: int | None = None) -> int | None:
        if value is None:
            if required:
                self.error(path, "missing-field", f"{render_path(path)} is required")
            return default
        if isinstance(value, bool) or not isinstance(value, int):
            self.error(path, "wrong-type", f"{render_path(path)} must be an integer, got {_type_name(value)}")
            return default
        if minimum is not None and value < minimum:
            self.error(path, "invalid-value", f"{render_path(path)} must be at least {minimum}, got {value}")
            return default
        if maximum is not None and value > maximum:
            self.error(path, "invalid-value", f"{render_path(path)} must be at most {maximum}, got {value}")
            return default
        return value

    def boolean(self, value: Any, path: FieldPath, *, default: bool) -> bool:
        if value is None:
            return default
        if not isinstance(value, bool):
            self.error(path, "wrong-type", f"{render_path(path)} must be true or false, got {_type_name(value)}")
            return default
        return value

    def quantity(self, value: Any, path: FieldPath, *, required: bool = False) -> Quantity | None:
        if value is None:
            if required:
                self.error(path, "missing-field", f"{render_path(path)} is required")
            return None
        try:
            return parse_quantity(value)
        except QuantityError as err:
            self.error(path, "invalid-quantity", f"{render_path(path)}: invalid quantity {value!r}: {err.reason}")
            return None

    def string_map(self, value: Any, path: FieldPath) -> FrozenMap[str, str]:
        raw = self.mapping(value, path, allowed=value.keys() if isinstance(value, Mapping) else ())
        out: dict[str, str] = {}
        for key, item in raw.items():
            if isinstance(item, bool) or item is None or isinstance(item, (Mapping, list)):
                self.error((*path, key), "wrong-type", f"{render_path((*path, key))} must be a string")
                continue
            out[str(key)] = str(item)
        return FrozenMap(out)

    def string_list(self, value: Any, path: FieldPath) -> tuple[str, ...]:
        out = []
        for i, item in enumerate(self.sequence(value, path)):
            if not isinstance(item, str):
                self.error((*path, i), "wrong-type", f"{render_path((*path, i))} must be a string")
                continue
            out.append(item)
        return tuple(out)


def as_mapping(value: Any) -> Mapping[str, Any]:
    """``value`` if it is a mapping, else an empty one (for lenient reads of pass-through structures)."""
    return value if isinstance(value, Mapping) else {}


def as_list(value: Any) -> list[Any]:
    """``value`` if it is a list, else an empty one."""
    return value if isinstance(value, list) else []


def _type_name(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, Mapping):
        return "a mapping"
    return type(value).__name__


def _did_you_mean(key: str, allowed: set[str]) -> str:
    lowered = key.lower()
    for candidate in sorted(allowed):
        if candidate.lower() == lowered or _edit_distance(candidate.lower(), lowered) <= 2:
            return f" (did you mean {candidate!r}?)"
    return ""


def _edit_distance(a: str, b: str) -> int:
    if abs(len(a) - len(b)) > 2:
        return 3
    previous = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        current = [i]
        for j, cb in enumerate(b, 1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (ca != cb)))
        previous = current
    return previous[-1]
