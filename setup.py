"""Records the commit a build is made from in ``gitopsq/_build_info.py`` (read by gitopsq.version).

Everything else about the package is in pyproject.toml. The commit comes from ``$GITOPSQ_COMMIT`` (the image
build, whose context has no .git), else from ``git`` when this directory is the top of a checkout; a build from
an sdist keeps the file the sdist carries. With neither, no file is written and the commit reads as unknown.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.command.sdist import sdist

ROOT = Path(__file__).resolve().parent
INFO = Path("gitopsq") / "_build_info.py"


def _git(*args: str) -> str | None:
    try:
        done = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, timeout=60, check=True)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip()


def _commit() -> tuple[str, bool] | None:
    given = os.environ.get("GITOPSQ_COMMIT", "").strip()
    if given:
        return given, False
    top = _git("rev-parse", "--show-toplevel")
    # An sdist unpacked inside some other repository must not record that repository's commit.
    if not top or Path(top).resolve() != ROOT:
        return None
    head = _git("rev-parse", "--verify", "HEAD")
    if not head:
        return None
    changes = _git("status", "--porcelain", "--untracked-files=no")
    return head, bool(changes)


def _write(base: Path) -> None:
    found = _commit()
    if found is None:
        return
    commit, dirty = found
    target = base / INFO
    target.parent.mkdir(parents=True, exist_ok=True)
    target.unlink(missing_ok=True)  # the release tree may hard-link source files: never write through a link
    target.write_text(f'"""Written by setup.py at build time."""\n\nCOMMIT = {commit!r}\nDIRTY = {dirty!r}\n',
                      encoding="utf-8")


class BuildPy(build_py):
    def run(self) -> None:
        super().run()
        # An editable install imports the checkout itself, whose HEAD gitopsq.version reads directly.
        if not self.editable_mode:
            _write(Path(self.build_lib))


class Sdist(sdist):
    def make_release_tree(self, base_dir: str, files: list[str]) -> None:
        super().make_release_tree(base_dir, files)
        _write(Path(base_dir))


setup(cmdclass={"build_py": BuildPy, "sdist": Sdist})
