"""The admission engine compiled to C by mypyc, imported only when it was built from exactly the sources beside it.

The engine (`gitopsq.admission`) is plain, strictly typed Python, and that stays the source of truth. mypyc
(mypy's compiler, which also builds black and mypy itself) turns the same modules into a C extension that settles
an instant about twice as fast with byte-identical outcomes (benchmarks/outcomes_dump.py,
tests/admission/test_native.py). The build lands in ``<package>/_native/<digest>/``, the digest naming the sources
and the interpreter's ABI; `gitopsq.admission` puts that directory first on its package path when it holds a
finished build, so a build older than an edit is never imported: the pure modules are, and `status` says why.
``GITOPSQ_ENGINE=python`` forces the pure modules (a test that swaps an engine method needs them).

    python -m gitopsq.native_build build [--force]   # compile (`gitopsq.native_build`); no-op when current
    python -m gitopsq.native_build status            # which engine this interpreter imports, and why

scripts/bootstrap builds it; the controller image builds it in its build stage (Dockerfile). This module only finds
a build (stdlib, imported by the pure core); the compiling is `gitopsq.native_build`'s.
"""

from __future__ import annotations

import hashlib
import importlib.machinery
import os
import sys
from dataclasses import dataclass
from pathlib import Path

ENGINE_ENV = "GITOPSQ_ENGINE"  # "python": never the compiled modules
MARKER = "BUILT"  # written last: a directory without it is an interrupted build
ADMISSION_DIR = Path(__file__).resolve().parent / "admission"


@dataclass(frozen=True, slots=True)
class EngineKind:
    """What `activate` found: ``compiled`` and the directory, or why the pure modules are used."""

    compiled: bool
    detail: str  # the build directory, or the reason for pure Python

    def __str__(self) -> str:
        return f"compiled (mypyc, {self.detail})" if self.compiled else f"pure Python ({self.detail})"


def sources(package_dir: Path) -> list[Path]:
    """The modules compiled: every module of the package but ``__init__`` (which does the activating)."""
    return sorted(p for p in package_dir.glob("*.py") if p.name != "__init__.py")


def digest(package_dir: Path) -> str:
    """Names one build: the interpreter's ABI and every compiled source, by content."""
    h = hashlib.sha256()
    h.update(f"{sys.implementation.cache_tag} {importlib.machinery.EXTENSION_SUFFIXES[0]}\n".encode())
    for path in sources(package_dir):
        h.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()[:20]


def build_dir(package_dir: Path) -> Path:
    return package_dir / "_native" / digest(package_dir)


def activate(package_path: list[str], package_dir: Path) -> EngineKind:
    """Put the current build first on ``package_path`` (a package's ``__path__``) if there is one."""
    if os.environ.get(ENGINE_ENV, "") == "python":
        return EngineKind(False, f"{ENGINE_ENV}=python")
    try:
        where = build_dir(package_dir)
    except OSError as exc:  # a source unreadable: import will say more
        return EngineKind(False, f"sources unreadable: {exc}")
    if not (where / MARKER).is_file():
        others = [p.name for p in (package_dir / "_native").glob("*") if (p / MARKER).is_file()]
        why = "built from other sources: rebuild" if others else "not built"
        return EngineKind(False, f"{why}; python -m gitopsq.native_build build")
    package_path.insert(0, str(where))
    return EngineKind(True, str(where))
