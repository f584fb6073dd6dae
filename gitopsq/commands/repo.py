"""Where REPO is, as the commands read it: the root found from a subdirectory, and what is not committed there.

`locate` gives ``gitopsq check .`` run inside a repository the meaning ``git`` gives it: the nearest enclosing
directory that is a Git work tree's root or holds ``gitopsq.yaml`` (a queue repository kept inside another
project, such as ``repo-template/``), whichever comes first walking upwards. URLs and roots are left as given.
`uncommitted` lists the paths whose state on disk differs from HEAD, for the notice `check`/`render` print.
"""

from __future__ import annotations

from pathlib import Path

import click

CONFIG_FILE = "gitopsq.yaml"
SHOWN_PATHS = 5


def _local_dir(repo: str) -> Path | None:
    if "://" in repo or repo.startswith("file:") or (":" in repo and "@" in repo.split(":", 1)[0]):
        return None
    path = Path(repo).expanduser()
    return path if path.is_dir() else None


def _is_root(path: Path) -> bool:
    return (path / ".git").exists() or (path / CONFIG_FILE).is_file()


def locate(repo: str) -> str:
    """REPO, or the root of the repository REPO is a subdirectory of (see the module docstring)."""
    path = _local_dir(repo)
    if path is None or _is_root(path):
        return repo
    resolved = path.resolve()
    for parent in resolved.parents:
        if _is_root(parent):
            return str(parent)
    return repo


def why_plain(repo: str) -> str:
    """Why REPO is read as a plain directory: what `locate` did not find."""
    path = _local_dir(repo)
    if path is not None and not _is_root(path):
        return (f"{repo} is not inside a Git repository and no directory above it holds {CONFIG_FILE}")
    return f"{repo} is not the root of a Git repository"


def uncommitted(repo: str) -> list[str]:
    """Paths of REPO's work tree that differ from HEAD (changed, staged, deleted or new, not ignored)."""
    # Imported on use for CLI start-up time: pygit2 (~70 ms) only when a dirty-tree note is asked for.
    import pygit2

    path = _local_dir(repo)
    if path is None:
        return []
    try:
        repository = pygit2.Repository(str(path), pygit2.enums.RepositoryOpenFlag.NO_SEARCH)
        if repository.is_bare:
            return []
        status = repository.status(untracked_files="all", ignored=False)
    except (pygit2.GitError, KeyError, ValueError):
        return []
    return sorted(p for p, flags in status.items() if flags not in (pygit2.enums.FileStatus.CURRENT,
                                                                      pygit2.enums.FileStatus.IGNORED))


def dirty_notice(display: str, commit: str, paths: list[str]) -> str:
    """The stderr notice for a check of HEAD in a work tree with uncommitted changes."""
    shown = ", ".join(paths[:SHOWN_PATHS]) + (f" and {len(paths) - SHOWN_PATHS} more" if len(paths) > SHOWN_PATHS
                                               else "")
    count = f"{len(paths)} uncommitted path{'s' * (len(paths) != 1)}"
    return (f"note: {display} has {count} ({shown}); checked the commit HEAD ({commit[:12]}), not the files on "
            "disk: commit them, or add --worktree to check the files on disk")


def warn_if_dirty(repo: str, display: str, commit: str, head: str | None) -> None:
    """Print `dirty_notice` on stderr when the checked commit is HEAD and the work tree has changes."""
    if head is None or commit != head:
        return
    paths = uncommitted(repo)
    if paths:
        click.echo(dirty_notice(display, commit, paths), err=True)
