"""DirectorySource: the Source port over a plain directory (no Git), e.g. ``gitopsq check repo-template``.

It has exactly one revision, the files as they are now, named ``WORKTREE`` (``HEAD`` is accepted as an alias).
Blob ids are the ids Git would give the same bytes, so caches keyed by blob id work across both sources. The
single revision has no parents, no author and no signature.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import pygit2

from gitopsq.errors import SourceError
from gitopsq.source.facts import CommitInfo, FileEntry, PathChange, Person
from gitopsq.source.failures import unknown_revision
from gitopsq.source.globs import PathFilter

WORKTREE = "WORKTREE"
# A file larger than the manifest loader reads (gitopsq.manifests.yamldoc.YamlLimits.max_bytes) is listed by its
# size, not read: its id names the path and size, and the pipeline refuses it from `blob_size` alone.
LARGE_FILE_BYTES = 2 * 1024 * 1024
_NOBODY = Person(name="", email="", timestamp=0, offset_minutes=0)


class DirectorySource:
    """Reads files from a directory tree; skips ``.git`` and symbolic links, never leaves the root."""

    def __init__(self, root: Path) -> None:
        if not root.is_dir():
            raise SourceError(f"{root} is not a directory")
        self.root = root.resolve()
        self.display = str(root)
        self._blobs: dict[str, bytes] = {}
        self._large: dict[str, tuple[Path, int]] = {}

    def resolve(self, rev: str) -> str:
        if rev.strip().upper() in (WORKTREE, "HEAD"):
            return WORKTREE
        raise unknown_revision(rev, self.display, "a plain directory (not a Git repository) has only HEAD")

    def _check(self, commit: str) -> None:
        if commit != WORKTREE:
            raise unknown_revision(commit, self.display, "a plain directory has only the revision WORKTREE")

    def list_files(
        self,
        commit: str,
        include: Sequence[str],
        exclude: Sequence[str] = (),
        *,
        suffixes: Sequence[str] | None = (".yaml", ".yml"),
    ) -> tuple[FileEntry, ...]:
        self._check(commit)
        path_filter = PathFilter.of(include, exclude, suffixes)
        found: dict[str, str] = {}
        for prefix in path_filter.roots():
            start = self.root / prefix if prefix else self.root
            if start.is_symlink():
                continue
            if start.is_file():
                if path_filter.selects(prefix):
                    found[prefix] = self._store(start)
                continue
            for directory, dirnames, filenames in os.walk(start):
                dirnames[:] = [d for d in dirnames if d != ".git" and not Path(directory, d).is_symlink()]
                for name in filenames:
                    full = Path(directory, name)
                    relative = full.relative_to(self.root).as_posix()
                    if not full.is_symlink() and path_filter.selects(relative):
                        found[relative] = self._store(full)
        return tuple(FileEntry(path, found[path]) for path in sorted(found))

    def _store(self, path: Path) -> str:
        try:
            size = path.stat().st_size
            if size > LARGE_FILE_BYTES:
                blob_id = f"large-{size}-{path.relative_to(self.root).as_posix()}"
                self._large[blob_id] = (path, size)
                return blob_id
            data = path.read_bytes()
        except OSError as exc:
            raise SourceError(f"cannot read {path}: {exc.strerror}") from None
        blob_id = str(pygit2.hash(data))
        self._blobs[blob_id] = data
        return blob_id

    def blob_size(self, blob_id: str) -> int:
        """The size of a listed file, without reading a large one."""
        if blob_id in self._large:
            return self._large[blob_id][1]
        return len(self.read_blob(blob_id))

    def read_blob(self, blob_id: str) -> bytes:
        large = self._large.get(blob_id)
        if large is not None:
            try:
                return large[0].read_bytes()
            except OSError as exc:
                raise SourceError(f"cannot read {large[0]}: {exc.strerror}") from None
        try:
            return self._blobs[blob_id]
        except KeyError:
            raise SourceError(f"no file with blob id {blob_id} was listed in {self.display}") from None

    def read_file(self, commit: str, path: str) -> bytes | None:
        self._check(commit)
        candidate = self.root / path.strip("/")
        if candidate.is_symlink() or not candidate.is_file():
            return None
        if not candidate.resolve().is_relative_to(self.root):
            return None
        try:
            return candidate.read_bytes()
        except OSError as exc:
            raise SourceError(f"cannot read {candidate}: {exc.strerror}") from None

    def commit_info(self, commit: str) -> CommitInfo:
        self._check(commit)
        return CommitInfo(sha=WORKTREE, parents=(), author=_NOBODY, committer=_NOBODY, message="",
                          trailers=(), signature=None, signed_payload=None)

    def changed_paths(self, old: str | None, new: str) -> tuple[PathChange, ...]:
        self._check(new)
        if old == new:
            return ()
        if old is not None:
            self._check(old)
        files = self.list_files(new, ["**"], suffixes=None)
        return tuple(PathChange("added", f.path, None, None, f.blob_id) for f in files)
