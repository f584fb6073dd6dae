"""The per-remote bare cache: one directory per credential-free URL, reused across runs and processes.

Layout: ``<root>/<sha256 of URL>/`` is a bare repository whose ``origin`` remote is the URL; ``<root>/<sha>.lock``
serialises fetches between processes (flock). The root is, first match wins: the ``cache_dir`` argument,
``$GITOPSQ_CACHE_DIR``, ``$XDG_CACHE_HOME/gitopsq/repos``, ``~/.cache/gitopsq/repos``.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

import pygit2

from gitopsq.source.failures import git_errors
from gitopsq.source.locations import RepoLocation

HEADS_REFSPEC = "+refs/heads/*:refs/remotes/origin/*"


def cache_root(explicit: Path | None = None, env: Mapping[str, str] | None = None) -> Path:
    env = os.environ if env is None else env
    if explicit is not None:
        return Path(explicit).expanduser()
    if env.get("GITOPSQ_CACHE_DIR"):
        return Path(env["GITOPSQ_CACHE_DIR"]).expanduser()
    xdg = env.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(xdg).expanduser() / "gitopsq" / "repos"


def cache_path(root: Path, location: RepoLocation) -> Path:
    return root / location.cache_key


@contextmanager
def locked(root: Path, location: RepoLocation) -> Iterator[None]:
    """Hold the remote's inter-process lock (blocking) for the duration of the block."""
    root.mkdir(parents=True, exist_ok=True)
    lock_file = root / f"{location.cache_key}.lock"
    with lock_file.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def open_cache(root: Path, location: RepoLocation) -> pygit2.Repository:
    """The bare cache repository of ``location``, created empty on first use (call while holding the lock)."""
    assert location.url is not None
    path = cache_path(root, location)
    with git_errors("open the cache of", location.display):
        if path.is_dir():
            try:
                repo = pygit2.Repository(str(path), pygit2.enums.RepositoryOpenFlag.NO_SEARCH)
            except pygit2.GitError:
                # A half-written or damaged cache: it holds nothing we cannot fetch again.
                shutil.rmtree(path)
            else:
                _point_origin(repo, location.url)
                return repo
        root.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=".new-", dir=root))
        repo = pygit2.init_repository(str(staging), bare=True)
        repo.remotes.create("origin", location.url, HEADS_REFSPEC)
        staging.rename(path)
        return pygit2.Repository(str(path), pygit2.enums.RepositoryOpenFlag.NO_SEARCH)


def _point_origin(repo: pygit2.Repository, url: str) -> None:
    try:
        origin = repo.remotes["origin"]
    except KeyError:
        repo.remotes.create("origin", url, HEADS_REFSPEC)
        return
    if origin.url != url:
        repo.remotes.set_url("origin", url)
