"""YAML loading: located documents, Kubernetes' reading of scalars, and refusal of hostile or broken files."""

from __future__ import annotations

import time

import pytest

from gitopsq.manifests.yamldoc import DEFAULT_LIMITS, YamlLimits, load_yaml


def codes(data: bytes, limits: YamlLimits = DEFAULT_LIMITS) -> list[str]:
    return [f.code for f in load_yaml("f.yaml", data, limits).findings]


def test_multi_document_file_keeps_lines_and_skips_empty_documents() -> None:
    """Empty and comment-only documents are skipped; each object keeps its first line and every field's line."""
    text = b"---\n# only a comment\n---\n---\napiVersion: v1\nkind: Namespace\nmetadata:\n  name: a\n---\nx: 1\n"
    loaded = load_yaml("f.yaml", text)
    assert not loaded.findings
    assert [(d.index, d.line) for d in loaded.documents] == [(2, 5), (3, 10)]
    first = loaded.documents[0]
    assert first.data == {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "a"}}
    assert first.line_of(("metadata", "name")) == 8
    assert first.line_of(("kind",)) == 6


def test_sequence_items_have_their_own_lines() -> None:
    """An item of a list is located at its own line, so findings point at the offending entry."""
    doc = load_yaml("f.yaml", b"items:\n  - a\n  - b\n  -\n    c: 1\n").documents[0]
    assert [doc.line_of(("items", i)) for i in range(3)] == [2, 3, 5]
    assert doc.line_of(("items", 2, "c")) == 5


@pytest.mark.parametrize(("text", "expected"), [
    (b"v: 10\n", 10), (b"v: '10'\n", "10"), (b"v: 1.5\n", 1.5), (b"v: true\n", True), (b"v: yes\n", True),
    (b"v: ~\n", None), (b"v: 0x10\n", 16), (b"v: 2001-12-14\n", "2001-12-14"), (b"v: 1e3\n", 1000.0),
    (b"v: 500m\n", "500m"), (b"v: !!binary aGk=\n", "hi")
], ids=["int", "quoted-int", "float", "bool", "yaml11-yes", "null", "hex", "timestamp-stays-text",
        "exponent-is-a-float-as-in-go-yaml", "quantity-text", "binary-is-decoded"])
def test_scalars_read_as_kubernetes_reads_them(text: bytes, expected: object) -> None:
    """Scalars resolve as go-yaml v2 does for the API server; timestamps stay strings, binary is decoded."""
    assert load_yaml("f.yaml", text).documents[0].data == {"v": expected}


def test_merge_keys_fill_in_without_overriding() -> None:
    """`<<: *anchor` brings in the anchor's keys; keys written in the mapping win, with their own lines."""
    doc = load_yaml("f.yaml", b"base: &b {p: 1, q: 2}\nchild:\n  <<: *b\n  q: 3\n").documents[0]
    assert doc.data["child"] == {"p": 1, "q": 3}
    assert doc.line_of(("child", "q")) == 4


@pytest.mark.parametrize(("text", "code", "line"), [
    (b"a: 1\nb: 2\na: 3\n", "duplicate-key", 3),
    (b"a:\n\tb: 1\n", "yaml-syntax", 2),
    (b"a: [1, 2\n", "yaml-syntax", 2),
    (b"- 1\n- 2\n", "not-a-mapping", 1),
    (b"just text\n", "not-a-mapping", 1),
    (b"a: !custom 1\n", "yaml-unsupported-tag", 1),
    (b"a: !!set {x}\n", "yaml-unsupported-tag", 1),
    (b"? [x]\n: 1\n", "yaml-complex-key", 1),
    (b"a: *missing\n", "yaml-syntax", 1),
    (b"a: &x [*x]\n", "yaml-bomb", 1),
    (b"ok: 1\nbad: \xff\xfe\n", "not-utf8", 2),
], ids=["duplicate-key", "tab-indent", "unclosed-flow", "list-document", "scalar-document", "custom-tag",
        "set-tag", "complex-key", "undefined-alias", "recursive-alias", "latin1-bytes"])
def test_broken_input_is_one_located_finding(text: bytes, code: str, line: int) -> None:
    """Each kind of broken YAML yields a finding with its own code at the offending line, never an exception."""
    findings = load_yaml("f.yaml", text).findings
    assert [(f.code, f.location.line if f.location else None) for f in findings] == [(code, line)]


def test_non_utf8_names_byte_offset() -> None:
    """The non-UTF-8 finding names the byte value and its offset so the author can find it."""
    finding = load_yaml("f.yaml", b"a: caf\xe9\n").findings[0]
    assert "0xe9 at offset 6" in finding.message


def test_utf8_bom_is_accepted() -> None:
    """A UTF-8 byte-order mark, as some editors write, is not an error."""
    assert load_yaml("f.yaml", b"\xef\xbb\xbfa: 1\n").documents[0].data == {"a": 1}


def test_size_and_line_limits_refuse_before_parsing() -> None:
    """Files over the byte or line limit are refused whole with file-too-large."""
    assert codes(b"a: 1\n" * 30, YamlLimits(max_bytes=100)) == ["file-too-large"]
    assert codes(b"# x\n" * 20, YamlLimits(max_lines=10)) == ["file-too-large"]


@pytest.mark.parametrize("text", [
    b"x: " + b"[" * 100_000 + b"]" * 100_000,
    b"x: " + b"{a: " * 5_000 + b"1" + b"}" * 5_000,
    b"".join(b"- " * 300 + b"x\n" for _ in range(3)),
    b"".join(b"  " * i + b"k%d:\n" % i for i in range(100)),
], ids=["flow-sequences", "flow-mappings", "compact-block-sequences", "indented-mappings"])
def test_deep_nesting_is_refused_without_crashing(text: bytes) -> None:
    """Nesting past the depth limit is refused (the C composer would overflow the stack on such input)."""
    started = time.monotonic()
    assert codes(text) == ["nesting-too-deep"]
    assert time.monotonic() - started < 10, "sanity guard against a hang"


def test_billion_laughs_is_refused_quickly() -> None:
    """Nine levels of nine aliases (10^9 nodes once expanded) is refused as a YAML bomb."""
    bomb = 'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n'
    for i in range(1, 10):
        bomb += f"l{i}: &l{i} [" + ",".join([f"*{'a' if i == 1 else f'l{i - 1}'}"] * 9) + "]\n"
    started = time.monotonic()
    assert codes(bomb.encode()) == ["yaml-bomb"]
    assert time.monotonic() - started < 10, "sanity guard against a hang"


def test_modest_alias_use_is_fine() -> None:
    """Anchors reused a few times, as people write them for shared labels, load normally."""
    text = b"labels: &l {team: a, tier: gold}\n" + b"".join(b"o%d: *l\n" % i for i in range(50))
    doc = load_yaml("f.yaml", text).documents[0]
    assert doc.data["o49"] == {"team": "a", "tier": "gold"}


def test_node_budget_refuses_enormous_flow_documents() -> None:
    """A document with more nodes than the budget is refused even without aliases."""
    assert codes(b"x: [" + b"1," * 2000 + b"1]\n", YamlLimits(max_nodes=1000)) == ["too-many-nodes"]


def test_a_broken_document_does_not_hide_the_others() -> None:
    """A document refused for its content is reported; the file's other documents still load."""
    loaded = load_yaml("f.yaml", b"a: 1\na: 2\n---\nb: 1\n")
    assert [f.code for f in loaded.findings] == ["duplicate-key"]
    assert [d.data for d in loaded.documents] == [{"b": 1}]
