"""Architecture rules: the functional core stays pure, every folder is one layer, no import runs back up, no cycles."""

from __future__ import annotations

import ast
import importlib
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CONTRACTS = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["importlinter"]["contracts"]
# The pure core: the packages the contract forbidding I/O libraries names (one list, in pyproject.toml).
CORE = tuple(name.removeprefix("gitopsq.") for contract in CONTRACTS
             if "kubernetes" in contract.get("forbidden_modules", []) for name in contract["source_modules"])
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


# --- the whole package: every module under a contract, no import cycle, small modules ---------------------------

PACKAGE = ROOT / "gitopsq"
# Modules allowed over 400 lines, each with its reason (today none is).
LONG_MODULES: dict[str, str] = {}


def _modules() -> dict[str, Path]:
    """Every module of gitopsq by dotted name (a package by its own name, from its __init__.py)."""
    mods: dict[str, Path] = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        mods[".".join(parts)] = path
    return mods


def _imports(name: str, path: Path, mods: dict[str, Path]) -> set[str]:
    """The gitopsq modules ``name`` imports anywhere in its file: module level, in functions, under TYPE_CHECKING.

    An import of a package's own ancestor or descendant is left out (a package and its parts are one unit).
    """
    def known(target: str) -> str | None:
        while target and target not in mods:
            target = target.rpartition(".")[0]
        return target or None

    anchor = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(anchor[: len(anchor) - node.level + 1] + ([base] if base else []))
            targets = [base, *(f"{base}.{alias.name}" for alias in node.names)]
        for target in targets:
            hit = known(target) if target.split(".")[0] == "gitopsq" else None
            if hit and hit != name and not name.startswith(hit + ".") and not hit.startswith(name + "."):
                found.add(hit)
    return found


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (iterative Tarjan: no recursion limit to meet)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_cycle_finder_sees_a_cycle() -> None:
    """The cycle finder reports a three-module ring and nothing for a chain (so an empty answer means something)."""
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": set()}) == []


def test_no_import_cycle_anywhere() -> None:
    """No gitopsq module imports itself back through others, counting function-local and TYPE_CHECKING imports."""
    mods = _modules()
    graph = {name: _imports(name, path, mods) for name, path in mods.items()}
    assert _cycles(graph) == []


def _contract_names() -> set[str]:
    names: set[str] = set()
    for contract in CONTRACTS:
        for key in ("source_modules", "forbidden_modules", "modules", "containers"):
            names.update(contract.get(key, []))
        for layer in contract.get("layers", []):
            names.update(part.strip() for part in re.split(r"[|:]", layer) if part.strip())
    return names


def test_contract_names_are_real_modules() -> None:
    """Every gitopsq module a contract names exists, so a renamed module cannot leave a contract checking nothing."""
    mods = _modules()
    assert sorted(n for n in _contract_names() if n.startswith("gitopsq") and n not in mods) == []


def test_every_module_is_under_a_contract() -> None:
    """Each gitopsq module is named by an import-linter contract, itself or through a package that contains it;
    the root package is named by none and imports nothing of gitopsq (it only holds ``__version__``)."""
    mods = _modules()
    named = _contract_names()
    uncovered = [name for name in mods if name != "gitopsq" and not any(name == n or name.startswith(n + ".")
                                                                        for n in named)]
    assert uncovered == []
    assert _imports("gitopsq", mods["gitopsq"], mods) == set()


# --- every folder is one layer ---------------------------------------------------------------------------------

def _layers() -> list[list[str]]:
    """The whole-package layers contract, top to bottom: each layer the packages (or top-level modules) it holds."""
    whole = [c for c in CONTRACTS if c["type"] == "layers" and c["layers"][0] == "gitopsq.__main__"]
    assert len(whole) == 1
    return [[part.strip() for part in re.split(r"[|:]", layer)] for layer in whole[0]["layers"]]


def _top(name: str) -> str:
    return ".".join(name.split(".")[:2])


def _package_graph() -> dict[str, set[str]]:
    """Imports between gitopsq's top-level packages and modules (function-local and TYPE_CHECKING ones too)."""
    mods = _modules()
    graph: dict[str, set[str]] = {_top(name): set() for name in mods if name != "gitopsq"}
    for name, path in mods.items():
        if name != "gitopsq":
            graph[_top(name)] |= {_top(hit) for hit in _imports(name, path, mods) if _top(hit) != _top(name)}
    return graph


def test_each_top_level_package_is_one_layer() -> None:
    """The layers contract names whole top-level packages, each exactly once: no package is split across layers."""
    named = [part for layer in _layers() for part in layer]
    assert [n for n in named if n.count(".") != 1] == []
    assert sorted(named) == sorted(set(named))
    assert sorted(named) == sorted(_package_graph())


def test_no_import_runs_back_up() -> None:
    """Every import between top-level packages goes to a lower layer, never to its own or a higher one."""
    rank = {part: index for index, layer in enumerate(_layers()) for part in layer}
    upward = sorted(f"{source} -> {target}" for source, targets in _package_graph().items() for target in targets
                    if rank[target] <= rank[source])
    assert upward == []


def test_no_package_cycle() -> None:
    """No top-level package imports itself back through others."""
    assert _cycles(_package_graph()) == []


def test_no_module_over_400_lines_without_a_reason() -> None:
    """Modules stay under 400 lines unless LONG_MODULES gives the reason."""
    long = {name: len(path.read_text(encoding="utf-8").splitlines()) for name, path in _modules().items()}
    assert {n: lines for n, lines in long.items() if lines > 400 and n not in LONG_MODULES} == {}


def _where_is_references() -> list[str]:
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    return sorted(set(re.findall(r"`(gitopsq/[\w/]+\.py(?:::[\w.]+)?)`", text)))


def test_architecture_doc_names_references() -> None:
    """docs/architecture.md's "Where is…" table names at least thirty `module::function` references."""
    assert len([r for r in _where_is_references() if "::" in r]) >= 30


@pytest.mark.parametrize("reference", _where_is_references())
def test_architecture_doc_reference_exists(reference: str) -> None:
    """Each `path.py::name` in docs/architecture.md is a module that imports and holds that (dotted) name."""
    path, _, dotted = reference.partition("::")
    module = path.removesuffix(".py").removesuffix("/__init__").replace("/", ".")
    target: object = importlib.import_module(module)
    for part in dotted.split(".") if dotted else []:
        assert hasattr(target, part), f"{module} has no {dotted}"
        target = getattr(target, part)


def test_loggers_are_module_level() -> None:
    """`logs.get` is called only at module level (one lazy logger per module), never inside a function."""
    offences = []
    for name, path in _modules().items():
        for func in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(func, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            for node in ast.walk(func):
                if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get"
                        and isinstance(node.func.value, ast.Name) and node.func.value.id == "logs"):
                    offences.append(f"{name}:{node.lineno} in {func.name}")
    assert offences == []


# Module names that repeat on purpose: each package's `port` is its own typed interface (the hexagonal convention),
# and the manifest and policy loaders each read their own kind of file.
SHARED_MODULE_NAMES = {"__init__", "port", "loader"}


def test_no_two_modules_a_reader_could_confuse() -> None:
    """Outside the commands (each named after the command it runs), a module's name says which one it is: no two
    packages hold modules of the same name, save the deliberate ones above."""
    seen: dict[str, list[str]] = {}
    for name in _modules():
        parts = name.split(".")
        if len(parts) > 1 and parts[1] != "commands":
            seen.setdefault(parts[-1], []).append(name)
    assert {base: names for base, names in seen.items() if len(names) > 1 and base not in SHARED_MODULE_NAMES} == {}
