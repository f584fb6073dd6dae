"""Bytes → YAML documents that remember where every field came from. Pure: takes bytes and a path, no I/O.

A file is refused whole, with one finding naming file and line, when it is:

1. larger than ``max_bytes`` or longer than ``max_lines`` (checked before parsing, so a huge file costs nothing);
2. not UTF-8 (the finding names the byte offset and the line);
3. nested deeper than ``max_depth`` (checked by a linear pre-scan *before* the C parser runs: libyaml's composer
   recurses and would crash the interpreter on tens of thousands of levels);
4. not valid YAML (tabs in indentation get their own sentence);
5. a "billion laughs" bomb: aliases that reach more than ``max_alias_nodes`` nodes a second time, or an alias
   inside its own anchor; any document past ``max_nodes`` nodes is refused too.

Documents are then converted to plain data (dict / list / str / int / float / bool / None) as the API server
reads YAML (go-yaml v2 scalar rules, see `yamlscalar`): duplicate keys are errors, merge keys (``<<``) are
honoured and counted against the budgets like aliases, a merge or alias that reaches its own anchor is refused,
timestamps stay strings, an explicit tag that disagrees with its value (``!!null "0"``) is refused, other tags
are refused. Empty documents are skipped; a document that is not a mapping is reported.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Final

import yaml

from gitopsq.api import findings
from gitopsq.api.findings import Finding
from gitopsq.api.reader import FieldPath
from gitopsq.errors import Location
from gitopsq.manifests.yamlnodes import MAP, NULL, SEQ, STR, Budget, Converter, RefusedError
from gitopsq.manifests.yamlscalar import resolve_plain

_BaseLoader: Final[Any] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

# A line whose indentation and block indicators ("- ", "? ", ": ") run this long may hide deep block nesting.
_BLOCK_PREFIX_LIMIT = 256
_LONG_PREFIX = re.compile(r"^(?:[ \t]|[-?:][ \t]){" + str(_BLOCK_PREFIX_LIMIT) + "}", re.MULTILINE)
_BRACKETS = re.compile(r"[\[\]{}]")


class _Loader(_BaseLoader):  # type: ignore[misc]
    """The C parser with go-yaml v2's tag resolution (what the API server's YAML reader does), which is also
    faster than PyYAML's chain of YAML 1.1 regular expressions."""

    def resolve(self, kind: Any, value: Any, implicit: Any) -> Any:
        if kind is yaml.ScalarNode:
            return resolve_plain(value)[0] if implicit[0] else STR
        return MAP if kind is yaml.MappingNode else SEQ

    def descend_resolver(self, current_node: Any, current_index: Any) -> None:
        return None

    def ascend_resolver(self) -> None:
        return None


@dataclass(frozen=True, slots=True)
class YamlLimits:
    """What one file may cost. The defaults are far above any real queue definition."""

    max_bytes: int = 2 * 1024 * 1024
    max_lines: int = 50_000
    max_depth: int = 64
    max_nodes: int = 250_000
    max_alias_nodes: int = 20_000  # nodes reached a second time through an alias


DEFAULT_LIMITS: Final = YamlLimits()


@dataclass(frozen=True, slots=True)
class YamlDocument:
    """One non-empty document of a file: its data, its first line and the line of every field path."""

    path: str
    index: int  # 0-based position among the file's documents, empty ones included
    line: int
    data: Any
    lines: dict[FieldPath, int] = field(default_factory=dict, compare=False)

    def line_of(self, path: FieldPath) -> int | None:
        return self.lines.get(path)


@dataclass(frozen=True, slots=True)
class YamlFile:
    """The documents of one file and what was wrong with it (a refused file has findings and no documents)."""

    path: str
    documents: tuple[YamlDocument, ...]
    findings: tuple[Finding, ...]


def load_yaml(path: str, data: bytes, limits: YamlLimits = DEFAULT_LIMITS) -> YamlFile:
    """Parse every document of one file. Never raises for bad input: problems come back as findings."""

    def refuse(code: str, message: str, line: int | None = None) -> YamlFile:
        return YamlFile(path, (), (findings.error(code, message, location=Location(path, line)),))

    if len(data) > limits.max_bytes:
        return refuse("file-too-large", f"file is {len(data):,} bytes; the limit is {limits.max_bytes:,} bytes "
                      "(split it into several files)")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        line = data.count(b"\n", 0, err.start) + 1
        return refuse("not-utf8", f"not valid UTF-8: byte 0x{data[err.start]:02x} at offset {err.start} "
                      f"(line {line}); save the file as UTF-8", line)
    line_count = text.count("\n") + (0 if text.endswith("\n") or not text else 1)
    if line_count > limits.max_lines:
        return refuse("file-too-large", f"file has {line_count:,} lines; the limit is {limits.max_lines:,} lines "
                      "(split it into several files)")
    too_deep = _prescan_depth(text, limits.max_depth)
    if too_deep is not None:
        return refuse("nesting-too-deep", f"nesting deeper than {limits.max_depth} levels; "
                      "queue definitions never need that many (a malicious or generated file?)", too_deep)
    nodes = _compose(path, text)
    if isinstance(nodes, YamlFile):
        return nodes
    documents: list[YamlDocument] = []
    problems: list[Finding] = []
    budget = Budget(limits.max_nodes, limits.max_alias_nodes)
    for index, node in enumerate(nodes):
        if node.tag == NULL and isinstance(node, yaml.ScalarNode):
            continue  # an empty document, or one holding only comments
        line = node.start_mark.line + 1
        if not isinstance(node, yaml.MappingNode):
            kind = "a list" if isinstance(node, yaml.SequenceNode) else "a single value"
            problems.append(findings.error("not-a-mapping", f"document {index + 1} is {kind}, not a mapping; "
                                           "a manifest is a mapping with apiVersion, kind and metadata",
                                           location=Location(path, line)))
            continue
        lines: dict[FieldPath, int] = {(): line}
        try:
            value = Converter(budget, lines, limits.max_depth).convert(node, (), 0)
        except RefusedError as err:
            problems.append(findings.error(err.code, err.message, location=Location(path, err.line or line)))
            if err.code == "yaml-bomb":
                return YamlFile(path, (), tuple(problems))
            continue
        documents.append(YamlDocument(path, index, line, value, lines))
    return YamlFile(path, tuple(documents), tuple(problems))


def _prescan_depth(text: str, max_depth: int) -> int | None:
    """The line at which nesting provably or possibly exceeds ``max_depth``, else None. Linear in the text."""
    match = _LONG_PREFIX.search(text)
    if match is not None:
        return text.count("\n", 0, match.start()) + 1
    if "[" not in text and "{" not in text:
        return None
    depth = 0
    for bracket in _BRACKETS.finditer(text):
        if bracket.group() in "[{":
            depth += 1
            if depth > max_depth:
                return text.count("\n", 0, bracket.start()) + 1
        elif depth:
            depth -= 1
    return None


def _compose(path: str, text: str) -> list[yaml.Node] | YamlFile:
    loader = _Loader(text)
    nodes: list[yaml.Node] = []
    try:
        while loader.check_node():
            nodes.append(loader.get_node())
    except yaml.MarkedYAMLError as err:
        mark = err.problem_mark or err.context_mark
        line = mark.line + 1 if mark is not None else None
        return YamlFile(path, (), (findings.error("yaml-syntax", _syntax_message(err, text, line),
                                                  location=Location(path, line)),))
    except yaml.YAMLError as err:
        return YamlFile(path, (), (findings.error("yaml-syntax", f"not valid YAML: {err}",
                                                  location=Location(path, None)),))
    finally:
        loader.dispose()
    return nodes


def _syntax_message(err: yaml.MarkedYAMLError, text: str, line: int | None) -> str:
    if line is not None:
        source_line = text.split("\n", line)[line - 1] if line <= text.count("\n") + 1 else ""
        indentation = source_line[: len(source_line) - len(source_line.lstrip(" \t"))]
        if "\t" in indentation or ("\t" in source_line and "cannot start any token" in str(err.problem)):
            return "tab character in indentation: YAML indents with spaces only"
    problem = err.problem or "syntax error"
    context = f" {err.context}" if err.context else ""
    return f"not valid YAML: {problem}{context}"

