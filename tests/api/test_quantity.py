"""Quantities: the pure parser agrees with the Kubernetes client's and prints Kubernetes' canonical form."""

from __future__ import annotations

from decimal import ROUND_CEILING, ROUND_FLOOR, Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st
from kubernetes.utils.quantity import parse_quantity as client_parse

from gitopsq.api.quantity import MAX_MILLI, Quantity, QuantityError, kubernetes_value, parse_quantity

VALID = ["0", "1", "-1", "+1", "1.5", "0.5", ".5", "5.", "500m", "1500m", "1.0001m", "1n", "999n", "1u", "1k",
         "1M", "1G", "1T", "1P", "1E", "1Ki", "1Mi", "1.5Gi", ".5Gi", "2Ti", "1Pi", "1Ei", "1e3", "1E3", "1e-3",
         "1.5e2", "12e0", "100Mi", "0.1m", "123456789", "9223372036854775807", "-0", "-0.001m", "-1.5u"]
INVALID = ["1.5.3", "", "abc", "1Kb", "1e", "Gi", "1i", "--1", "1..5", "1.5m3", "0x10", "1,5"]


def client_milli(text: str) -> int:
    """The client's value in milli-units, rounded away from zero below one milli-unit (as Go's RoundUp does;
    the Python client has no rounding of its own, so we apply Go's rule to its exact decimal)."""
    exact = client_parse(text) * 1000
    return int(exact.to_integral_value(ROUND_CEILING if exact >= 0 else ROUND_FLOOR))


@pytest.mark.parametrize("text", VALID)
def test_valid_quantities_agree_with_the_kubernetes_client(text: str) -> None:
    """For every valid form (suffixes, exponents, fractions, signs) both parsers give the same milli-units."""
    assert parse_quantity(text).milli == client_milli(text)


@pytest.mark.parametrize("text", INVALID)
def test_invalid_quantities_are_rejected_by_both(text: str) -> None:
    """Malformed quantities are refused by our parser, with a reason, and by the client."""
    with pytest.raises(QuantityError) as err:
        parse_quantity(text)
    assert err.value.reason
    with pytest.raises(ValueError):
        client_parse(text)


@pytest.mark.parametrize(("text", "reason"), [
    ("1 Gi", "white space"),
    ("1e400", "too large"),
    ("9223372036854776000", "too large"),
], ids=["inner-space", "huge-exponent", "beyond-int64"])
def test_documented_divergences_from_the_client(text: str, reason: str) -> None:
    """The client is lenient where the API server is not (spaces) or has no bound; we refuse, as docs/check.md says."""
    client_parse(text)  # the Python client accepts these
    with pytest.raises(QuantityError, match=reason):
        parse_quantity(text)


@given(mantissa=st.integers(min_value=0, max_value=10**9), fraction=st.integers(min_value=0, max_value=999),
       suffix=st.sampled_from(["", "m", "k", "M", "G", "Ki", "Mi", "Gi", "Ti", "e3", "e-2", "u", "n"]),
       negative=st.booleans())
def test_generated_quantities_agree_with_the_client(mantissa: int, fraction: int, suffix: str,
                                                    negative: bool) -> None:
    """Random well-formed quantities parse to the same milli-units as the Kubernetes client."""
    text = f"{'-' if negative else ''}{mantissa}.{fraction:03d}{suffix}"
    expected = client_milli(text)
    if abs(expected) > MAX_MILLI and suffix.endswith("i"):
        assert abs(parse_quantity(text).milli) == MAX_MILLI  # Kubernetes caps BinarySI at 2^63-1; the client does not
    elif abs(expected) > MAX_MILLI:
        with pytest.raises(QuantityError):
            parse_quantity(text)
    else:
        assert parse_quantity(text).milli == expected


@pytest.mark.parametrize(("text", "canonical"), [
    ("1500m", "1500m"), ("1.5", "1500m"), ("0.1", "100m"), ("1000m", "1"), ("1000", "1k"), ("1500", "1500"),
    ("1500000", "1500k"), ("1Gi", "1Gi"), ("1024Mi", "1Gi"), ("1.5Gi", "1536Mi"), ("0.5Gi", "512Mi"),
    ("2048Ki", "2Mi"), ("0.5Ki", "512"), ("128974848", "128974848"), ("129e6", "129e6"), ("129M", "129M"),
    ("1e3", "1e3"), ("-1.5", "-1500m"), ("0", "0"), ("-0", "0"), ("1u", "1m"),
], ids=str)
def test_canonical_printing(text: str, canonical: str) -> None:
    """Quantities print back as Kubernetes prints them: format kept, largest exact suffix, milli resolution."""
    assert str(parse_quantity(text)) == canonical
    assert parse_quantity(canonical) == parse_quantity(text)


@pytest.mark.parametrize("value", [0, 7, -3, 1000.0, 2.0], ids=repr)
def test_yaml_numbers_are_quantities(value: float) -> None:
    """Unquoted YAML integers (and floats with no fraction, which JSON prints as integers) read like their text."""
    assert parse_quantity(value) == parse_quantity(str(int(value)))


@pytest.mark.parametrize("value", [1.5, 0.25, 1e19], ids=repr)
def test_yaml_numbers_with_a_fraction_are_refused(value: float) -> None:
    """A fractional YAML number reaches the API server as a JSON number, which an int-or-string field refuses."""
    with pytest.raises(QuantityError, match="quote it"):
        parse_quantity(value)


@pytest.mark.parametrize("text", ["5 ", "5\n", " 5", "5\u00a0", "1:30", "0x10", "1" * 33, "1e1.5", "+", ".", "1 Gi"],
                         ids=repr)
def test_text_the_api_server_refuses_is_refused(text: str) -> None:
    """Nothing is trimmed, sexagesimal and hex are not quantities, the CRD's 32-character limit holds, and an
    exponent with a fraction (the CRD's pattern allows it, Kubernetes' parser does not) is refused."""
    with pytest.raises(QuantityError):
        parse_quantity(text)


@pytest.mark.parametrize(("text", "value"), [
    ("+", "0"), (".", "0"), ("-", "0"), ("1.", "1"), ("1e4294967296", "1"), ("1e-10", "0.000000001"),
    ("-1e-10", "-0.000000001"), ("9Ei", str(2**63 - 1)), ("0.5Ki", "512"), ("007", "7"), ("1E3", "1000"),
], ids=repr)
def test_kubernetes_value_mirrors_parse_quantity(text: str, value: str) -> None:
    """`kubernetes_value` keeps ParseQuantity's quirks: lone sign or point is zero, the exponent wraps at 32 bits,
    values round away from zero to a nano-unit, BinarySI caps at 2^63-1."""
    parsed = kubernetes_value(text)
    assert parsed is not None and parsed[0] == Decimal(value)


@pytest.mark.parametrize("text", ["", "1e", "1K", "1ee5", "1e1.5", "1.5.5", "1Gi1", "1e99999999999999999999"],
                         ids=repr)
def test_kubernetes_value_refuses_what_parse_quantity_refuses(text: str) -> None:
    """Where ParseQuantity returns an error, `kubernetes_value` returns None."""
    assert kubernetes_value(text) is None


@pytest.mark.parametrize("value", [True, None, float("inf"), float("nan"), [1]], ids=repr)
def test_non_quantities_are_refused(value: object) -> None:
    """Booleans, nulls, infinities and lists are not quantities."""
    with pytest.raises(QuantityError):
        parse_quantity(value)


def test_arithmetic_and_ordering_compare_amounts() -> None:
    """Equality and order ignore the written format; sums keep milli-unit precision."""
    assert parse_quantity("1Gi") == parse_quantity("1073741824")
    assert parse_quantity("500m") < parse_quantity("1") <= parse_quantity("1000m")
    assert parse_quantity("1.5") + parse_quantity("500m") == Quantity(2000)
    assert parse_quantity("1") - parse_quantity("1500m") == Quantity(-500)
    assert parse_quantity("1.2").value == 2 and parse_quantity("-1.2").value == -1
    assert {parse_quantity("1k"), parse_quantity("1000")} == {Quantity(1_000_000)}
    assert Decimal(parse_quantity("2Ki").milli) == Decimal(2048000)
