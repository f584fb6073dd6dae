"""Bytes → YAML documents that remember where every field came from. Pure: takes bytes and a path, no I/O.

A file is refused whole, with one finding naming file and line, when it is:

1. larger than ``max_bytes`` or longer than ``max_lines`` (checked before parsing, so a huge file costs nothing);
2. not UTF-8 (the finding names the byte offset and the line);
3. nested deeper than ``max_depth`` (checked by a linear pre-scan *before* the C parser runs: libyaml's composer
   recurses and would crash the interpreter on tens of thousands of levels);
4. not valid YAML (tabs in indentation get their own sentence);
5. a "billion laughs" bomb: aliases whose expansion exceeds ``max_nodes``, or an alias inside its own anchor.

Documents are then converted to plain data (dict / list / str / int / float / bool / None) as Kubernetes reads
YAML: duplicate keys are errors, merge keys (``<<``) are honoured, timestamps and binary stay strings, other tags
are refused. Empty documents are skipped; a document that is not a mapping is reported.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final

import yaml

from gitopsq.api import findings
from gitopsq.api.findings import Finding
from gitopsq.api.reader import FieldPath
from gitopsq.errors import Location

_BaseLoader: Final[Any] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_CONSTRUCTOR: Final = yaml.constructor.SafeConstructor()

_STR, _NULL, _BOOL = "tag:yaml.org,2002:str", "tag:yaml.org,2002:null", "tag:yaml.org,2002:bool"
_INT, _FLOAT = "tag:yaml.org,2002:int", "tag:yaml.org,2002:float"
_AS_TEXT = frozenset({"tag:yaml.org,2002:timestamp", "tag:yaml.org,2002:binary"})
_MAP, _SEQ, _MERGE = "tag:yaml.org,2002:map", "tag:yaml.org,2002:seq", "tag:yaml.org,2002:merge"

# A line whose indentation and block indicators ("- ", "? ", ": ") run this long may hide deep block nesting.
_BLOCK_PREFIX_LIMIT = 256
_LONG_PREFIX = re.compile(r"^(?:[ \t]|[-?:][ \t]){" + str(_BLOCK_PREFIX_LIMIT) + "}", re.MULTILINE)
_BRACKETS = re.compile(r"[\[\]{}]")


class _Loader(_BaseLoader):  # type: ignore[misc]
    """The C parser with a faster tag resolver: a plain scalar whose first character cannot start a number,
    boolean, null or timestamp is a string without trying every implicit resolver (same results, a third of the
    parse time on manifests)."""

    _starts: Final = frozenset(k for k in yaml.resolver.Resolver.yaml_implicit_resolvers if k is not None)

    def resolve(self, kind: Any, value: Any, implicit: Any) -> Any:
        if kind is yaml.ScalarNode:
            if implicit[0] and value[:1] not in self._starts:
                return _STR
            return super().resolve(kind, value, implicit)
        return _MAP if kind is yaml.MappingNode else _SEQ

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


class _RefusedError(Exception):
    """Raised inside the converter to abandon a document with one finding."""

    def __init__(self, code: str, message: str, line: int | None) -> None:
        super().__init__(message)
        self.code, self.message, self.line = code, message, line


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
    budget = _Budget(limits)
    for index, node in enumerate(nodes):
        if node.tag == _NULL and isinstance(node, yaml.ScalarNode):
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
            value = _Converter(budget, lines, limits.max_depth).convert(node, (), 0)
        except _RefusedError as err:
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


class _Budget:
    """Counts converted nodes across a file, so aliases cannot multiply the work."""

    __slots__ = ("alias_limit", "aliases", "limit", "nodes")

    def __init__(self, limits: YamlLimits) -> None:
        self.nodes = 0
        self.aliases = 0
        self.limit = limits.max_nodes
        self.alias_limit = limits.max_alias_nodes


class _Converter:
    """Turns one composed document into plain data, filling ``lines`` with the line of every field path."""

    def __init__(self, budget: _Budget, lines: dict[FieldPath, int], max_depth: int) -> None:
        self.budget = budget
        self.lines = lines
        self.max_depth = max_depth
        self.seen: set[int] = set()
        self.ancestors: set[int] = set()

    def convert(self, node: yaml.Node, path: FieldPath, depth: int) -> Any:
        budget = self.budget
        budget.nodes += 1
        ident = id(node)
        if ident in self.seen:
            budget.aliases += 1
            if budget.aliases > budget.alias_limit:
                raise _RefusedError("yaml-bomb", f"aliases expand to more than {budget.alias_limit:,} repeated "
                                    "nodes; refusing what looks like a YAML bomb (\"billion laughs\")",
                                    node.start_mark.line + 1)
        if budget.nodes > budget.limit:
            line = node.start_mark.line + 1
            if budget.aliases:
                raise _RefusedError("yaml-bomb", f"aliases expand to more than {budget.limit:,} nodes; refusing "
                               "what looks like a YAML bomb (\"billion laughs\")", line)
            raise _RefusedError("too-many-nodes", f"more than {budget.limit:,} YAML nodes in one file; split it", line)
        if isinstance(node, yaml.ScalarNode):
            self.seen.add(ident)
            return _scalar(node)
        if depth >= self.max_depth:
            raise _RefusedError("nesting-too-deep", f"nesting deeper than {self.max_depth} levels",
                           node.start_mark.line + 1)
        if ident in self.ancestors:
            raise _RefusedError("yaml-bomb", "an alias refers to its own anchor (a recursive structure)",
                           node.start_mark.line + 1)
        self.seen.add(ident)
        self.ancestors.add(ident)
        try:
            if isinstance(node, yaml.SequenceNode):
                if node.tag != _SEQ:
                    raise _RefusedError("yaml-unsupported-tag", f"unsupported tag {node.tag!r}",
                                        node.start_mark.line + 1)
                return self._sequence(node, path, depth)
            if node.tag != _MAP or not isinstance(node, yaml.MappingNode):
                raise _RefusedError("yaml-unsupported-tag", f"unsupported tag {node.tag!r}", node.start_mark.line + 1)
            return self._mapping(node, path, depth)
        finally:
            self.ancestors.discard(ident)

    def _sequence(self, node: yaml.SequenceNode, path: FieldPath, depth: int) -> list[Any]:
        out = []
        lines = self.lines
        for i, item in enumerate(node.value):
            item_path = (*path, i)
            lines[item_path] = item.start_mark.line + 1
            out.append(self.convert(item, item_path, depth + 1))
        return out

    def _mapping(self, node: yaml.MappingNode, path: FieldPath, depth: int) -> dict[Any, Any]:
        out: dict[Any, Any] = {}
        # Merge keys (<<) first: the mapping's own keys then override what they bring in, lines included.
        for key_node, value_node in node.value:
            if key_node.tag == _MERGE:
                sources = value_node.value if isinstance(value_node, yaml.SequenceNode) else [value_node]
                for source in sources:
                    if not isinstance(source, yaml.MappingNode):
                        raise _RefusedError("yaml-syntax", "a merge key (<<) needs a mapping or a list of mappings",
                                       key_node.start_mark.line + 1)
                    for key, value in self._mapping(source, path, depth).items():
                        out.setdefault(key, value)
        first_line: dict[Any, int] = {}
        lines = self.lines
        for key_node, value_node in node.value:
            if key_node.tag == _MERGE:
                continue
            key_line = key_node.start_mark.line + 1
            if not isinstance(key_node, yaml.ScalarNode):
                raise _RefusedError("yaml-complex-key", "a mapping key must be a plain value, not a list or mapping",
                               key_line)
            key = _scalar(key_node)
            if type(key) is str:
                key = sys.intern(key)  # shared key strings keep line indexes and caches small
            if key in first_line:
                raise _RefusedError("duplicate-key", f"key {key!r} appears twice in the same mapping (first at line "
                               f"{first_line[key]}); YAML and the Kubernetes API require unique keys", key_line)
            first_line[key] = key_line
            child = (*path, key)
            lines[child] = key_line
            out[key] = self.convert(value_node, child, depth + 1)
        return out


_SCALARS: Final[dict[str, Callable[[yaml.ScalarNode], Any]]] = {
    _BOOL: _CONSTRUCTOR.construct_yaml_bool,
    _INT: _CONSTRUCTOR.construct_yaml_int,
    _FLOAT: _CONSTRUCTOR.construct_yaml_float,
}


def _scalar(node: yaml.ScalarNode) -> Any:
    tag = node.tag
    if tag == _STR or tag in _AS_TEXT:
        return node.value
    if tag == _NULL:
        return None
    convert = _SCALARS.get(tag)
    if convert is None:
        raise _RefusedError("yaml-unsupported-tag", f"unsupported tag {tag!r} on value {node.value[:40]!r}",
                       node.start_mark.line + 1)
    try:
        return convert(node)
    except (ValueError, OverflowError) as err:
        raise _RefusedError("yaml-syntax", f"cannot read {node.value[:40]!r} as {tag.rsplit(':', 1)[-1]}: {err}",
                       node.start_mark.line + 1) from None
