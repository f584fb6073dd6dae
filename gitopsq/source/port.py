"""The Source port: what the rest of gitopsq needs from a repository, and nothing more.

GitSource (pygit2) and DirectorySource (a plain directory) implement it; tests and the simulator may supply
their own. Commit arguments are the opaque ids ``resolve`` returns. Methods raise gitopsq.errors.SourceError
(UnknownRevisionError for an unknown revision); a missing file is a value (None), not an error.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from gitopsq.source.facts import CommitInfo, FileEntry, PathChange


@runtime_checkable
class Source(Protocol):
    display: str
    """How to name the repository to a user: a path or a credential-free URL."""

    def resolve(self, rev: str) -> str:
        """The commit id that branch, tag, commit id or ``HEAD`` ``rev`` names."""
        ...

    def list_files(
        self,
        commit: str,
        include: Sequence[str],
        exclude: Sequence[str] = (),
        *,
        suffixes: Sequence[str] | None = (".yaml", ".yml"),
    ) -> tuple[FileEntry, ...]:
        """(path, blob id) of the files the include/exclude patterns select at ``commit``, sorted by path."""
        ...

    def read_blob(self, blob_id: str) -> bytes:
        """The content of a blob that list_files or changed_paths named."""
        ...

    def read_file(self, commit: str, path: str) -> bytes | None:
        """The content of one file at ``commit``, or None when it does not exist."""
        ...

    def commit_info(self, commit: str) -> CommitInfo:
        """Metadata of ``commit``: parents, author, committer, message, trailers, raw signature."""
        ...

    def changed_paths(self, old: str | None, new: str) -> tuple[PathChange, ...]:
        """Files added, modified, deleted or renamed between two commits (old None: all added)."""
        ...


@runtime_checkable
class HistorySource(Source, Protocol):
    """A Source that can also answer history questions (GitSource; not a plain directory).

    ``plan`` uses merge_base to detect unrelated histories; signature checks and the audit trail use
    commits_between. On a shallow clone that cannot answer, these raise SourceError rather than guess.
    """

    def commits_between(self, old: str | None, new: str, *, first_parent: bool = False) -> tuple[CommitInfo, ...]:
        """Commits reachable from ``new`` but not from ``old``, oldest first."""
        ...

    def is_ancestor(self, ancestor: str, descendant: str) -> bool:
        """Whether ``ancestor`` is ``descendant`` or one of its ancestors."""
        ...

    def merge_base(self, a: str, b: str) -> str | None:
        """The best common ancestor, or None for unrelated histories."""
        ...
