"""Kubernetes resource quantities as canonical integers.

A quantity is parsed once into an integer count of *milli-units* (1 cpu = 1000, 1 byte of memory = 1000), the
resolution Kueue computes quota in, and printed back in Kubernetes' canonical form. Precision below one
milli-unit is rounded up, as Kubernetes does for ``MilliValue``. Values beyond the signed 64-bit range of
milli-units are rejected, as the API server would overflow on them.

The parser is our own (the pure core must not import the Kubernetes client). What it accepts is exactly what
both the API server (the ClusterQueue CRD's pattern and maxLength, nothing trimmed) and Kueue (which decodes
with ``resource.ParseQuantity``) accept; `kubernetes_value` mirrors ``ParseQuantity``'s scanner and value.
Tests check it against the Python client and, on the rig, against the API server's own dry-run and CEL
``quantity()`` (tests/fuzz/test_quantity_apiserver.py).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from decimal import Decimal, localcontext
from enum import Enum

from gitopsq.errors import QuantityError as QuantityError  # noqa: PLC0414 - re-exported: raised here

# Kubernetes keeps whole units in a signed 64-bit integer (`Value()`); we keep milli-units of that range.
MAX_MILLI = (2**63 - 1) * 1000

_BINARY = {"Ki": 1, "Mi": 2, "Gi": 3, "Ti": 4, "Pi": 5, "Ei": 6}
_DECIMAL = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_DECIMAL_SUFFIX_BY_EXP = {v: k for k, v in _DECIMAL.items()}
_BINARY_SUFFIX_BY_POW = {v: k for k, v in _BINARY.items()}

_PATTERN = re.compile(
    r"^(?P<sign>[+-]?)(?P<num>[0-9]+(?:\.[0-9]*)?|\.[0-9]+)"
    r"(?:(?P<bin>Ki|Mi|Gi|Ti|Pi|Ei)|(?P<exp>[eE][+-]?[0-9]+)|(?P<dec>[numkMGTPE]?))$"
)


class QuantityFormat(Enum):
    """How a quantity was written, which decides how it prints back (Kubernetes keeps the format)."""

    DECIMAL_SI = "DecimalSI"
    BINARY_SI = "BinarySI"
    DECIMAL_EXPONENT = "DecimalExponent"


@dataclass(frozen=True, slots=True, eq=False)
class Quantity:
    """A quantity in milli-units. Ordering and equality compare the amount only."""

    milli: int
    fmt: QuantityFormat = QuantityFormat.DECIMAL_SI

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Quantity) and self.milli == other.milli

    def __hash__(self) -> int:
        return hash(self.milli)

    def __lt__(self, other: Quantity) -> bool:
        return self.milli < other.milli

    def __le__(self, other: Quantity) -> bool:
        return self.milli <= other.milli

    def __gt__(self, other: Quantity) -> bool:
        return self.milli > other.milli

    def __ge__(self, other: Quantity) -> bool:
        return self.milli >= other.milli

    @property
    def value(self) -> int:
        """Whole units, rounded up (Kubernetes ``Value()``)."""
        return -((-self.milli) // 1000)

    def __add__(self, other: Quantity) -> Quantity:
        return Quantity(self.milli + other.milli, self.fmt)

    def __sub__(self, other: Quantity) -> Quantity:
        return Quantity(self.milli - other.milli, self.fmt)

    def __str__(self) -> str:
        return format_milli(self.milli, self.fmt)

    def __repr__(self) -> str:
        return f"Quantity({format_milli(self.milli, self.fmt)!r})"


ZERO = Quantity(0)


# The ClusterQueue CRD's schema for a quantity written as text (an int-or-string field); Go's `$` is the end of
# the text, so fullmatch — a trailing newline or space is refused, as the API server refuses it.
_CRD_PATTERN = re.compile(r"(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|"
                          r"([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?")
CRD_MAX_LENGTH = 32
_INT64 = 2**63
_NANO = Decimal("1e-9")
_SUFFIX_CHARS = frozenset("eEinumkKMGTP")
_EXPONENT = re.compile(r"[+-]?[0-9]+")


def kubernetes_value(text: str) -> tuple[Decimal, QuantityFormat] | None:
    """The exact value and format Kubernetes' ``resource.ParseQuantity`` gives ``text``, or None where it fails.

    Mirrors that scanner's quirks: a lone sign or point is zero, ``1.`` is 1, the exponent is read as 64 bits
    and kept in 32 (it wraps), non-zero values are rounded away from zero to a nano-unit, and BinarySI values
    are capped at 2^63-1.
    """
    if not text:
        return None
    end = len(text)
    pos = 1 if text[0] in "+-" else 0
    negative = text[0] == "-"
    while pos < end and text[pos] == "0":
        pos += 1
    if pos >= end:
        return Decimal(0), QuantityFormat.DECIMAL_SI
    num_start = pos
    while pos < end and text[pos].isascii() and text[pos].isdigit():
        pos += 1
    num = text[num_start:pos] or "0"
    denom = ""
    if pos < end and text[pos] == ".":
        pos += 1
        denom_start = pos
        while pos < end and text[pos].isascii() and text[pos].isdigit():
            pos += 1
        denom = text[denom_start:pos]
    suffix = text[pos:]
    if suffix:
        letters = 0
        while letters < len(suffix) and suffix[letters] in _SUFFIX_CHARS:
            letters += 1
        rest = suffix[letters:]
        if rest[:1] in ("+", "-"):
            rest = rest[1:]
        if rest and not (rest.isascii() and rest.isdigit()):
            return None
    if suffix in _BINARY:
        fmt, base, exponent = QuantityFormat.BINARY_SI, 2, 10 * _BINARY[suffix]
    elif suffix in _DECIMAL:
        fmt, base, exponent = QuantityFormat.DECIMAL_SI, 10, _DECIMAL[suffix]
    elif len(suffix) > 1 and suffix[0] in "eE" and _EXPONENT.fullmatch(suffix[1:]):
        wide = int(suffix[1:])
        if not -_INT64 <= wide < _INT64:
            return None
        fmt, base = QuantityFormat.DECIMAL_EXPONENT, 10
        exponent = (wide + 2**31) % 2**32 - 2**31  # Go keeps it in an int32
    else:
        return None
    if base == 10:
        slow = len(num) + len(denom) > 18 or exponent - len(denom) < -9
    else:
        slow = bool(denom) or 15 - len(num) - exponent * 3 // 10 - 1 < 0
    if slow and not any(c.isdigit() for c in text[:len(text) - len(suffix)]):
        return None  # Kubernetes' slow path re-reads the written number, which then needs a digit
    with localcontext() as ctx:
        ctx.prec, ctx.Emax, ctx.Emin = 100, 10**15, -(10**15)
        amount = Decimal(f"{num}.{denom or '0'}")
        amount = amount * (Decimal(2) ** exponent) if base == 2 else amount.scaleb(exponent)
        if amount and amount.adjusted() < 60 and amount.as_tuple().exponent < -9:  # type: ignore[operator]
            amount = amount.quantize(_NANO, rounding="ROUND_UP")
        if fmt is QuantityFormat.BINARY_SI and amount > _INT64 - 1:
            amount = Decimal(_INT64 - 1)
        if fmt is QuantityFormat.BINARY_SI and 0 < amount < 1:
            fmt = QuantityFormat.DECIMAL_SI
        return (-amount if negative else amount), fmt  # inside the wide context: 1e2147483647 is a value


def parse_quantity(text: object) -> Quantity:
    """Parse a quantity as the API server and Kueue read it; raise `QuantityError` with a precise reason.

    Text must match the CRD's pattern and length and be a Kubernetes quantity (nothing is trimmed: ``"5 "`` is
    refused, as the API server refuses it). A YAML number is sent as a JSON number: an integer (or a float with
    no fraction, which JSON prints as one) is accepted; a fraction is refused, as an int-or-string field refuses it.
    """
    if isinstance(text, bool):
        raise QuantityError(str(text), "expected a number or a quantity string, got a boolean")
    if isinstance(text, float):
        if math.isnan(text) or math.isinf(text):
            raise QuantityError(str(text), "not a finite number")
        if not text.is_integer() or abs(text) >= _INT64:
            raise QuantityError(repr(text), "a number with a fraction (or beyond 64 bits) is sent to the API "
                                "server as a JSON number, which a quantity field refuses; quote it, e.g. \"1.5\"")
        text = int(text)
    if isinstance(text, int):
        if not -_INT64 <= text < _INT64:
            raise QuantityError(str(text), "too large (the value would not fit in 64 bits)")
        raw = str(text)
    elif isinstance(text, str):
        raw = text
        if not raw:
            raise QuantityError(text, "empty quantity")
        if len(raw) > CRD_MAX_LENGTH:
            raise QuantityError(text, f"longer than {CRD_MAX_LENGTH} characters (the API server refuses it)")
        if not _CRD_PATTERN.fullmatch(raw):
            raise QuantityError(raw, _explain(raw))
    else:
        raise QuantityError(str(text), f"expected a quantity string, got {type(text).__name__}")
    parsed = kubernetes_value(raw)
    if parsed is None:
        raise QuantityError(raw, "not a Kubernetes quantity (an exponent must be a whole number, e.g. 1e3)")
    amount, fmt = parsed
    if amount and amount.adjusted() > 21:
        raise QuantityError(raw, "too large (the value would not fit in 64 bits)")
    with localcontext() as ctx:
        ctx.prec = 100
        magnitude = int((abs(amount) * 1000).to_integral_value(rounding="ROUND_CEILING"))
    milli = -magnitude if amount < 0 else magnitude
    if magnitude > MAX_MILLI:
        raise QuantityError(raw, "too large (the value would not fit in 64 bits)")
    return Quantity(milli, fmt)


def _explain(raw: str) -> str:
    if raw != raw.strip() or any(c.isspace() for c in raw):
        return "white space is not allowed in a quantity (the API server refuses it)"
    if raw.count(".") > 1:
        return "more than one decimal point"
    if re.search(r"[0-9][eE]$", raw):
        return "exponent without digits"
    if ":" in raw:
        return "not a number (the API server's YAML has no sexagesimal numbers such as 1:30)"
    suffix = re.sub(r"^[+-]?[0-9.]+", "", raw)
    if suffix and suffix != raw:
        return f"unknown suffix {suffix!r} (use Ki, Mi, Gi, Ti, Pi, Ei, n, u, m, k, M, G, T, P, E or e<exp>)"
    return "expected a number with an optional suffix, such as 500m, 2, 4Gi or 1e3"


def format_milli(milli: int, fmt: QuantityFormat = QuantityFormat.DECIMAL_SI) -> str:
    """Print milli-units in Kubernetes' canonical form for the given format."""
    if milli == 0:
        return "0"
    sign = "-" if milli < 0 else ""
    magnitude = abs(milli)
    if fmt is QuantityFormat.BINARY_SI and magnitude % 1000 == 0:
        units = magnitude // 1000
        if units >= 1024:
            power = 0
            while power < 6 and units % 1024 == 0 and units >= 1024:
                units //= 1024
                power += 1
            if power:
                return f"{sign}{units}{_BINARY_SUFFIX_BY_POW[power]}"
        return f"{sign}{magnitude // 1000}"
    # Decimal: find the largest exponent (a multiple of 3, from -3) that keeps the mantissa integral.
    exponent = -3
    mantissa = magnitude
    while exponent < 18 and mantissa % 1000 == 0:
        mantissa //= 1000
        exponent += 3
    if fmt is QuantityFormat.DECIMAL_EXPONENT:
        return f"{sign}{mantissa}" if exponent == 0 else f"{sign}{mantissa}e{exponent}"
    return f"{sign}{mantissa}{_DECIMAL_SUFFIX_BY_EXP[exponent]}"


def quantity(text: str | int) -> Quantity:
    """Short constructor for tests and literals; raises `QuantityError` like `parse_quantity`."""
    return parse_quantity(text)
