"""Composed YAML nodes → plain data, with a line for every field path, under a node and alias budget.

Scalars are read as the Kubernetes API server reads YAML (go-yaml v2 rules, see `yamlscalar`; timestamps stay
text, ``!!binary`` is decoded); duplicate keys, complex keys, unknown tags, explicit tags that disagree with
their value, recursive aliases or merges, and alias or merge blow-ups are refused with `RefusedError`. Every
node a merge key (``<<``) brings in counts against the same budgets as an alias, so a bomb built from merges is
refused after the same small amount of work as one built from aliases.
"""

from __future__ import annotations

import base64
import binascii
import math
import sys
from typing import Any, Final

import yaml

from gitopsq.api.reader import FieldPath
from gitopsq.manifests.yamlscalar import BINARY, BOOL, FLOAT, INT, MERGE, NULL, STR, TIMESTAMP, explicit

__all__ = ["BOOL", "FLOAT", "INT", "MAP", "MERGE", "NULL", "SEQ", "STR", "Budget", "Converter", "RefusedError"]

MAP, SEQ = "tag:yaml.org,2002:map", "tag:yaml.org,2002:seq"
_KNOWN: Final = frozenset({STR, NULL, BOOL, INT, FLOAT, TIMESTAMP})


class RefusedError(Exception):
    """Raised inside the converter to abandon a document with one finding."""

    def __init__(self, code: str, message: str, line: int | None) -> None:
        super().__init__(message)
        self.code, self.message, self.line = code, message, line


class Budget:
    """Counts converted nodes across a file, so aliases cannot multiply the work."""

    __slots__ = ("alias_limit", "aliases", "limit", "nodes")

    def __init__(self, max_nodes: int, max_alias_nodes: int) -> None:
        self.nodes = 0
        self.aliases = 0
        self.limit = max_nodes
        self.alias_limit = max_alias_nodes


class Converter:
    """Turns one composed document into plain data, filling ``lines`` with the line of every field path."""

    def __init__(self, budget: Budget, lines: dict[FieldPath, int], max_depth: int) -> None:
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
                raise RefusedError("yaml-bomb", "aliases and merge keys expand to more than "
                                   f"{budget.alias_limit:,} repeated nodes; refusing what looks like a YAML bomb "
                                   "(\"billion laughs\")", node.start_mark.line + 1)
        if budget.nodes > budget.limit:
            line = node.start_mark.line + 1
            if budget.aliases:
                raise RefusedError("yaml-bomb", f"aliases expand to more than {budget.limit:,} nodes; refusing "
                               "what looks like a YAML bomb (\"billion laughs\")", line)
            raise RefusedError("too-many-nodes", f"more than {budget.limit:,} YAML nodes in one file; split it", line)
        if isinstance(node, yaml.ScalarNode):
            self.seen.add(ident)
            return _scalar(node)
        if depth >= self.max_depth:
            raise RefusedError("nesting-too-deep", f"nesting deeper than {self.max_depth} levels",
                           node.start_mark.line + 1)
        if ident in self.ancestors:
            raise RefusedError("yaml-bomb",
                               "an alias or merge key (<<) refers to its own anchor (a recursive structure)",
                           node.start_mark.line + 1)
        self.seen.add(ident)
        self.ancestors.add(ident)
        try:
            if isinstance(node, yaml.SequenceNode):
                if node.tag != SEQ:
                    raise RefusedError("yaml-unsupported-tag", f"unsupported tag {node.tag!r}",
                                        node.start_mark.line + 1)
                return self._sequence(node, path, depth)
            if node.tag != MAP or not isinstance(node, yaml.MappingNode):
                raise RefusedError("yaml-unsupported-tag", f"unsupported tag {node.tag!r}", node.start_mark.line + 1)
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
            if key_node.tag == MERGE:
                sources = value_node.value if isinstance(value_node, yaml.SequenceNode) else [value_node]
                for source in sources:
                    if not isinstance(source, yaml.MappingNode):
                        raise RefusedError("yaml-syntax", "a merge key (<<) needs a mapping or a list of mappings",
                                       key_node.start_mark.line + 1)
                    # Through `convert`, so the merged nodes count against the budgets and a mapping that
                    # merges itself (directly or through others) is caught as recursion.
                    merged = self.convert(source, path, depth + 1)
                    for key, value in merged.items():
                        out.setdefault(key, value)
        first_line: dict[Any, int] = {}
        lines = self.lines
        for key_node, value_node in node.value:
            if key_node.tag == MERGE:
                continue
            key_line = key_node.start_mark.line + 1
            if not isinstance(key_node, yaml.ScalarNode):
                raise RefusedError("yaml-complex-key", "a mapping key must be a plain value, not a list or mapping",
                               key_line)
            key = _key(_scalar(key_node), key_line)
            key = sys.intern(key)  # shared key strings keep line indexes and caches small
            if key in first_line:
                raise RefusedError("duplicate-key", f"key {key!r} appears twice in the same mapping (first at line "
                               f"{first_line[key]}); YAML and the Kubernetes API require unique keys", key_line)
            first_line[key] = key_line
            child = (*path, key)
            lines[child] = key_line
            out[key] = self.convert(value_node, child, depth + 1)
        return out


def _key(value: Any, line: int) -> str:
    """A key as JSON has it: sigs.k8s.io/yaml prints integer and boolean keys as text; others are refused."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    raise RefusedError("yaml-complex-key", f"a mapping key must be text, not {'null' if value is None else 'a number'}",
                       line)


def _scalar(node: yaml.ScalarNode) -> Any:
    tag, text = node.tag, node.value
    if tag in _KNOWN:
        ok, value = explicit(tag, text)
        if ok and isinstance(value, float) and not math.isfinite(value):
            raise RefusedError("yaml-bad-value", f"{text[:40]!r} is not a finite number, which JSON (and so the API "
                               "server) cannot carry; quote it if it is text", node.start_mark.line + 1)
        if ok:
            return value
        raise RefusedError("yaml-bad-value", f"{text[:40]!r} cannot be read as {tag.rsplit(':', 1)[-1]}: {value} "
                           "(Kubernetes' YAML reader refuses it)", node.start_mark.line + 1)
    if tag == BINARY:
        try:
            decoded = base64.b64decode("".join(text.split()), validate=True).decode("utf-8")
        except (binascii.Error, ValueError):
            raise RefusedError("yaml-bad-value", "a !!binary value that is not base64 of UTF-8 text",
                               node.start_mark.line + 1) from None
        return decoded
    raise RefusedError("yaml-unsupported-tag", f"unsupported tag {tag!r} on value {text[:40]!r}",
                       node.start_mark.line + 1)
