"""Plain YAML scalars → values, by the rules the Kubernetes API server's YAML reader applies.

kubectl and the API server turn YAML into JSON with sigs.k8s.io/yaml, which resolves plain scalars by go-yaml
v2's rules, not PyYAML's YAML 1.1 rules. The differences that change what a manifest means:

* no sexagesimal numbers: ``1:30`` is the text "1:30" (PyYAML reads 90);
* integers are Go literals: ``0x10`` = 16, ``0o7`` = 7, ``0b101`` = 5, ``010`` = 8 (octal), ``+5`` = 5, and
  underscores are dropped anywhere (``1_000`` = 1000); ``08`` is not an octal integer but reads as the float 8;
* an integer beyond 64 bits is held as a float, as the API server's JSON decoder holds it;
* ``y``/``Y``/``n``/``N`` are booleans as well as yes/no/on/off/true/false (three spellings each);
* floats need a digit on each side of an exponent sign (``1e3``, ``.5``, ``+.5``); ``1e999`` is text;
* an explicit tag must agree with the value: ``!!null "0"``, ``!!bool maybe``, ``!!int ""`` are errors (only
  ``!!str`` re-types anything, and ``!!float`` accepts an integer).

`resolve_plain` is pure and total: it never raises.
"""

from __future__ import annotations

import math
import re
from typing import Any, Final

STR, NULL, BOOL = "tag:yaml.org,2002:str", "tag:yaml.org,2002:null", "tag:yaml.org,2002:bool"
INT, FLOAT, MERGE = "tag:yaml.org,2002:int", "tag:yaml.org,2002:float", "tag:yaml.org,2002:merge"
TIMESTAMP, BINARY = "tag:yaml.org,2002:timestamp", "tag:yaml.org,2002:binary"

_WORDS: Final[dict[str, tuple[str, Any]]] = {
    **dict.fromkeys(("y", "Y", "yes", "Yes", "YES", "true", "True", "TRUE", "on", "On", "ON"), (BOOL, True)),
    **dict.fromkeys(("n", "N", "no", "No", "NO", "false", "False", "FALSE", "off", "Off", "OFF"), (BOOL, False)),
    **dict.fromkeys(("", "~", "null", "Null", "NULL"), (NULL, None)),
    **dict.fromkeys((".nan", ".NaN", ".NAN"), (FLOAT, math.nan)),
    **dict.fromkeys((".inf", ".Inf", ".INF", "+.inf", "+.Inf", "+.INF"), (FLOAT, math.inf)),
    **dict.fromkeys(("-.inf", "-.Inf", "-.INF"), (FLOAT, -math.inf)),
    "<<": (MERGE, "<<"),
}
_NUMERIC_START: Final = frozenset("0123456789+-")
# Go's strconv.ParseInt(s, 0, 64) syntax (after underscores are removed): sign, then a prefixed or plain literal.
_GO_INT: Final = re.compile(r"([+-]?)(0[xX][0-9a-fA-F]+|0[oO][0-7]+|0[bB][01]+|0[0-7]*|[1-9][0-9]*)")
_GO_YAML_FLOAT: Final = re.compile(r"[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?")
_DOT_FLOAT: Final = re.compile(r"\.[0-9]+([eE][-+]?[0-9]+)?")
_INT64: Final = 2**63
_UINT64_MAX: Final = 2**64 - 1
# go-yaml v2's timestamp layouts (a plain timestamp stays text; an explicit !!timestamp must look like one).
TIMESTAMP_TEXT: Final = re.compile(
    r"[0-9]{4}-[0-9]{1,2}-[0-9]{1,2}(?:[Tt ][0-9]{1,2}:[0-9]{1,2}:[0-9]{1,2}(?:\.[0-9]{1,9})?"
    r"(?:Z|[+-][0-9]{2}:[0-9]{2})?)?")


def _go_float(text: str) -> float | None:
    value = float(text)
    return None if math.isinf(value) else value  # Go reports a range error, and the scalar stays text


def _go_int(plain: str) -> int | None:
    match = _GO_INT.fullmatch(plain)
    if match is None:
        return None
    sign, body = match.groups()
    if len(body) > 1 and body[0] == "0":
        base = {"x": 16, "o": 8, "b": 2}.get(body[1].lower(), 8)
        digits = body[2:] if base != 8 or body[1] in "oO" else body[1:]
        value = int(digits, base)
    else:
        value = int(body)
    if sign == "-":
        value = -value
    if -_INT64 <= value < _INT64:
        return value
    if sign == "" and value <= _UINT64_MAX:
        return value  # Go falls back to ParseUint, which takes no sign
    return None


def resolve_plain(text: str) -> tuple[str, Any]:
    """The tag and value go-yaml v2 gives an untagged plain scalar."""
    word = _WORDS.get(text)
    if word is not None:
        return word
    first = text[:1]
    if first == ".":
        if _DOT_FLOAT.fullmatch(text):
            value = _go_float(text)
            if value is not None:
                return FLOAT, value
        return STR, text
    if first not in _NUMERIC_START:
        return STR, text
    plain = text.replace("_", "")
    integer = _go_int(plain)
    if integer is not None:
        if -_INT64 <= integer < _INT64:
            return INT, integer
        return FLOAT, float(integer)  # the API server's JSON decoder holds an integer beyond int64 as a float64
    if _GO_YAML_FLOAT.fullmatch(plain):
        value = _go_float(plain)
        if value is not None:
            return FLOAT, value
    return STR, text


def explicit(tag: str, text: str) -> tuple[bool, Any]:
    """(True, value) when a scalar written with an explicit ``tag`` is read as go-yaml v2 reads it, else
    (False, reason)."""
    if tag == STR:
        return True, text
    if tag == TIMESTAMP:
        return (True, text) if TIMESTAMP_TEXT.fullmatch(text) else (False, "not a timestamp")
    resolved, value = resolve_plain(text)
    if resolved == tag:
        return True, value
    if tag == FLOAT and resolved == INT:
        return True, float(value)
    short = resolved.rsplit(":", 1)[-1]
    return False, f"it reads as {'text' if short == 'str' else short}"
