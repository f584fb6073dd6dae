"""Remote URLs are mirrored into a bare per-remote cache: shallow where possible, reused, never with a work tree."""

from __future__ import annotations

import shutil
import socket
import time
from pathlib import Path

import pygit2
import pytest

from gitopsq.errors import AuthenticationError, SourceError, UnknownRevisionError
from gitopsq.source import open_source
from gitopsq.source.cache import cache_root

from .conftest import Daemon, History, bare_clone, free_port


@pytest.fixture
def served(history: History, git_daemon: Daemon) -> str:
    """The standard history published by git daemon; returns its git:// URL."""
    bare_clone(history.repo, git_daemon.base / "queues.git")
    return git_daemon.url("queues.git")


REMOTE_REVISIONS = [
    pytest.param("main", "c3", id="branch"),
    pytest.param("origin/feature", "f1", id="remote-tracking-name"),
    pytest.param("refs/heads/feature", "f1", id="full-ref-name"),
    pytest.param("light-tag", "c1", id="lightweight-tag"),
    pytest.param("v1.0", "c2", id="annotated-tag"),
    pytest.param("HEAD", "c3", id="remote-HEAD"),
    pytest.param("main~2", "c1", id="ancestry-suffix-deepens-history"),
]


@pytest.mark.parametrize(("rev", "expected"), REMOTE_REVISIONS)
def test_git_daemon_revisions_resolve(served: str, history: History, cache_dir: Path, rev: str,
                                      expected: str) -> None:
    """Over git://, branches, tags, HEAD and ancestry suffixes resolve to the commit the remote holds."""
    source = open_source(served, cache_dir=cache_dir)
    assert source.resolve(rev) == getattr(history, expected)


@pytest.mark.parametrize("length", [40, 8], ids=["full-sha", "abbreviated-sha"])
def test_commit_ids_on_a_remote_fetch_history_then_resolve(served: str, history: History, cache_dir: Path,
                                                           length: int) -> None:
    """A commit id that no ref points at is found after fetching all branches and tags with full history."""
    source = open_source(served, cache_dir=cache_dir)
    assert source.resolve(history.c1[:length]) == history.c1


def test_branch_fetch_is_shallow_and_bare(served: str, history: History, cache_dir: Path) -> None:
    """Resolving a branch over a smart transport fetches one commit deep into a bare cache with no work tree."""
    source = open_source(served, cache_dir=cache_dir)
    sha = source.resolve("main")
    cache = pygit2.Repository(str(source.path))
    assert cache.is_bare and cache.is_shallow
    assert history.c2 not in cache.odb  # depth 1: the parent commit was not fetched
    assert source.read_file(sha, "teams/b/queues.yml") == b"kind: LocalQueue\n"
    assert source.path.parent == cache_dir
    assert not any(p.name in {"teams", "platform", "README.md"} for p in source.path.iterdir())


def test_history_questions_unshallow_the_cache(served: str, history: History, cache_dir: Path) -> None:
    """Ancestry after a shallow fetch fetches the full history first, so it never reports unrelated histories."""
    source = open_source(served, cache_dir=cache_dir)
    head = source.resolve("main")
    feature = source.resolve("feature")
    assert source.merge_base(head, feature) == history.c2
    assert source.is_ancestor(history.c1, head)
    assert not pygit2.Repository(str(source.path)).is_shallow
    assert [c.sha for c in source.commits_between(None, head)] == [history.c1, history.c2, history.c3]
    assert source.commit_info(history.c1).parents == ()


def test_second_open_reuses_the_cache(served: str, cache_dir: Path) -> None:
    """A second run finds the revision in the same cache directory and fetches nothing."""
    first = open_source(served, cache_dir=cache_dir)
    sha = first.resolve("main")
    assert first.fetch_count == 1 and first.last_fetch is not None and first.last_fetch.depth == 1
    packs = sorted(p.name for p in (first.path / "objects" / "pack").iterdir())
    second = open_source(served, cache_dir=cache_dir)
    assert second.path == first.path
    assert second.resolve("main") == sha
    assert second.fetch_count == 0
    assert sorted(p.name for p in (second.path / "objects" / "pack").iterdir()) == packs
    assert [p.name for p in cache_dir.iterdir() if p.is_dir()] == [first.path.name]


def test_new_commits_on_the_remote_are_fetched_incrementally(served: str, history: History,
                                                            git_daemon: Daemon, cache_dir: Path) -> None:
    """When the remote branch moves, the next resolve fetches the new commit into the existing cache."""
    source = open_source(served, cache_dir=cache_dir)
    source.resolve("main")
    history.repo.git("remote", "add", "served", str(git_daemon.base / "queues.git"))
    new = history.repo.commit("fourth", {"teams/c/q.yaml": "kind: LocalQueue\n"})
    history.repo.git("push", "-q", "served", "main")
    again = open_source(served, cache_dir=cache_dir)
    assert again.resolve("main") == new and again.fetch_count == 1
    assert [c.path for c in again.changed_paths(history.c3, new)] == ["teams/c/q.yaml"]


def test_file_url_fetches_in_full(history: History, tmp_path: Path, cache_dir: Path) -> None:
    """A file:// remote, whose transport cannot fetch shallowly, is fetched in full into the cache."""
    bare = bare_clone(history.repo, tmp_path / "origin.git")
    source = open_source(bare.as_uri(), cache_dir=cache_dir)
    assert source.resolve("v1.0") == history.c2
    assert source.is_remote and not pygit2.Repository(str(source.path)).is_shallow
    assert source.resolve(history.c1[:10]) == history.c1


def test_unknown_ref_on_a_remote_names_ref_and_url(served: str, cache_dir: Path) -> None:
    """An unknown branch on a remote is an UnknownRevisionError naming the ref and the URL, in one line."""
    with pytest.raises(UnknownRevisionError) as caught:
        open_source(served, cache_dir=cache_dir).resolve("release-9")
    assert "'release-9'" in str(caught.value) and served in str(caught.value)


def test_closed_port_is_unreachable(cache_dir: Path) -> None:
    """A remote on a closed port is a SourceError (exit 3) saying it cannot be reached, not an auth failure."""
    url = f"git://127.0.0.1:{free_port()}/nothing.git"
    with pytest.raises(SourceError) as caught:
        open_source(url, cache_dir=cache_dir, timeout_seconds=5).resolve("main")
    assert not isinstance(caught.value, AuthenticationError | UnknownRevisionError)
    assert "cannot reach" in str(caught.value) and "\n" not in str(caught.value)
    assert caught.value.exit_code == 3


def test_missing_repository_on_a_live_server_is_a_source_error(git_daemon: Daemon, cache_dir: Path) -> None:
    """A URL the server does not export fails as a SourceError naming the URL."""
    with pytest.raises(SourceError) as caught:
        open_source(git_daemon.url("absent.git"), cache_dir=cache_dir).resolve("main")
    assert git_daemon.url("absent.git") in str(caught.value)


def test_cache_root_follows_the_environment(tmp_path: Path) -> None:
    """The cache root is the argument, else GITOPSQ_CACHE_DIR, else $XDG_CACHE_HOME/gitopsq/repos."""
    assert cache_root(tmp_path / "arg", {"GITOPSQ_CACHE_DIR": "/elsewhere"}) == tmp_path / "arg"
    assert cache_root(None, {"GITOPSQ_CACHE_DIR": str(tmp_path / "env")}) == tmp_path / "env"
    assert cache_root(None, {"XDG_CACHE_HOME": str(tmp_path / "xdg")}) == tmp_path / "xdg" / "gitopsq" / "repos"
    assert cache_root(None, {}) == Path.home() / ".cache" / "gitopsq" / "repos"


def test_env_cache_dir_is_used_by_open_source(served: str, tmp_path: Path) -> None:
    """open_source without cache_dir puts the mirror under GITOPSQ_CACHE_DIR."""
    source = open_source(served, env={"GITOPSQ_CACHE_DIR": str(tmp_path / "envcache")})
    source.resolve("main")
    assert source.path.parent == tmp_path / "envcache"


def test_damaged_cache_is_rebuilt(served: str, cache_dir: Path) -> None:
    """A cache directory that is not a repository (an interrupted first run) is replaced, not trusted."""
    first = open_source(served, cache_dir=cache_dir)
    path = first.path
    for child in sorted(path.rglob("*"), reverse=True):
        child.unlink() if child.is_file() else child.rmdir()
    (path / "garbage").write_text("x")
    second = open_source(served, cache_dir=cache_dir)
    assert second.resolve("main") and (second.path / "HEAD").exists()
    assert (path / "objects").is_dir()


def test_ssh_remote_on_a_closed_port_is_unreachable(cache_dir: Path, tmp_path: Path) -> None:
    """An ssh:// remote that refuses connections is a SourceError, and the known_hosts override is undone."""
    known = tmp_path / "known_hosts"
    known.write_text("")
    home_before = pygit2.settings.homedir
    url = f"ssh://git@127.0.0.1:{free_port()}/org/queues.git"
    env = {"GITOPSQ_SSH_KNOWN_HOSTS": str(known), "GITOPSQ_SSH_KEY_FILE": str(tmp_path / "id")}
    with pytest.raises(SourceError, match="cannot reach"):
        open_source(url, cache_dir=cache_dir, env=env, timeout_seconds=5).resolve("main")
    assert pygit2.settings.homedir == home_before


def test_silent_server_times_out_instead_of_hanging(cache_dir: Path) -> None:
    """A server that accepts the connection but never answers fails with a timeout SourceError, not a hang."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        url = f"git://127.0.0.1:{listener.getsockname()[1]}/queues.git"
        started = time.monotonic()
        with pytest.raises(SourceError) as caught:
            open_source(url, cache_dir=cache_dir, timeout_seconds=1).resolve("main")
    assert time.monotonic() - started < 10
    assert "timed out" in str(caught.value) or "timeout" in str(caught.value).lower()


def test_cached_commit_id_resolves_while_the_remote_is_down(history: History, git_daemon: Daemon,
                                                            cache_dir: Path) -> None:
    """A full commit id already in the cache resolves without contacting the remote (which is gone)."""
    bare_clone(history.repo, git_daemon.base / "gone.git")
    url = git_daemon.url("gone.git")
    sha = open_source(url, cache_dir=cache_dir).resolve("main")
    shutil.rmtree(git_daemon.base / "gone.git")
    offline = open_source(url, cache_dir=cache_dir)
    assert offline.resolve(sha) == sha and offline.fetch_count == 0
    with pytest.raises(SourceError):
        offline.resolve("main")


def test_unwritable_cache_root_is_a_clear_source_error(served: str, tmp_path: Path) -> None:
    """A cache root that cannot be created fails with one line naming it and GITOPSQ_CACHE_DIR."""
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where the cache root should be")
    with pytest.raises(SourceError, match="GITOPSQ_CACHE_DIR") as caught:
        open_source(served, cache_dir=blocker / "cache")
    assert str(blocker) in str(caught.value)
