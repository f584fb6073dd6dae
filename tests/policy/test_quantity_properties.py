"""Quantity arithmetic agrees with exact decimal arithmetic, and both backends agree with each other."""

from __future__ import annotations

from decimal import Decimal

from hypothesis import given, settings
from hypothesis import strategies as st

from gitopsq.policy import get_backend

from .helpers import BACKENDS

SUFFIXES = {"": 1, "m": Decimal("0.001"), "k": 1000, "M": 10**6, "G": 10**9, "Ki": 1024, "Mi": 1024**2,
            "Gi": 1024**3}

for _name in BACKENDS:  # create the runtimes up front: cel-python raises the recursion limit when created
    get_backend(_name)

quantities = st.tuples(st.integers(min_value=-10**6, max_value=10**6), st.sampled_from(sorted(SUFFIXES)))


def _text(q: tuple[int, str]) -> str:
    return f"{q[0]}{q[1]}"


def _exact(q: tuple[int, str]) -> Decimal:
    return Decimal(q[0]) * Decimal(SUFFIXES[q[1]])


def _eval(backend: str, expression: str) -> object:
    b = get_backend(backend)
    outcome = b.compile(expression).run(b.activation({}))
    assert outcome.error is None, outcome.error
    return outcome.value


@settings(max_examples=60, deadline=None)
@given(quantities, quantities)
def test_compare_add_and_sub_are_exact_on_both_backends(a: tuple[int, str], b: tuple[int, str]) -> None:
    """compareTo, add and sub of two quantities match exact decimal arithmetic on every backend."""
    left, right = _exact(a), _exact(b)
    expected_order = (left > right) - (left < right)
    total = left + right
    for backend in BACKENDS:
        assert _eval(backend, f"quantity('{_text(a)}').compareTo(quantity('{_text(b)}'))") == expected_order
        summed = f"quantity('{_text(a)}').add(quantity('{_text(b)}'))"
        assert _eval(backend, f"{summed}.compareTo(quantity('{total}'))") == 0
        assert _eval(backend, f"{summed}.sub(quantity('{_text(b)}')) == quantity('{_text(a)}')") is True
        assert _eval(backend, f"{summed}.isInteger()") is (total == total.to_integral_value())
