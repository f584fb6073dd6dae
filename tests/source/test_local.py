"""Local repositories are read in place: every kind of revision resolves, files are listed and read from trees."""

from __future__ import annotations

from pathlib import Path

import pytest

from gitopsq.errors import SourceError, UnknownRevisionError
from gitopsq.source import FileEntry, open_source

from .conftest import GitRepo, History, bare_clone, new_repo

REVISIONS = [
    pytest.param("main", "c3", id="local-branch"),
    pytest.param("feature", "f1", id="second-local-branch"),
    pytest.param("refs/heads/feature", "f1", id="full-ref-name"),
    pytest.param("light-tag", "c1", id="lightweight-tag"),
    pytest.param("v1.0", "c2", id="annotated-tag-peeled-to-its-commit"),
    pytest.param("HEAD", "c3", id="HEAD-of-the-work-tree"),
    pytest.param("main~1", "c2", id="ancestry-suffix"),
]


@pytest.mark.parametrize(("rev", "expected"), REVISIONS)
def test_named_revisions_resolve_to_their_commit(history: History, rev: str, expected: str) -> None:
    """Branches, full ref names, lightweight and annotated tags, HEAD and ~N name the commit git would."""
    source = open_source(str(history.repo.path))
    assert source.resolve(rev) == getattr(history, expected)


@pytest.mark.parametrize("length", [40, 12, 7], ids=["full-sha", "12-char-sha", "7-char-sha"])
def test_commit_ids_resolve_in_full_or_abbreviated(history: History, length: int) -> None:
    """A commit id resolves whether given in full or abbreviated to a unique prefix."""
    source = open_source(str(history.repo.path))
    assert source.resolve(history.c2[:length]) == history.c2


def test_remote_tracking_branch_resolves(history: History, tmp_path: Path) -> None:
    """A clone's `origin/feature` remote-tracking branch resolves without any local branch of that name."""
    clone = GitRepo(tmp_path / "clone", history.repo.home)
    history.repo.git("clone", "-q", str(history.repo.path), str(clone.path))
    source = open_source(str(clone.path))
    assert source.resolve("origin/feature") == history.f1


@pytest.mark.parametrize("rev", ["no-such-branch", "deadbeefdeadbeef", "main~99", "..", "-rf"],
                         ids=["missing-branch", "missing-sha", "beyond-root", "bad-syntax", "option-like"])
def test_unknown_revision_names_the_ref_and_the_repo(history: History, rev: str) -> None:
    """An unknown revision raises UnknownRevisionError whose one-line message names the ref and the repository."""
    source = open_source(str(history.repo.path))
    with pytest.raises(UnknownRevisionError) as caught:
        source.resolve(rev)
    message = str(caught.value)
    assert repr(rev) in message and str(history.repo.path) in message and "\n" not in message
    assert caught.value.exit_code == 3


def test_a_tag_on_a_tree_is_not_a_commit(history: History) -> None:
    """A tag that points at a tree, not a commit, is refused as a revision."""
    tree = history.repo.git("rev-parse", "HEAD^{tree}")
    history.repo.git("tag", "tree-tag", tree)
    with pytest.raises(UnknownRevisionError, match="not a commit"):
        open_source(str(history.repo.path)).resolve("tree-tag")


def test_bare_repository_is_read_in_place(history: History, tmp_path: Path) -> None:
    """A bare repository opens in place: revisions resolve and files read without any work tree or cache."""
    bare = bare_clone(history.repo, tmp_path / "bare.git")
    before = sorted(p.name for p in tmp_path.iterdir())
    source = open_source(str(bare))
    sha = source.resolve("v1.0")
    assert source.read_file(sha, "teams/a/queues.yaml") == b"kind: ClusterQueue\n"
    assert source.path == bare and not source.is_remote
    assert sorted(p.name for p in tmp_path.iterdir()) == before


@pytest.mark.parametrize("where", ["missing", "plain-dir"], ids=["path-does-not-exist", "not-a-repository"])
def test_a_path_that_is_no_repository_is_a_source_error(tmp_path: Path, where: str) -> None:
    """A path that does not exist or holds no repository fails with a one-line SourceError naming it."""
    target = tmp_path / where
    if where == "plain-dir":
        target.mkdir()
    with pytest.raises(SourceError) as caught:
        open_source(str(target))
    assert str(target) in str(caught.value)


def test_reading_never_touches_the_work_tree(history: History) -> None:
    """Reading another revision leaves the checked-out files, the index and HEAD exactly as they were."""
    repo = history.repo
    repo.write({"platform/flavors.yaml": "uncommitted edit\n"})
    status_before = repo.git("status", "--porcelain")
    source = open_source(str(repo.path))
    assert source.read_file(history.c1, "platform/flavors.yaml") == b"kind: ResourceFlavor\n"
    assert repo.git("status", "--porcelain") == status_before
    assert (repo.path / "platform/flavors.yaml").read_text() == "uncommitted edit\n"


def test_read_file_returns_none_for_missing_paths_and_directories(history: History) -> None:
    """read_file gives None for a path that does not exist or names a directory, bytes for a file."""
    source = open_source(str(history.repo.path))
    assert source.read_file(history.c3, "nope.yaml") is None
    assert source.read_file(history.c3, "teams") is None
    assert source.read_file(history.c3, "/teams/b/queues.yml") == b"kind: LocalQueue\n"


def test_read_blob_returns_bytes_by_id_and_rejects_unknown_ids(history: History) -> None:
    """read_blob returns the exact bytes of a listed blob and a SourceError for an id that names no blob."""
    source = open_source(str(history.repo.path))
    (entry,) = source.list_files(history.c1, ["platform/"])
    assert source.read_blob(entry.blob_id) == b"kind: ResourceFlavor\n"
    with pytest.raises(SourceError):
        source.read_blob("0" * 40)
    with pytest.raises(SourceError, match="not a file"):
        source.read_blob(history.c1)


def test_symlinks_and_binary_content_are_handled(repo: GitRepo) -> None:
    """Symbolic links are never listed or read; non-UTF-8 bytes come back untouched."""
    repo.write({"q/data.yaml": "x: 1\n"})
    (repo.path / "q/link.yaml").symlink_to("data.yaml")
    (repo.path / "q/latin1.yaml").write_bytes(b"name: caf\xe9\n")
    sha = repo.commit("links")
    source = open_source(str(repo.path))
    assert [e.path for e in source.list_files(sha, ["q/"])] == ["q/data.yaml", "q/latin1.yaml"]
    assert source.read_file(sha, "q/link.yaml") is None
    assert source.read_file(sha, "q/latin1.yaml") == b"name: caf\xe9\n"


def test_list_files_pairs_paths_with_blob_ids(history: History) -> None:
    """list_files returns (path, blob id) pairs sorted by path, with ids equal to git's."""
    source = open_source(str(history.repo.path))
    files = source.list_files(history.c3, ["platform/", "teams/"])
    expected = [FileEntry(p, history.repo.git("rev-parse", f"{history.c3}:{p}"))
                for p in ("platform/flavors.yaml", "teams/a/queues.yaml", "teams/b/queues.yml")]
    assert list(files) == expected


def test_empty_repository_has_no_revisions(tmp_path: Path) -> None:
    """A repository without commits opens, and HEAD in it is an unknown revision."""
    empty = new_repo(tmp_path, "empty")
    with pytest.raises(UnknownRevisionError):
        open_source(str(empty.path)).resolve("HEAD")
