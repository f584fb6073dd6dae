"""Read policy files (``kind: Policy``) from text, check their shape, and compile every expression.

Errors are `PolicyError` naming the file, the line and the column: for a CEL syntax error, the position of the
fault inside the expression is mapped back to the YAML line and column (block scalars included). A policy
that does not compile is not loaded, and the caller's check fails.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

import yaml

from gitopsq.errors import Location, PolicyError
from gitopsq.manifests.yamldoc import load_yaml
from gitopsq.policy.backend import Backend, CelCompileError, get_backend
from gitopsq.policy.evaluate import program
from gitopsq.policy.language import (
    Match,
    Operation,
    Policy,
    PolicyTest,
    Scope,
    Severity,
    Validation,
    Variable,
)
from gitopsq.policy.library import builtin_files

API_VERSION = "gitopsq.dev/v1alpha1"
_OWN_MESSAGES = frozenset({"yaml-syntax", "not-a-mapping"})  # this loader words these itself, with a column
_NAME = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")
_QUANTITY_ORDER = re.compile(r"quantity\([^()]*\)\s*(<=|>=|<|>)|(<=|>=|<|>)\s*quantity\(")
_TOP = {"apiVersion", "kind", "metadata", "spec"}
_SPEC = {"description", "severity", "scope", "match", "variables", "validations", "tests", "testDefaults"}
_MATCH = {"kinds", "paths", "operations"}
_VALIDATION = {"expression", "message", "messageExpression", "reason"}
_TEST_KEYS = {"name", "expect", "messageContains", "object", "oldObject", "operation", "path", "oldPath",
              "commit", "commits", "repo", "previousRepo", "desired", "changes", "touchedPaths"}


def _construct(node: yaml.Node) -> Any:
    loader = yaml.SafeLoader("")
    try:
        return loader.construct_document(node)
    finally:
        loader.dispose()


def _child(node: yaml.Node, key: str) -> yaml.Node | None:
    if isinstance(node, yaml.MappingNode):
        for k, v in node.value:
            if k.value == key:
                found: yaml.Node = v
                return found
    return None


def _items(node: yaml.Node | None) -> list[yaml.Node]:
    return list(node.value) if isinstance(node, yaml.SequenceNode) else []


class _File:
    def __init__(self, path: str) -> None:
        self.path = path

    def fail(self, message: str, node: yaml.Node | None = None, line: int | None = None,
             column: int | None = None) -> PolicyError:
        if node is not None and line is None:
            line, column = node.start_mark.line + 1, node.start_mark.column + 1
        return PolicyError(message, location=Location(self.path, line, column))

    def keys(self, node: yaml.Node, allowed: set[str], where: str) -> None:
        if not isinstance(node, yaml.MappingNode):
            raise self.fail(f"{where} must be a mapping", node)
        for k, _ in node.value:
            if k.value not in allowed:
                raise self.fail(f"unknown field {k.value!r} in {where} (allowed: {', '.join(sorted(allowed))})", k)

    def string(self, node: yaml.Node | None, where: str, required: bool = True) -> str | None:
        if node is None:
            if required:
                raise self.fail(f"{where} is required")
            return None
        if not isinstance(node, yaml.ScalarNode) or not isinstance(_construct(node), str) or not node.value.strip():
            raise self.fail(f"{where} must be a non-empty string", node)
        return str(_construct(node))

    def strings(self, node: yaml.Node | None, where: str) -> tuple[str, ...]:
        if node is None:
            return ()
        value = _construct(node)
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise self.fail(f"{where} must be a list of strings", node)
        return tuple(value)


def expression_position(node: yaml.ScalarNode, line: int | None, column: int | None) -> tuple[int, int]:
    """Map a 1-based (line, column) inside a scalar's text back to the YAML file."""
    start_line, start_col = node.start_mark.line + 1, node.start_mark.column + 1
    line, column = line or 1, column or 1
    if node.style in ("|", ">"):
        buffer = node.start_mark.buffer or ""
        lines = buffer.splitlines()
        body = [i for i in range(node.start_mark.line + 1, min(len(lines), node.end_mark.line + 1))
                if lines[i].strip()]
        if not body:
            return start_line, start_col
        if node.style == "|":
            target = body[min(line - 1, len(body) - 1)]
            indent = len(lines[target]) - len(lines[target].lstrip())
            return target + 1, indent + column
        offset = column - 1  # folded: source lines joined with one space
        for index in body:
            text = lines[index].strip()
            indent = len(lines[index]) - len(lines[index].lstrip())
            if offset <= len(text):
                return index + 1, indent + offset + 1
            offset -= len(text) + 1
        return body[-1] + 1, 1
    quote = 1 if node.style in ("'", '"') else 0
    if line == 1:
        return start_line, start_col + quote + column - 1
    return start_line + line - 1, column


def _compile(file: _File, backend: Backend, node: yaml.ScalarNode, text: str, what: str) -> None:
    bad_order = _QUANTITY_ORDER.search(text)
    if bad_order:
        line, col = expression_position(node, 1, bad_order.start() + 1)
        raise file.fail(f"{what}: compare quantities with compareTo(), isLessThan() or isGreaterThan(), "
                        "not with <, <=, > or >=", line=line, column=col)
    try:
        program(backend, text)
    except CelCompileError as err:
        line, col = expression_position(node, err.line, err.column)
        raise file.fail(f"{what}: CEL syntax error: {err.message}", line=line, column=col) from err


def _match(file: _File, node: yaml.Node | None) -> Match:
    if node is None:
        return Match()
    file.keys(node, _MATCH, "spec.match")
    ops = file.strings(_child(node, "operations"), "spec.match.operations")
    for op in ops:
        if op not in Operation.__members__:
            raise file.fail(f"unknown operation {op!r} (use CREATE, UPDATE or DELETE)", _child(node, "operations"))
    return Match(kinds=file.strings(_child(node, "kinds"), "spec.match.kinds"),
                 paths=file.strings(_child(node, "paths"), "spec.match.paths"),
                 operations=tuple(Operation(o) for o in ops) or Match().operations)


def _tests(file: _File, node: yaml.Node | None) -> tuple[PolicyTest, ...]:
    out = []
    for item in _items(node):
        file.keys(item, _TEST_KEYS, "a test")
        name = file.string(_child(item, "name"), "tests[].name")
        expect = file.string(_child(item, "expect"), f"test {name!r}: expect")
        if expect not in ("allow", "deny"):
            raise file.fail(f"test {name!r}: expect must be allow or deny", _child(item, "expect"))
        case = {k: v for k, v in _construct(item).items() if k not in ("name", "expect", "messageContains")}
        out.append(PolicyTest(str(name), case, expect == "allow",
                              file.string(_child(item, "messageContains"), "messageContains", required=False),
                              item.start_mark.line + 1))
    return tuple(out)


def _policy(file: _File, doc: yaml.Node, backend: Backend, builtin: bool) -> Policy:
    file.keys(doc, _TOP, "a policy")
    api_node, kind_node = _child(doc, "apiVersion"), _child(doc, "kind")
    if api_node is None or _construct(api_node) != API_VERSION:
        raise file.fail(f"apiVersion must be {API_VERSION}", api_node or doc)
    if kind_node is None or _construct(kind_node) != "Policy":
        raise file.fail("kind must be Policy", kind_node or doc)
    meta = _child(doc, "metadata")
    name = file.string(_child(meta, "name") if meta is not None else None, "metadata.name")
    assert name is not None
    if not _NAME.match(name):
        raise file.fail(f"policy name {name!r} must be lower-case letters, digits, '-' or '.'", meta)
    spec = _child(doc, "spec")
    if spec is None:
        raise file.fail("spec is required", doc)
    file.keys(spec, _SPEC, "spec")
    severity = file.string(_child(spec, "severity"), "spec.severity", required=False) or "Deny"
    if severity not in ("Deny", "Warn"):
        raise file.fail("spec.severity must be Deny or Warn", _child(spec, "severity"))
    scope = file.string(_child(spec, "scope"), "spec.scope", required=False) or "Object"
    if scope not in ("Object", "Revision"):
        raise file.fail("spec.scope must be Object or Revision", _child(spec, "scope"))
    variables = []
    for item in _items(_child(spec, "variables")):
        file.keys(item, {"name", "expression"}, "a variable")
        var_name = file.string(_child(item, "name"), "variables[].name")
        expr_node = _child(item, "expression")
        expr = file.string(expr_node, f"variable {var_name!r}: expression")
        assert var_name is not None and expr is not None and isinstance(expr_node, yaml.ScalarNode)
        _compile(file, backend, expr_node, expr, f"policy {name}: variable {var_name!r}")
        variables.append(Variable(var_name, expr, expr_node.start_mark.line + 1))
    validations = []
    for item in _items(_child(spec, "validations")):
        file.keys(item, _VALIDATION, "a validation")
        expr_node = _child(item, "expression")
        expr = file.string(expr_node, "validations[].expression")
        assert expr is not None and isinstance(expr_node, yaml.ScalarNode)
        _compile(file, backend, expr_node, expr, f"policy {name}: validation")
        msg_node = _child(item, "messageExpression")
        msg_expr = file.string(msg_node, "messageExpression", required=False)
        if msg_expr is not None and isinstance(msg_node, yaml.ScalarNode):
            _compile(file, backend, msg_node, msg_expr, f"policy {name}: messageExpression")
        validations.append(Validation(
            expr, file.string(_child(item, "message"), "message", required=False), msg_expr,
            file.string(_child(item, "reason"), "reason", required=False) or "Forbidden",
            expr_node.start_mark.line + 1))
    if not validations:
        raise file.fail(f"policy {name}: spec.validations needs at least one validation", spec)
    defaults = _child(spec, "testDefaults")
    description = file.string(_child(spec, "description"), "spec.description", required=False) or ""
    return Policy(
        name=name, source=file.path, line=doc.start_mark.line + 1, match=_match(file, _child(spec, "match")),
        variables=tuple(variables), validations=tuple(validations), severity=Severity(severity),
        scope=Scope(scope), builtin=builtin, tests=_tests(file, _child(spec, "tests")),
        test_defaults=_construct(defaults) if defaults is not None else {}, description=description,
    )


def parse_policies(path: str, text: str, backend: Backend | str | None = None,
                   builtin: bool = False) -> list[Policy]:
    """Every policy in one (possibly multi-document) file, compiled on ``backend``."""
    chosen = backend if backend is not None and not isinstance(backend, str) else get_backend(backend)
    file = _File(path)
    # The manifest reader's limits first (size, depth, alias and merge bombs, recursive merges, explicit tags
    # that disagree with their value): PyYAML's own composer and constructor would recurse, stall or raise a
    # KeyError on those.
    refused = [f for f in load_yaml(path, text.encode("utf-8", "surrogatepass")).findings
               if f.code not in _OWN_MESSAGES]
    if refused:
        first = refused[0]
        raise PolicyError(first.message, location=first.location)
    try:
        documents = list(yaml.compose_all(text, Loader=yaml.SafeLoader))
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        raise file.fail(f"invalid YAML: {getattr(err, 'problem', err)}",
                        line=mark.line + 1 if mark else None, column=mark.column + 1 if mark else None) from err
    return [_policy(file, doc, chosen, builtin) for doc in documents if doc is not None]


def load_policies(builtin: bool = True, repo_files: Mapping[str, str] | Iterable[tuple[str, str]] = (),
                  backend: Backend | str | None = None) -> list[Policy]:
    """The built-in library (when ``builtin``) followed by the repository's own policy files.

    ``repo_files`` maps repository-relative paths to file text (the caller reads them). A repository policy
    may not reuse a built-in policy's name, and names are unique.
    """
    policies: list[Policy] = []
    if builtin:
        for path, text in builtin_files():
            policies.extend(parse_policies(path, text, backend, builtin=True))
    items = repo_files.items() if isinstance(repo_files, Mapping) else repo_files
    seen = {p.name: p for p in policies}
    for path, text in sorted(items):
        for policy in parse_policies(path, text, backend):
            if policy.name in seen:
                other = seen[policy.name]
                raise PolicyError(f"policy name {policy.name!r} is already used by {other.source}"
                                  + (" (a built-in policy)" if other.builtin else ""),
                                  location=Location(path, policy.line))
            seen[policy.name] = policy
            policies.append(policy)
    return policies
