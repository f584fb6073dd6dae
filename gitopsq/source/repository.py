"""GitSource: read revisions of a repository straight from its object database, never through a work tree."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

import pygit2
from pygit2.enums import DeltaStatus, DiffFind, FileMode, ObjectType, SortMode

from gitopsq.errors import SourceError
from gitopsq.source.commits import commit_info_of
from gitopsq.source.facts import ChangeStatus, CommitInfo, EntryKind, FileEntry, PathChange
from gitopsq.source.failures import ambiguous_revision, git_errors, unknown_revision
from gitopsq.source.globs import PathFilter
from gitopsq.source.refnames import AmbiguousRefError, candidates, is_full_commit_id, pick_ref
from gitopsq.source.remote import FetchStats, RemoteMirror
from gitopsq.source.tree_rules import TreeProblem, commit_tree_problems, tree_refusal

_GOOD_TREES_KEPT = 200_000  # tree ids found sound (git fsck's tree rules): a tree is checked once, then trusted
_LISTINGS_KEPT = 16  # memoised listings per source: plan reads two revisions, the controller one at a time
_HEX = re.compile(r"^[0-9a-fA-F]{4,40}$")
_SUFFIX = re.compile(r"^(?P<base>.+?)(?P<suffix>[~^].*)$")
_FILE_MODES = frozenset({FileMode.BLOB, FileMode.BLOB_EXECUTABLE})
_STATUS: dict[DeltaStatus, ChangeStatus] = {
    DeltaStatus.ADDED: "added",
    DeltaStatus.COPIED: "added",
    DeltaStatus.DELETED: "deleted",
    DeltaStatus.MODIFIED: "modified",
    DeltaStatus.TYPECHANGE: "modified",
    DeltaStatus.RENAMED: "renamed",
}
_KINDS: dict[int, EntryKind] = {FileMode.BLOB: "file", FileMode.BLOB_EXECUTABLE: "executable",
                                 FileMode.LINK: "link", FileMode.COMMIT: "submodule"}
YAML_SUFFIXES = (".yaml", ".yml")


class GitSource:
    """One repository, local (read in place) or a remote's bare cache. Commit arguments are commit ids.

    Implements the :class:`gitopsq.source.port.Source` protocol, plus history questions used by plan and audit.
    """

    def __init__(self, repo: pygit2.Repository, display: str, mirror: RemoteMirror | None = None) -> None:
        self._local_repo = repo
        self.display = display
        self._mirror = mirror
        self._listings: dict[tuple[str, PathFilter], tuple[FileEntry, ...]] = {}
        self._good_trees: set[bytes] = set()

    @property
    def _repo(self) -> pygit2.Repository:
        # A mirror reopens its repository after each fetch; always read through it.
        return self._local_repo if self._mirror is None else self._mirror.repo

    @property
    def path(self) -> Path:
        """The git directory read (for a remote, its cache)."""
        return Path(self._repo.path)

    @property
    def is_remote(self) -> bool:
        return self._mirror is not None

    @property
    def fetch_count(self) -> int:
        """How many fetches this instance made (0 for local repositories and fully cached revisions)."""
        return 0 if self._mirror is None else self._mirror.fetch_count

    @property
    def last_fetch(self) -> FetchStats | None:
        """Refspecs, depth, objects, bytes and seconds of this instance's latest fetch (None if none)."""
        return None if self._mirror is None else self._mirror.last_fetch

    # -- revisions -----------------------------------------------------------------------------------------

    def resolve(self, rev: str) -> str:
        """The full commit id ``rev`` names: branch (local or remote-tracking), tag, commit id, ``HEAD``,
        or any of those followed by ``~N`` / ``^N`` (gitopsq.source.refnames: a full commit id is always that
        commit; a name that is both a branch and a tag is refused). Raises UnknownRevisionError."""
        rev = rev.strip()
        if not rev or rev.startswith("-") or any(ch in rev for ch in "\n\r\0 "):
            raise unknown_revision(rev, self.display, "not a valid revision name")
        suffix_match = _SUFFIX.match(rev)
        if suffix_match is not None:
            base = self.resolve(suffix_match.group("base"))
            self._need_history()
            return self._revparse(base + suffix_match.group("suffix"), rev)
        if is_full_commit_id(rev):
            return self._full_id(rev)
        if self._mirror is None:
            return self._resolve_locally(rev)
        return self._resolve_remote(rev)

    def _full_id(self, rev: str) -> str:
        """A full commit id names that commit, whatever refs exist; a remote's cache fetches it when missing."""
        oid = pygit2.Oid(hex=rev)
        if self._mirror is not None and oid not in self._repo.odb:
            self._mirror.fetch_everything(rev)
        if oid not in self._repo.odb:
            raise unknown_revision(rev, self.display, "no commit has that id")
        return self._revparse(rev, rev)

    def _resolve_locally(self, rev: str) -> str:
        present = (name for name in candidates(rev, remote=False) if name in self._repo.references)
        try:
            ref = pick_ref(rev, frozenset(present), remote=False)
        except AmbiguousRefError as err:
            raise ambiguous_revision(rev, self.display, str(err)) from None
        return self._revparse(ref or rev, rev)

    def _revparse(self, spec: str, rev: str) -> str:
        try:
            obj = self._repo.revparse_single(spec)
        except KeyError:
            raise unknown_revision(rev, self.display) from None
        except pygit2.AmbiguousError:
            raise unknown_revision(rev, self.display, "the abbreviated commit id is ambiguous") from None
        except (pygit2.InvalidSpecError, ValueError):
            raise unknown_revision(rev, self.display, "not a valid revision name") from None
        except pygit2.GitError as exc:
            if "shallow" in str(exc).lower() or "parent" in str(exc).lower():
                raise unknown_revision(rev, self.display, "beyond the history this clone holds") from None
            raise unknown_revision(rev, self.display, str(exc)) from None
        try:
            commit = obj.peel(pygit2.Commit)
        except (pygit2.InvalidSpecError, pygit2.GitError, ValueError):
            raise unknown_revision(rev, self.display, "it names an object that is not a commit") from None
        return str(commit.id)

    def _resolve_remote(self, rev: str) -> str:
        mirror = self._mirror
        assert mirror is not None
        refs, head_target = mirror.advertised(rev)
        try:
            ref = mirror.find_ref(rev, refs, head_target)
        except AmbiguousRefError as err:
            raise ambiguous_revision(rev, self.display, str(err)) from None
        if ref is not None:
            mirror.ensure_ref(ref)
            return self._revparse(ref.local_name, rev)
        if _HEX.match(rev):
            try:
                return self._revparse(rev, rev)
            except SourceError:
                mirror.fetch_everything(rev)
            return self._revparse(rev, rev)
        raise unknown_revision(rev, self.display)

    def _commit(self, sha: str) -> pygit2.Commit:
        try:
            obj = self._repo[sha] if len(sha) == 40 else self._repo.revparse_single(sha)
            commit = obj.peel(pygit2.Commit)
        except (KeyError, ValueError, pygit2.GitError):
            raise unknown_revision(sha, self.display, "no such commit") from None
        assert isinstance(commit, pygit2.Commit)
        return commit

    # -- trees and blobs -----------------------------------------------------------------------------------

    def tree_problems(self, commit: str) -> tuple[TreeProblem, ...]:
        """What git fsck would refuse in the trees of ``commit`` (gitopsq.source.tree_rules); () when sound."""
        root = self._commit(commit).tree_id.raw
        if len(self._good_trees) > _GOOD_TREES_KEPT:
            self._good_trees.clear()
        return tuple(commit_tree_problems(self._read_tree, root, self._good_trees))

    def _read_tree(self, oid: bytes) -> bytes:
        try:
            kind, data = self._repo.odb.read(pygit2.Oid(raw=oid))
        except (KeyError, ValueError, pygit2.GitError):
            raise SourceError(f"tree {pygit2.Oid(raw=oid)} is missing from {self.display}") from None
        if kind != ObjectType.TREE:
            raise SourceError(f"object {pygit2.Oid(raw=oid)} in {self.display} is named a directory but is not a tree")
        return bytes(data)

    def _sound_tree(self, commit: str) -> pygit2.Tree:
        """The tree of ``commit``, refused with a SourceError naming the first entry Git would refuse."""
        problems = self.tree_problems(commit)
        if problems:
            raise SourceError(tree_refusal(commit, problems[0], len(problems)))
        return self._commit(commit).tree

    def list_files(
        self,
        commit: str,
        include: Sequence[str],
        exclude: Sequence[str] = (),
        *,
        suffixes: Sequence[str] | None = YAML_SUFFIXES,
    ) -> tuple[FileEntry, ...]:
        """Files of ``commit`` selected by the include/exclude patterns (docs/config.md), sorted by path.

        Symbolic links and submodules are never listed. ``suffixes`` None lists every file name.
        """
        path_filter = PathFilter.of(include, exclude, suffixes)
        tree = self._sound_tree(commit)
        key = (str(tree.id), path_filter)
        cached = self._listings.get(key)
        if cached is not None:
            return cached
        found: dict[str, str] = {}
        for root in path_filter.roots():
            subtree: pygit2.Tree = tree
            if root:
                try:
                    entry = tree[root]
                except KeyError:
                    continue
                if not isinstance(entry, pygit2.Tree):
                    if entry.filemode in _FILE_MODES and path_filter.selects(root):
                        found[root] = str(entry.id)
                    continue
                subtree = entry
            self._walk(subtree, root, path_filter, found)
        result = tuple(FileEntry(path, found[path]) for path in sorted(found))
        if len(self._listings) >= _LISTINGS_KEPT:
            self._listings.pop(next(iter(self._listings)))  # oldest first: bounded for long-lived controllers
        self._listings[key] = result
        return result

    def _walk(self, tree: pygit2.Tree, prefix: str, path_filter: PathFilter, found: dict[str, str]) -> None:
        for entry in tree:
            path = f"{prefix}/{entry.name}" if prefix else str(entry.name)
            if isinstance(entry, pygit2.Tree):
                self._walk(entry, path, path_filter, found)
            elif entry.filemode in _FILE_MODES and path_filter.selects(path):
                found[path] = str(entry.id)

    def read_blob(self, blob_id: str) -> bytes:
        """The bytes of a blob; SourceError when the id names no blob."""
        try:
            obj = self._repo[blob_id]
        except (KeyError, ValueError):
            raise SourceError(f"no blob {blob_id} in {self.display}") from None
        if not isinstance(obj, pygit2.Blob):
            raise SourceError(f"object {blob_id} in {self.display} is not a file")
        return obj.data

    def blob_size(self, blob_id: str) -> int:
        """The size of a blob from its object header, without inflating its content; SourceError when none."""
        try:
            kind, size = self._repo.odb.read_header(pygit2.Oid(hex=blob_id))
        except (KeyError, ValueError, pygit2.GitError):
            raise SourceError(f"no blob {blob_id} in {self.display}") from None
        if kind != ObjectType.BLOB:
            raise SourceError(f"object {blob_id} in {self.display} is not a file")
        return int(size)

    def read_file(self, commit: str, path: str) -> bytes | None:
        """The bytes of ``path`` at ``commit``; None when there is no file (or it is a directory or link)."""
        tree = self._sound_tree(commit)
        try:
            entry = tree[path.strip("/")]
        except KeyError:
            return None
        if entry.type != ObjectType.BLOB or entry.filemode not in _FILE_MODES:
            return None
        return self.read_blob(str(entry.id))

    # -- commits and history -------------------------------------------------------------------------------

    def read_note(self, ref: str, commit: str) -> bytes | None:
        """The note ``ref`` (e.g. refs/notes/gitopsq/approvals) holds for ``commit``, or None. A remote's notes
        ref is fetched when the remote advertises one the cache does not hold yet."""
        if self._mirror is not None:
            refs, _ = self._mirror.advertised(ref)
            oid = refs.get(ref)
            if oid is not None and pygit2.Oid(hex=oid) not in self._repo.odb:
                self._mirror.fetch([f"+{ref}:{ref}"], depth=0, rev=ref)
            if oid is not None:
                self._repo.references.create(ref, pygit2.Oid(hex=oid), force=True)
        with git_errors("read a note from", self.display, ref=ref):
            try:
                note = self._repo.lookup_note(commit, ref)
            except KeyError:
                return None
            return str(note.message).encode("utf-8")

    def commit_info(self, commit: str) -> CommitInfo:
        return commit_info_of(self._commit(commit))

    def changed_paths(self, old: str | None, new: str) -> tuple[PathChange, ...]:
        """Entries added, modified, deleted or renamed from ``old`` to ``new`` (``old`` None: everything is added):
        files, symbolic links and submodules alike, a change of type or mode being a modification.

        Renames are detected by content similarity (git's default 50 %). Sorted by path, then old path.
        """
        new_tree = self._sound_tree(new)
        with git_errors("compare revisions of", self.display):
            old_tree = None if old is None else self._sound_tree(old)
            diff = new_tree.diff_to_tree(swap=True) if old_tree is None else old_tree.diff_to_tree(new_tree)
            diff.find_similar(flags=DiffFind.FIND_RENAMES)
        changes: list[PathChange] = []
        for delta in diff.deltas:
            status = _STATUS.get(delta.status)
            if status is None:
                continue
            old_file, new_file = delta.old_file, delta.new_file
            old_kind = None if status == "added" else _KINDS.get(old_file.mode, "file")
            new_kind = None if status == "deleted" else _KINDS.get(new_file.mode, "file")
            # Any entry type is a change to its path (a link or a submodule under a team's directory too);
            # only regular files have contents a caller may read.
            old_path = None if status == "added" else old_file.path
            path = old_file.path if status == "deleted" else new_file.path
            changes.append(PathChange(
                status=status,
                path=path,
                old_path=old_path,
                old_blob_id=str(old_file.id) if old_kind in ("file", "executable") else None,
                new_blob_id=str(new_file.id) if new_kind in ("file", "executable") else None,
                old_kind=old_kind,
                new_kind=new_kind,
            ))
        return tuple(sorted(changes, key=lambda c: (c.path, c.old_path or "")))

    def commits_between(self, old: str | None, new: str, *, first_parent: bool = False) -> tuple[CommitInfo, ...]:
        """Commits reachable from ``new`` but not from ``old``, oldest first (topological order).

        ``first_parent`` follows only first parents (the merges and direct commits of the branch itself).
        """
        self._need_history()
        new_commit = self._commit(new)
        walker = self._repo.walk(new_commit.id, SortMode.TOPOLOGICAL | SortMode.REVERSE)
        if old is not None:
            walker.hide(self._commit(old).id)
        if first_parent:
            walker.simplify_first_parent()
        commits = [self.commit_info(str(c.id)) for c in walker]
        self._refuse_shallow_boundary(commits)
        return tuple(commits)

    def is_ancestor(self, ancestor: str, descendant: str) -> bool:
        """Whether ``ancestor`` is ``descendant`` or one of its ancestors."""
        self._need_history()
        a, d = self._commit(ancestor).id, self._commit(descendant).id
        if a == d:
            return True
        with git_errors("walk the history of", self.display):
            answer = bool(self._repo.descendant_of(d, a))
        if not answer:
            self._refuse_if_shallow()
        return answer

    def merge_base(self, a: str, b: str) -> str | None:
        """The best common ancestor of two commits; None when their histories are unrelated."""
        self._need_history()
        with git_errors("walk the history of", self.display):
            base = self._repo.merge_base(self._commit(a).id, self._commit(b).id)
        if base is None:
            self._refuse_if_shallow()
            return None
        return str(base)

    def _need_history(self) -> None:
        if self._mirror is not None:
            self._mirror.unshallow()

    def _shallow_roots(self) -> set[str]:
        shallow = Path(self._repo.path) / "shallow"
        if not shallow.is_file():
            return set()
        return {line.strip() for line in shallow.read_text(encoding="ascii").splitlines() if line.strip()}

    def _refuse_if_shallow(self) -> None:
        if self._repo.is_shallow:
            raise SourceError(f"{self.display} is a shallow clone, so its history cannot answer this: "
                              "fetch the full history (git fetch --unshallow; in CI: fetch-depth: 0)")

    def _refuse_shallow_boundary(self, commits: list[CommitInfo]) -> None:
        roots = self._shallow_roots()
        if roots and any(c.sha in roots for c in commits):
            self._refuse_if_shallow()

