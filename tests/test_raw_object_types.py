"""Raw Kubernetes objects are typed where gitopsq meets the API server: the Kubernetes edge, the sync, the live
admission loop, the reconcile core and the admission webhooks' decisions name the shapes they read
(gitopsq/api/raw_objects.py and the shape modules beside it) and type their collaborators by Protocols, so none of
them spells `typing.Any`."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "gitopsq"
TYPED_PACKAGES = ("cluster", "sync", "reconcile", "intake", "admission_loop")
TYPED_MODULES = ("webhook/follower.py", "controller/fleet.py", "controller/job_webhook.py", "controller/manager.py",
                 "controller/forge_status.py", "controller/cluster_scope.py", "forge/reviews.py",
                 "forge/note_source.py")
TYPING_NAMES = ("typing", "typing_extensions")


def _typed_files() -> list[Path]:
    files = [p for pkg in TYPED_PACKAGES for p in sorted((PACKAGE / pkg).rglob("*.py"))]
    return files + [PACKAGE / m for m in TYPED_MODULES]


def any_uses(source: str) -> list[str]:
    """Where ``source`` spells ``Any``: imported from typing, named in code or annotations, or inside a string
    type (a quoted annotation or a `cast` target). Prose in docstrings and comments does not count."""
    found: list[str] = []
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module in TYPING_NAMES:
            found += [f"line {node.lineno}: from {node.module} import Any" for a in node.names if a.name == "Any"]
        elif isinstance(node, ast.Name) and node.id == "Any":
            found.append(f"line {node.lineno}: Any")
        elif (isinstance(node, ast.Attribute) and node.attr == "Any" and isinstance(node.value, ast.Name)
              and node.value.id in TYPING_NAMES):
            found.append(f"line {node.lineno}: {node.value.id}.Any")
    for node in ast.walk(tree):  # string types: parse them as expressions and look again
        quoted: list[ast.expr] = []
        if isinstance(node, ast.arg | ast.AnnAssign) and node.annotation is not None:
            quoted.append(node.annotation)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.returns is not None:
            quoted.append(node.returns)
        elif isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", "")) == "cast" \
                and node.args:
            quoted.append(node.args[0])
        for expr in quoted:
            if isinstance(expr, ast.Constant) and isinstance(expr.value, str):
                found += [f"line {node.lineno}: {expr.value!r}" for _ in any_uses_in_type(expr.value)]
    return found


def any_uses_in_type(text: str) -> list[str]:
    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError:
        return []
    return [n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and n.id == "Any"]


@pytest.mark.parametrize("path", _typed_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_module_names_its_shapes_instead_of_any(path: Path) -> None:
    """No `Any` in the module: objects from the API server are raw_objects/api shapes or JSON values, and
    collaborators are typed by the Protocols they use."""
    assert any_uses(path.read_text(encoding="utf-8")) == []


def test_the_scan_finds_every_spelling_of_any() -> None:
    """The scan sees Any imported, annotated, aliased, quoted and cast to, and ignores it in prose."""
    source = '''"""Any prose about Any values."""
from typing import Any, cast
import typing

Alias = dict[str, Any]  # Any in a comment


def f(a: "list[Any]", b: typing.Any) -> "Any":
    return cast("dict[str, Any]", a)
'''
    assert len(any_uses(source)) == 6
    assert any_uses('"""Any words."""\nx: "dict[str, object]" = {}\n') == []
