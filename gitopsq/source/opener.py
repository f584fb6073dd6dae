"""Open a REPO argument: a local repository in place, a remote URL through its cache, or a plain directory."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import pygit2
from pygit2.enums import RepositoryOpenFlag

from gitopsq.errors import SourceError
from gitopsq.source.cache import cache_root, locked, open_cache
from gitopsq.source.credentials import Credentials
from gitopsq.source.directory import DirectorySource
from gitopsq.source.failures import git_errors
from gitopsq.source.locations import RepoLocation, parse_location
from gitopsq.source.port import Source
from gitopsq.source.remote import RemoteMirror
from gitopsq.source.repository import GitSource

DEFAULT_DEPTH = 1
DEFAULT_TIMEOUT_SECONDS = 120.0


def open_source(
    repo: str,
    *,
    cache_dir: Path | None = None,
    depth: int = DEFAULT_DEPTH,
    timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS,
    credentials: Credentials | None = None,
    env: Mapping[str, str] | None = None,
) -> GitSource:
    """A GitSource for ``repo``: a local work tree or bare repository (read in place, nothing fetched), or a
    URL (https, http, ssh, git, file, scp-like ``user@host:path``) mirrored in a bare cache under ``cache_dir``.

    Opening a URL touches the network only when a revision is resolved. ``depth`` is the shallow depth of a
    first fetch (0 = full history); ``timeout_seconds`` bounds each network operation. Credentials default to
    the environment (docs/source.md). Raises SourceError when the path is not a Git repository.
    """
    location = parse_location(repo)
    if not location.is_remote:
        return _open_local(location)
    root = cache_root(cache_dir, env)
    try:
        with locked(root, location):
            cache = open_cache(root, location)
    except OSError as exc:
        raise SourceError(f"cannot use the cache directory {root}: {exc.strerror or exc} "
                          "(set GITOPSQ_CACHE_DIR to a writable directory)", url=location.display) from exc
    creds = credentials if credentials is not None else Credentials.from_environment(env)
    mirror = RemoteMirror(cache, location, root, creds, depth=depth, timeout_seconds=timeout_seconds)
    return GitSource(cache, location.display, mirror)


def open_directory(path: str | Path) -> DirectorySource:
    """The files of a plain directory as a single revision ``WORKTREE`` (no Git involved)."""
    return DirectorySource(Path(path).expanduser())


def open_any(
    repo: str,
    *,
    cache_dir: Path | None = None,
    depth: int = DEFAULT_DEPTH,
    timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS,
    credentials: Credentials | None = None,
    env: Mapping[str, str] | None = None,
) -> Source:
    """open_source, except that a local directory that is not the root of a Git repository is read as a plain
    directory (``gitopsq check repo-template``)."""
    location = parse_location(repo)
    if not location.is_remote:
        assert location.path is not None
        if location.path.is_dir() and not _is_repository(location.path):
            return open_directory(location.path)
    return open_source(repo, cache_dir=cache_dir, depth=depth, timeout_seconds=timeout_seconds,
                       credentials=credentials, env=env)


def _is_repository(path: Path) -> bool:
    try:
        pygit2.Repository(str(path), RepositoryOpenFlag.NO_SEARCH)
    except pygit2.GitError:
        return False
    return True


def _open_local(location: RepoLocation) -> GitSource:
    path = location.path
    assert path is not None
    if not path.exists():
        raise SourceError(f"no such repository: {location.display} does not exist", url=location.display)
    try:
        repo = pygit2.Repository(str(path), RepositoryOpenFlag.NO_SEARCH)
    except pygit2.GitError as exc:
        if "not owned" in str(exc) or "owner" in str(exc).lower():
            with git_errors("open", location.display):
                raise
        raise SourceError(f"{location.display} is not a Git repository (give the root of a work tree, "
                          "a bare repository, or a URL)", url=location.display) from None
    return GitSource(repo, location.display)
