"""What changed between revisions: paths (with renames), commit ranges, ancestry and merge bases."""

from __future__ import annotations

from pathlib import Path

import pytest

from gitopsq.errors import SourceError
from gitopsq.source import PathChange, open_source

from .conftest import GitRepo, History

QUEUE = "kind: ClusterQueue\nmetadata:\n  name: {name}\nspec:\n  cohort: research\n  quota: 10\n"


def test_changed_paths_reports_add_modify_delete_and_rename(repo: GitRepo) -> None:
    """Each kind of change is reported once, with the blob ids on each side, sorted by path."""
    old = repo.commit("base", {
        "teams/a/cq.yaml": QUEUE.format(name="a"),
        "teams/b/cq.yaml": QUEUE.format(name="b"),
        "teams/c/cq.yaml": QUEUE.format(name="c"),
    })
    new = repo.commit("change", {
        "teams/a/cq.yaml": QUEUE.format(name="a").replace("10", "20"),   # modified
        "teams/b/cq.yaml": None,                                          # deleted
        "teams/c/cq.yaml": None,                                          # renamed below
        "teams/d/cq.yaml": QUEUE.format(name="c"),
        "teams/e/new.yaml": "kind: LocalQueue\n",                         # added
    })
    blob = lambda rev, path: repo.git("rev-parse", f"{rev}:{path}")  # noqa: E731
    source = open_source(str(repo.path))
    assert source.changed_paths(old, new) == (
        PathChange("modified", "teams/a/cq.yaml", "teams/a/cq.yaml", blob(old, "teams/a/cq.yaml"),
                   blob(new, "teams/a/cq.yaml"), "file", "file"),
        PathChange("deleted", "teams/b/cq.yaml", "teams/b/cq.yaml", blob(old, "teams/b/cq.yaml"), None, "file"),
        PathChange("renamed", "teams/d/cq.yaml", "teams/c/cq.yaml", blob(old, "teams/c/cq.yaml"),
                   blob(new, "teams/d/cq.yaml"), "file", "file"),
        PathChange("added", "teams/e/new.yaml", None, None, blob(new, "teams/e/new.yaml"), None, "file"),
    )


def test_changed_paths_reports_links_submodules_and_type_changes(repo: GitRepo) -> None:
    """A symbolic link, a submodule (gitlink) and a file turned into a link are changes to their paths, with no
    blob id to read on the side that is not a regular file."""
    old = repo.commit("base", {"teams/a/cq.yaml": QUEUE.format(name="a"), "teams/a/turn.yaml": "x: 1\n"})
    (repo.path / "teams/a/link.yaml").symlink_to("cq.yaml")
    (repo.path / "teams/a/turn.yaml").unlink()
    (repo.path / "teams/a/turn.yaml").symlink_to("cq.yaml")
    repo.git("add", "-A")
    repo.git("update-index", "--add", "--cacheinfo", f"160000,{old},teams/a/sub")
    repo.git("commit", "-q", "-m", "links")  # not `add -A`: that would drop the gitlink without a checkout
    new = repo.git("rev-parse", "HEAD")
    changes = {c.path: c for c in open_source(str(repo.path)).changed_paths(old, new)}
    assert changes["teams/a/link.yaml"].new_kind == "link" and changes["teams/a/link.yaml"].new_blob_id is None
    assert changes["teams/a/sub"].new_kind == "submodule" and changes["teams/a/sub"].new_blob_id is None
    turned = [c for c in open_source(str(repo.path)).changed_paths(old, new) if c.path == "teams/a/turn.yaml"]
    assert {(c.old_kind, c.new_kind) for c in turned} <= {("file", "link"), ("file", None), (None, "link")}
    assert any(c.new_kind == "link" for c in turned) and any(c.old_kind == "file" for c in turned)


def test_changed_paths_from_nothing_lists_every_file_as_added(history: History) -> None:
    """With no old revision (a first sync), every file of the new revision is added."""
    source = open_source(str(history.repo.path))
    changes = source.changed_paths(None, history.c2)
    assert [(c.status, c.path) for c in changes] == [
        ("added", "README.md"), ("added", "platform/flavors.yaml"), ("added", "teams/a/queues.yaml")]


def test_changed_paths_between_equal_trees_is_empty(history: History) -> None:
    """Two commits with the same tree have no changed paths."""
    empty = history.repo.commit("nothing", None)
    assert open_source(str(history.repo.path)).changed_paths(history.c3, empty) == ()


def test_commits_between_lists_new_commits_oldest_first(history: History) -> None:
    """commits_between gives the commits of new not reachable from old, oldest first, with metadata."""
    source = open_source(str(history.repo.path))
    commits = source.commits_between(history.c1, history.c3)
    assert [c.sha for c in commits] == [history.c2, history.c3]
    assert commits[0].parents == (history.c1,) and commits[0].summary == "second"
    assert commits[0].author.email == "ann@example.com" and commits[0].committer.name == "Carl Committer"


def test_first_parent_walk_shows_the_merge_not_the_branch_commits(history: History) -> None:
    """Following first parents yields the merge commit itself and hides the merged branch's commits."""
    repo = history.repo
    repo.git("merge", "-q", "--no-ff", "feature", "-m", "Merge feature\n\nReviewed-by: Rita <rita@example.com>")
    merge = repo.git("rev-parse", "HEAD")
    source = open_source(str(repo.path))
    all_commits = source.commits_between(history.c3, merge)
    first_parent = source.commits_between(history.c3, merge, first_parent=True)
    assert history.f1 in [c.sha for c in all_commits]
    assert [c.sha for c in first_parent][-1] == merge and history.f1 not in [c.sha for c in first_parent]
    info = source.commit_info(merge)
    assert info.is_merge and info.parents[1] == history.f1
    assert info.reviewed_by == ("Rita <rita@example.com>",)


ANCESTRY = [
    pytest.param("c1", "c3", True, id="root-is-ancestor-of-tip"),
    pytest.param("c3", "c3", True, id="commit-is-its-own-ancestor"),
    pytest.param("c3", "c1", False, id="tip-is-not-ancestor-of-root"),
    pytest.param("f1", "c3", False, id="sibling-branch-is-not-ancestor"),
]


@pytest.mark.parametrize(("a", "d", "expected"), ANCESTRY)
def test_is_ancestor(history: History, a: str, d: str, expected: bool) -> None:
    """is_ancestor answers as `git merge-base --is-ancestor` does."""
    source = open_source(str(history.repo.path))
    assert source.is_ancestor(getattr(history, a), getattr(history, d)) is expected


def test_merge_base_of_branches_and_of_unrelated_histories(history: History) -> None:
    """Diverged branches meet at their fork point; an orphan branch has no merge base (unrelated histories)."""
    repo = history.repo
    source = open_source(str(repo.path))
    assert source.merge_base(history.c3, history.f1) == history.c2
    repo.git("checkout", "-q", "--orphan", "other")
    orphan = repo.commit("unrelated root", {"x.yaml": "a: 1\n"})
    source = open_source(str(repo.path))
    assert source.merge_base(history.c3, orphan) is None
    assert source.is_ancestor(history.c1, orphan) is False


def test_shallow_local_clone_refuses_to_call_histories_unrelated(history: History, tmp_path: Path) -> None:
    """In a shallow clone, a missing merge base is a SourceError asking for full history, never None."""
    clone = GitRepo(tmp_path / "shallow", history.repo.home)
    history.repo.git("clone", "-q", "--depth=1", "--no-single-branch", history.repo.path.as_uri(), str(clone.path))
    source = open_source(str(clone.path))
    head, feature = source.resolve("origin/main"), source.resolve("origin/feature")
    with pytest.raises(SourceError, match="shallow"):
        source.merge_base(head, feature)
    with pytest.raises(SourceError, match="shallow"):
        source.commits_between(None, head)
    assert source.commit_info(head).parents == (history.c2,)
