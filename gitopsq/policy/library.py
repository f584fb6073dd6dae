"""The built-in policy library, shipped as package data in ``gitopsq/data/policies`` (``policies/`` links there).

Reading package data is part of importing the program, not input: the files are fixed per release.
"""

from __future__ import annotations

from importlib import resources


def builtin_files() -> list[tuple[str, str]]:
    """(``policies/<file>``, text) for every built-in policy file, sorted by name."""
    root = resources.files("gitopsq").joinpath("data", "policies")
    files = sorted((entry.name, entry) for entry in root.iterdir()
                   if entry.name.endswith((".yaml", ".yml")) and entry.is_file())
    return [(f"policies/{name}", entry.read_text(encoding="utf-8")) for name, entry in files]
