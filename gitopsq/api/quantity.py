"""Kubernetes resource quantities as canonical integers.

A quantity is parsed once into an integer count of *milli-units* (1 cpu = 1000, 1 byte of memory = 1000), the
resolution Kueue computes quota in, and printed back in Kubernetes' canonical form. Precision below one
milli-unit is rounded up, as Kubernetes does for ``MilliValue``. Values beyond the signed 64-bit range of
milli-units are rejected, as the API server would overflow on them.

The parser is our own (the pure core must not import the Kubernetes client); its grammar and its canonical
printing follow ``k8s.io/apimachinery/pkg/api/resource``: ``<sign><digits>[.<digits>]<suffix>`` with binary
suffixes Ki…Ei, decimal suffixes n u m k M G T P E, or a decimal exponent ``e<int>``. Tests check it against the
client's own ``parse_quantity``.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation, localcontext
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


def parse_quantity(text: object) -> Quantity:
    """Parse a quantity written as a string or a YAML number; raise `QuantityError` with a precise reason."""
    if isinstance(text, bool):
        raise QuantityError(str(text), "expected a number or a quantity string, got a boolean")
    if isinstance(text, int):
        text = str(text)
    elif isinstance(text, float):
        if math.isnan(text) or math.isinf(text):
            raise QuantityError(str(text), "not a finite number")
        text = repr(text)
    if not isinstance(text, str):
        raise QuantityError(str(text), f"expected a quantity string, got {type(text).__name__}")
    raw = text.strip()
    if not raw:
        raise QuantityError(text, "empty quantity")
    match = _PATTERN.match(raw)
    if match is None:
        raise QuantityError(text, _explain(raw))
    sign = -1 if match["sign"] == "-" else 1
    number = match["num"]
    if len(number) > 64:
        raise QuantityError(text, "too many digits")
    with localcontext() as ctx:
        ctx.prec = 200
        try:
            amount = Decimal(number)
        except InvalidOperation as err:  # pragma: no cover - the regex admits only valid decimals
            raise QuantityError(text, "not a number") from err
        if match["bin"]:
            fmt = QuantityFormat.BINARY_SI
            amount *= Decimal(1024) ** _BINARY[match["bin"]]
        elif match["exp"]:
            fmt = QuantityFormat.DECIMAL_EXPONENT
            exponent = int(match["exp"][1:])
            if abs(exponent) > 40:
                raise QuantityError(text, "exponent out of range (the value would not fit in 64 bits)")
            amount = amount.scaleb(exponent)
        else:
            fmt = QuantityFormat.DECIMAL_SI
            amount = amount.scaleb(_DECIMAL[match["dec"] or ""])
        milli_exact = amount * 1000
        milli = int(milli_exact.to_integral_value(rounding="ROUND_CEILING"))
    if milli > MAX_MILLI:
        raise QuantityError(text, "too large (the value would not fit in 64 bits)")
    return Quantity(sign * milli, fmt)


def _explain(raw: str) -> str:
    if raw.count(".") > 1:
        return "more than one decimal point"
    if re.search(r"[0-9][eE]$", raw):
        return "exponent without digits"
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
