"""pytest plugin: what tests of the command line share. ``run`` calls the CLI in-process as a user's shell would
(exit code, stdout, stderr); ``commit_tree`` commits a work tree with pygit2 under an identity of the test's own;
the fixture ``isolated_caches`` gives a test its own repository cache and forgets what earlier tests validated,
so no test passes on another's cached result."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pygit2
import pytest

from gitopsq.cli import main
from gitopsq.commands import check as check_command
from gitopsq.manifests import DEFAULT_CACHE

TEMPLATE = Path(__file__).resolve().parents[1] / "repo-template"


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """``gitopsq ARGS`` in this process: (exit code, stdout, stderr)."""
    with pytest.raises(SystemExit) as exited:
        main(list(args))
    out, err = capsys.readouterr()
    return int(exited.value.code or 0), out, err


def commit_tree(root: Path, message: str, *, email: str = "alice@example.com") -> str:
    """Commit the work tree (a new repository on ``main`` when there is none); by default as Alice, a platform
    maintainer in the template's gitopsq.yaml. Returns the commit id."""
    repo = pygit2.Repository(str(root)) if (root / ".git").exists() else pygit2.init_repository(
        str(root), initial_head="main")
    repo.index.add_all()
    repo.index.write()
    tree = repo.index.write_tree()
    who = pygit2.Signature("Committer", email, 1_700_000_000, 0)
    parents = [] if repo.head_is_unborn else [repo.head.target]
    return str(repo.create_commit("HEAD", who, who, message, tree, parents))


def forget_validations() -> None:
    """Drop every cached validation result (the manifests cache and the check command's in-memory one)."""
    DEFAULT_CACHE.clear()
    check_command._IN_MEMORY.clear()


@pytest.fixture
def isolated_caches(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The test's own repository cache (``GITOPSQ_CACHE_DIR``), with nothing validated before it or left after."""
    monkeypatch.setenv("GITOPSQ_CACHE_DIR", str(tmp_path / "cache"))
    forget_validations()
    yield
    forget_validations()
