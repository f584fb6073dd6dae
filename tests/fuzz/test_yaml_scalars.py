"""Plain and tagged YAML scalars read as the API server's YAML reader (go-yaml v2 via sigs.k8s.io/yaml) reads
them; the table was confirmed against kubectl and the API server on the rig (test_apiserver_differential.py)."""

from __future__ import annotations

import math

import pytest

from gitopsq.manifests.yamldoc import load_yaml


@pytest.mark.parametrize(("scalar", "value"), [
    ("1:30", "1:30"), ("190:20:30", "190:20:30"), ("0x10", 16), ("0X1f", 31), ("0o7", 7), ("0O17", 15),
    ("0b101", 5), ("-0b11", -3), ("010", 8), ("08", 8.0), ("09.5", 9.5), ("+5", 5), ("-5", -5), (".5", 0.5),
    ("+.5", 0.5), ("5.", 5.0), ("1_000", 1000), ("0x_1", 1), ("1e3", 1000.0), ("1E3", 1000.0), ("1e999", "1e999"),
    ("yes", True), ("On", True), ("OFF", False), ("y", True), ("N", False), ("tRue", "tRue"), ("~", None),
    ("NULL", None), ("2001-12-14", "2001-12-14"), ("9223372036854775807", 9223372036854775807),
    ("9223372036854775808", 9.223372036854775808e18), ("0x", "0x"), ("0b2", "0b2"), ("12e", "12e"),
    ("1Ki", "1Ki"), ("500m", "500m"), ("inf", "inf"), ("nan", "nan"), (".", "."), ("+", "+"),
], ids=repr)
def test_plain_scalars_follow_go_yaml_v2(scalar: str, value: object) -> None:
    """No sexagesimal numbers, Go integer literals with underscores dropped, y/n booleans, go-yaml's float
    syntax, and integers beyond int64 held as floats, as the API server holds them."""
    (doc,) = load_yaml("f.yaml", f"v: {scalar}\n".encode()).documents
    got = doc.data["v"]
    assert got == value and type(got) is type(value)


@pytest.mark.parametrize(("scalar", "code"), [
    ('!!null "0"', "yaml-bad-value"), ("!!bool maybe", "yaml-bad-value"), ('!!int ""', "yaml-bad-value"),
    ('!!float ""', "yaml-bad-value"), ("!!timestamp x", "yaml-bad-value"), ("!!binary '!!'", "yaml-bad-value"),
    (".nan", "yaml-bad-value"), ("-.inf", "yaml-bad-value"), ("!!set {a: 1}", "yaml-unsupported-tag"),
    ("!env X", "yaml-unsupported-tag"),
], ids=repr)
def test_values_kubectl_refuses_are_findings_with_a_line(scalar: str, code: str) -> None:
    """An explicit tag that disagrees with its value, a non-finite float or an unknown tag is one finding on its
    line, never a crash and never a silently changed value."""
    loaded = load_yaml("f.yaml", f"a: 1\nv: {scalar}\n".encode())
    assert not loaded.documents
    assert [(f.code, f.location.line if f.location else None) for f in loaded.findings] == [(code, 2)]


@pytest.mark.parametrize(("scalar", "value"), [
    ("!!float 5", 5.0), ("!!str 5", "5"), ("!!int 0x10", 16), ("!!bool yes", True), ('!!null ""', None),
    ("!!binary aGk=", "hi"), ("!!timestamp 2001-12-14", "2001-12-14"),
], ids=repr)
def test_explicit_tags_that_agree_are_read(scalar: str, value: object) -> None:
    """A tag that agrees with its value (or !!str, or !!float on an integer) gives the value kubectl sends."""
    (doc,) = load_yaml("f.yaml", f"v: {scalar}\n".encode()).documents
    assert doc.data["v"] == value and not (isinstance(value, float) and math.isnan(value))


def test_boolean_and_integer_keys_become_text() -> None:
    """sigs.k8s.io/yaml prints non-text keys as JSON object keys: `on:` is "true", `1:` is "1"."""
    (doc,) = load_yaml("f.yaml", b"on: a\n1: b\n").documents
    assert doc.data == {"true": "a", "1": "b"}
