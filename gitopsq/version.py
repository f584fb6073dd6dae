"""The line `gitopsq --version` prints: the release and the commit the package was built from.

A built package (wheel, sdist, image) carries ``gitopsq/_build_info.py``, written at build time by setup.py and
kept out of git. Run from a checkout (an editable install) there is none, and the checkout's own HEAD is read
instead; anywhere else the commit is unknown. Never raises: a version line must print on any machine.
"""

from __future__ import annotations

import importlib
from pathlib import Path

from gitopsq import __version__

UNKNOWN = "unknown commit"


def _recorded() -> tuple[str, bool] | None:
    try:
        info = importlib.import_module("gitopsq._build_info")
    except ImportError:
        return None
    commit = getattr(info, "COMMIT", "")
    return (commit, bool(getattr(info, "DIRTY", False))) if isinstance(commit, str) and commit else None


def _checkout() -> tuple[str, bool] | None:
    """HEAD of the checkout this package is imported from, when it is one (the project's root holds .git)."""
    root = Path(__file__).resolve().parent.parent
    if not (root / ".git").exists() or not (root / "pyproject.toml").is_file():
        return None
    try:
        import pygit2
    except ImportError:
        return None
    try:
        repo = pygit2.Repository(str(root))
        commit = str(repo.head.target)
        dirty = bool(repo.status(untracked_files="no"))
    except (pygit2.GitError, KeyError, ValueError, OSError):
        return None
    return commit, dirty


def commit_text() -> str:
    """``commit abcdef123456``, ``commit abcdef123456 with local changes``, or ``unknown commit``."""
    found = _recorded() or _checkout()
    if found is None:
        return UNKNOWN
    commit, dirty = found
    return f"commit {commit[:12]}" + (" with local changes" if dirty else "")


def version_line() -> str:
    return f"gitopsq {__version__} ({commit_text()})"
