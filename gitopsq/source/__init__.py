"""The Git source (shell): read revisions of a queue-definition repository, local or remote, without a work tree.

Public API (docs/source.md):
    open_source(repo, *, cache_dir=None, depth=1, timeout_seconds=120, credentials=None, env=None) -> GitSource
    open_any(repo, ...) -> Source           (a plain directory becomes a DirectorySource)
    open_directory(path) -> DirectorySource
    Source                                  the port the rest of gitopsq depends on
    verify_signature(commit, keys) -> SignatureStatus   (gitopsq.source.signatures)
"""

from gitopsq.source.credentials import Credentials
from gitopsq.source.directory import WORKTREE, DirectorySource
from gitopsq.source.facts import (
    CommitInfo,
    FileEntry,
    PathChange,
    Person,
    SignatureStatus,
    Trailer,
)
from gitopsq.source.globs import PathFilter, matches
from gitopsq.source.opener import open_any, open_directory, open_source
from gitopsq.source.port import HistorySource, Source
from gitopsq.source.repository import GitSource

__all__ = [
    "WORKTREE",
    "CommitInfo",
    "Credentials",
    "DirectorySource",
    "FileEntry",
    "GitSource",
    "HistorySource",
    "PathChange",
    "PathFilter",
    "Person",
    "SignatureStatus",
    "Source",
    "Trailer",
    "matches",
    "open_any",
    "open_directory",
    "open_source",
]
