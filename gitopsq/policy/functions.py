"""Kubernetes CEL library functions, written once in plain Python and shared by both CEL backends.

Both backends call these same implementations, so quantity maths, list helpers, string helpers and regex
behave identically whichever runtime evaluates a policy. Arguments arrive as plain Python values (the backend
adapters convert); a failure raises `CelFunctionError`, which the adapters turn into a CEL evaluation error.

Quantities follow ``k8s.io/apiserver/pkg/cel/library/quantity.go``. Neither runtime can carry an opaque Python
type (cel-expr-python rejects it), so a quantity value is its canonical decimal string (``quantity('1Gi')`` is
``'1073741824'``; ``quantity('1.5')`` is ``'1500m'``). Equal amounts therefore compare equal whatever suffix they
were written with, and a quantity can be concatenated into a message. Amounts are exact to the milli-unit
(Kueue's resolution); order quantities with ``compareTo``/``isGreaterThan``/``isLessThan``, never ``<``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import re2  # RE2 syntax, as Kubernetes' regex library uses

from gitopsq.api.quantity import QuantityError, QuantityFormat, format_milli, parse_quantity

INT64_MAX = 2**63 - 1
INT64_MIN = -(2**63)


class CelFunctionError(ValueError):
    """A library function was called with arguments it cannot handle (becomes a CEL evaluation error)."""


# --- quantities ---------------------------------------------------------------------------------------------

def _milli(text: object) -> int:
    if not isinstance(text, str):
        raise CelFunctionError(f"expected a quantity, got {type(text).__name__}")
    try:
        return parse_quantity(text).milli
    except QuantityError as err:
        raise CelFunctionError(str(err)) from err


def _canonical(milli: int) -> str:
    return format_milli(milli, QuantityFormat.DECIMAL_SI)


def quantity(text: str) -> str:
    """``quantity(string)``: parse and return the canonical form; invalid text is an evaluation error."""
    return _canonical(_milli(text))


def is_quantity(text: str) -> bool:
    """``isQuantity(string)``: whether ``quantity()`` would accept the text."""
    try:
        _milli(text)
    except CelFunctionError:
        return False
    return True


def compare_to(left: str, right: str) -> int:
    a, b = _milli(left), _milli(right)
    return (a > b) - (a < b)


def is_greater_than(left: str, right: str) -> bool:
    return _milli(left) > _milli(right)


def is_less_than(left: str, right: str) -> bool:
    return _milli(left) < _milli(right)


def _operand(value: object) -> int:
    # Kubernetes accepts a quantity or an int (whole units) as the argument of add/sub.
    if isinstance(value, bool):
        raise CelFunctionError("expected a quantity or an int, got bool")
    if isinstance(value, int):
        return value * 1000
    return _milli(value)


def add(left: str, right: str | int) -> str:
    return _canonical(_milli(left) + _operand(right))


def sub(left: str, right: str | int) -> str:
    return _canonical(_milli(left) - _operand(right))


def is_integer(text: str) -> bool:
    milli = _milli(text)
    return milli % 1000 == 0 and INT64_MIN <= milli // 1000 <= INT64_MAX


def as_integer(text: str) -> int:
    milli = _milli(text)
    if milli % 1000 != 0 or not INT64_MIN <= milli // 1000 <= INT64_MAX:
        raise CelFunctionError(f"cannot convert value to integer: {_canonical(milli)}")
    return milli // 1000


def as_approximate_float(text: str) -> float:
    return _milli(text) / 1000


def sign(text: str) -> int:
    milli = _milli(text)
    return (milli > 0) - (milli < 0)


# --- lists (Kubernetes' lists library) ----------------------------------------------------------------------

def _numeric(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def list_sum(items: Sequence[Any]) -> Any:
    """Sum of ints or doubles (0 for an empty list); quantities (with ints as whole units) sum to a quantity."""
    if not items:
        return 0
    if any(isinstance(v, str) for v in items):
        # gitopsq extension: quantities (ints count as whole units, so an empty inner sum of 0 mixes in)
        return _canonical(sum(_operand(v) for v in items))
    if not all(_numeric(v) for v in items):
        raise CelFunctionError("sum() needs a list of numbers or of quantities")
    if all(isinstance(v, int) for v in items):
        total = sum(int(v) for v in items)
        if not INT64_MIN <= total <= INT64_MAX:
            raise CelFunctionError("integer overflow")
        return total
    return float(sum(items))


def _comparable(items: Sequence[Any], name: str) -> None:
    if not items:
        raise CelFunctionError(f"{name}() called on an empty list")
    numbers = all(_numeric(v) for v in items)
    same = len({type(v) for v in items}) == 1 and not isinstance(items[0], dict | list | type(None))
    if not numbers and not same:
        raise CelFunctionError(f"{name}() needs a list of comparable values of one type")


def list_min(items: Sequence[Any]) -> Any:
    _comparable(items, "min")
    return min(items)


def list_max(items: Sequence[Any]) -> Any:
    _comparable(items, "max")
    return max(items)


def list_is_sorted(items: Sequence[Any]) -> bool:
    if items:
        _comparable(items, "isSorted")
    return all(items[i] <= items[i + 1] for i in range(len(items) - 1))


def _same(a: object, b: object) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    return a == b


def list_index_of(items: Sequence[Any], value: object) -> int:
    return next((i for i, v in enumerate(items) if _same(v, value)), -1)


def list_last_index_of(items: Sequence[Any], value: object) -> int:
    return next((i for i in range(len(items) - 1, -1, -1) if _same(items[i], value)), -1)


# --- strings (cel-go strings extension, as Kubernetes enables it) -------------------------------------------

def lower_ascii(text: str) -> str:
    return "".join(c.lower() if c.isascii() else c for c in text)


def upper_ascii(text: str) -> str:
    return "".join(c.upper() if c.isascii() else c for c in text)


def trim(text: str) -> str:
    return text.strip()


def replace(text: str, old: str, new: str, limit: int = -1) -> str:
    return text.replace(old, new, limit if limit >= 0 else -1)


def split(text: str, separator: str, limit: int = -1) -> list[str]:
    if limit == 0:
        return []
    if separator == "":
        chars = list(text)
        if limit > 0 and len(chars) > limit:
            return [*chars[: limit - 1], "".join(chars[limit - 1:])]
        return chars
    return text.split(separator, limit - 1 if limit > 0 else -1)


def join(items: Sequence[Any], separator: str = "") -> str:
    if not all(isinstance(v, str) for v in items):
        raise CelFunctionError("join() needs a list of strings")
    return separator.join(items)


def _check_offset(text: str, offset: int) -> None:
    if offset < 0 or offset > len(text):
        raise CelFunctionError(f"index out of range: {offset}")


def string_index_of(text: str, sub_text: str, offset: int = 0) -> int:
    _check_offset(text, offset)
    return text.find(sub_text, offset)


def string_last_index_of(text: str, sub_text: str, offset: int | None = None) -> int:
    if offset is None:
        return text.rfind(sub_text)
    _check_offset(text, offset)
    return text.rfind(sub_text, 0, offset + len(sub_text))


def substring(text: str, start: int, end: int | None = None) -> str:
    stop = len(text) if end is None else end
    if start < 0 or stop > len(text) or start > stop:
        raise CelFunctionError(f"substring out of range: [{start}:{stop}] of a {len(text)}-character string")
    return text[start:stop]


def char_at(text: str, index: int) -> str:
    _check_offset(text, index)
    return text[index:index + 1]


# --- regex (Kubernetes' regex library, RE2 syntax) ----------------------------------------------------------

_REGEX_CACHE: dict[str, Any] = {}


def _regex(pattern: str) -> Any:
    compiled = _REGEX_CACHE.get(pattern)
    if compiled is None:
        try:
            compiled = re2.compile(pattern)
        except re2.error as err:
            raise CelFunctionError(f"invalid regular expression {pattern!r}: {err}") from err
        if len(_REGEX_CACHE) >= 1024:  # patterns may come from data; keep the cache bounded
            _REGEX_CACHE.clear()
        _REGEX_CACHE[pattern] = compiled
    return compiled


def find(text: str, pattern: str) -> str:
    match = _regex(pattern).search(text)
    return match.group(0) if match else ""


def find_all(text: str, pattern: str, limit: int = -1) -> list[str]:
    if limit == 0:
        return []
    found = [m.group(0) for m in _regex(pattern).finditer(text)]
    return found[:limit] if limit > 0 else found
