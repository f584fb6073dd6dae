"""A plain directory (no Git) is a Source with one revision, WORKTREE, so `check repo-template` works."""

from __future__ import annotations

from pathlib import Path

import pygit2
import pytest

from gitopsq.errors import UnknownRevisionError
from gitopsq.source import WORKTREE, DirectorySource, GitSource, HistorySource, Source, open_any

from .conftest import GitRepo


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    root = tmp_path / "plain"
    for rel, text in {"gitopsq.yaml": "kind: RepositoryConfig\n", "teams/a/q.yaml": "a: 1\n",
                      "teams/a/README.md": "docs\n", ".git-not/x.yaml": "b\n"}.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    (root / "teams/a/link.yaml").symlink_to("/etc/passwd")
    return root


def test_plain_directory_opens_as_a_directory_source(tree: Path) -> None:
    """open_any gives a DirectorySource for a directory that is not a repository, satisfying the Source port."""
    source = open_any(str(tree))
    assert isinstance(source, DirectorySource) and isinstance(source, Source)
    assert not isinstance(source, HistorySource)
    assert source.resolve("HEAD") == WORKTREE


def test_repository_root_opens_as_git(repo: GitRepo) -> None:
    """open_any gives a GitSource for the root of a work tree."""
    repo.commit("c", {"a.yaml": "x\n"})
    source = open_any(str(repo.path))
    assert isinstance(source, GitSource) and isinstance(source, HistorySource)


def test_directory_lists_files_with_git_blob_ids(tree: Path) -> None:
    """Files are listed like a commit's, skipping symlinks, with the blob ids git would compute."""
    source = open_any(str(tree))
    files = source.list_files(WORKTREE, ["teams/", "gitopsq.yaml"])
    assert [f.path for f in files] == ["gitopsq.yaml", "teams/a/q.yaml"]
    assert files[1].blob_id == str(pygit2.hash(b"a: 1\n"))
    assert source.read_blob(files[1].blob_id) == b"a: 1\n"
    assert source.read_file(WORKTREE, "teams/a/link.yaml") is None


def test_directory_never_reads_outside_its_root(tree: Path) -> None:
    """A path climbing out of the root reads nothing."""
    (tree.parent / "secret.yaml").write_text("s\n")
    assert open_any(str(tree)).read_file(WORKTREE, "../secret.yaml") is None


def test_directory_has_only_one_revision(tree: Path) -> None:
    """Any revision other than HEAD/WORKTREE is unknown in a plain directory; its commit is unsigned."""
    source = open_any(str(tree))
    with pytest.raises(UnknownRevisionError):
        source.resolve("main")
    info = source.commit_info(WORKTREE)
    assert info.signature is None and info.parents == ()
    assert [c.status for c in source.changed_paths(None, WORKTREE)] == ["added"] * 4


def test_subdirectory_of_a_repository_is_read_from_disk(repo: GitRepo) -> None:
    """A directory inside a work tree (like repo-template/ in this project) is read as files, not as the
    enclosing repository's HEAD, so uncommitted edits are what gets checked."""
    repo.commit("c", {"tmpl/gitopsq.yaml": "committed\n"})
    (repo.path / "tmpl/gitopsq.yaml").write_text("edited\n")
    source = open_any(str(repo.path / "tmpl"))
    assert isinstance(source, DirectorySource)
    assert source.read_file(source.resolve("HEAD"), "gitopsq.yaml") == b"edited\n"
