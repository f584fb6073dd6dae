"""Architecture rules that keep the functional core pure."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CORE = ("api", "manifests", "policy", "plan", "admission", "simulate")
BANNED_CALLS = {"open", "print", "input"}
BANNED_ATTRS = {("time", "time"), ("time", "monotonic"), ("datetime", "now"), ("datetime", "utcnow"), ("os", "environ"),
                ("os", "getenv"), ("random", "random"), ("random", "randint"), ("random", "choice")}


def test_import_contracts_hold() -> None:
    """import-linter contracts in pyproject.toml pass: the core imports no shell and no I/O library."""
    exe = Path(sys.executable).with_name("lint-imports")
    result = subprocess.run([str(exe)], cwd=ROOT, capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout + result.stderr


def _core_files() -> list[Path]:
    return sorted(p for pkg in CORE for p in (ROOT / "gitopsq" / pkg).rglob("*.py"))


@pytest.mark.parametrize("path", _core_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_core_module_has_no_io_or_clock(path: Path) -> None:
    """A core module calls no file, clock, environment or randomness API: time and data are passed in."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    offences = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in BANNED_CALLS:
            offences.append(f"line {node.lineno}: {node.func.id}()")
        if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                and (node.value.id, node.attr) in BANNED_ATTRS):
            offences.append(f"line {node.lineno}: {node.value.id}.{node.attr}")
    assert not offences, offences
