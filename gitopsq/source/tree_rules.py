"""Trees Git itself would refuse (git fsck's tree rules), found in a tree object's raw bytes.

libgit2 reads such trees without complaint, but ``git fsck`` flags them and ``git clone``/``checkout`` refuse
them, so what gitopsq would apply is not what anyone reviewing the repository can check out: an entry named
``..`` holding a file would be judged as a file of the directory above. Refused: names that are empty, ``.``,
``..``, ``.git`` in any case (and the spellings NTFS and HFS+ treat as ``.git``), names containing ``/`` or NUL
(a NUL ends a name early, so the rest no longer parses as entries), unknown modes, duplicate names, and entries
out of Git's order (byte order, a directory's name compared as if it ended with ``/``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

OID_BYTES = 20
_MODES = frozenset({b"100644", b"100755", b"100664", b"120000", b"40000", b"160000"})
TREE_MODE = b"40000"
# Code points HFS+ ignores when comparing names (git's is_hfs_dotgit).
_HFS_IGNORED = frozenset({0x200C, 0x200D, 0x200E, 0x200F, *range(0x202A, 0x202F), *range(0x206A, 0x2070), 0xFEFF})


@dataclass(frozen=True, slots=True)
class RawEntry:
    mode: bytes
    name: bytes
    oid: bytes

    @property
    def is_tree(self) -> bool:
        return self.mode in (TREE_MODE, b"040000")


@dataclass(frozen=True, slots=True)
class TreeProblem:
    """One entry Git would refuse: ``tree`` is the tree's path in the commit ('' for the root)."""

    tree: str
    entry: str
    rule: str  # git fsck's message id
    why: str

    @property
    def path(self) -> str:
        return f"{self.tree}/{self.entry}" if self.tree else self.entry


def parse_tree(data: bytes) -> tuple[list[RawEntry], str | None]:
    """The entries of a raw tree object, and why the rest does not parse (None: it all does)."""
    entries: list[RawEntry] = []
    at = 0
    while at < len(data):
        space = data.find(b" ", at)
        nul = data.find(b"\0", space + 1) if space >= 0 else -1
        if space < 0 or nul < 0 or nul + 1 + OID_BYTES > len(data):
            return entries, f"bytes {at}.. are not a tree entry (a name holding NUL, or a truncated entry)"
        entries.append(RawEntry(data[at:space], data[space + 1:nul], data[nul + 1:nul + 1 + OID_BYTES]))
        at = nul + 1 + OID_BYTES
    return entries, None


def tree_problems(data: bytes, tree: str) -> tuple[list[TreeProblem], list[tuple[str, bytes]]]:
    """What Git refuses in the tree at path ``tree`` (raw bytes ``data``), and its subtrees as (path, oid)."""
    entries, broken = parse_tree(data)
    problems: list[TreeProblem] = []
    subtrees: list[tuple[str, bytes]] = []
    seen: set[bytes] = set()
    previous: bytes | None = None
    for entry in entries:
        shown = entry.name.decode("utf-8", "replace")
        rule = _name_rule(entry.name)
        if rule is not None:
            problems.append(TreeProblem(tree, shown, *rule))
        if entry.mode not in _MODES and entry.mode != b"040000":
            problems.append(TreeProblem(tree, shown, "badFilemode", f"mode {entry.mode.decode('ascii', 'replace')}"
                                        " is not a mode Git writes"))
        if entry.name in seen:
            problems.append(TreeProblem(tree, shown, "duplicateEntries", "the tree holds this name twice"))
        seen.add(entry.name)
        key = entry.name + b"/" if entry.is_tree else entry.name
        if previous is not None and key < previous:
            problems.append(TreeProblem(tree, shown, "treeNotSorted", "the entry is out of Git's order"))
        previous = key
        if entry.is_tree and rule is None:
            subtrees.append((f"{tree}/{shown}" if tree else shown, entry.oid))
    if broken is not None:
        problems.append(TreeProblem(tree, "", "badTree", broken))
    return problems, subtrees


def _name_rule(name: bytes) -> tuple[str, str] | None:
    if not name:
        return "emptyName", "the entry has no name"
    if name in (b".", b".."):
        return ("hasDot" if name == b"." else "hasDotdot"), f"an entry named {name.decode()!r} points outside the tree"
    if b"/" in name:
        return "fullPathname", "the name contains '/'"
    if _is_dotgit(name):
        return "hasDotgit", "an entry named like .git would be Git's own directory on checkout"
    return None


def _is_dotgit(name: bytes) -> bool:
    # NTFS drops trailing dots and spaces and reads a stream suffix (".git::$INDEX_ALLOCATION"); GIT~1 is the short name
    if name.isascii():  # most names: no code point HFS+ ignores, so bytes suffice
        return name.lower().split(b":", 1)[0].rstrip(b". ") in (b".git", b"git~1")
    text = name.decode("utf-8", "replace")
    folded = "".join(ch for ch in text if ord(ch) not in _HFS_IGNORED).lower()
    return folded.split(":", 1)[0].rstrip(". ") in (".git", "git~1")


def commit_tree_problems(read_tree: Callable[[bytes], bytes], root: bytes, good: set[bytes]) -> list[TreeProblem]:
    """Every problem in the trees under ``root`` (raw oids; ``read_tree`` gives a tree's raw bytes). ``good``
    holds trees already found sound with everything under them: they are skipped; when the whole walk finds
    nothing, every tree it read joins them."""
    problems: list[TreeProblem] = []
    visited: list[bytes] = []
    pending: list[tuple[str, bytes]] = [("", root)]
    while pending:
        path, oid = pending.pop()
        if oid in good:
            continue
        visited.append(oid)
        found, subtrees = tree_problems(read_tree(oid), path)
        problems.extend(found)
        pending.extend(subtrees)
    if not problems:
        good.update(visited)
    return problems


def tree_refusal(commit: str, problem: TreeProblem, count: int = 1) -> str:
    """One line naming the commit, the tree, the entry and the rule (git fsck's message id)."""
    where = f"tree {problem.tree!r}" if problem.tree else "the root tree"
    entry = f"entry {problem.entry!r}" if problem.entry or problem.rule != "badTree" else "its entries"
    more = f" (and {count - 1} more)" if count > 1 else ""
    return (f"commit {commit[:12]}: {where}, {entry}: {problem.why} [{problem.rule}]{more}; Git refuses to check "
            "out such a tree (git fsck), so gitopsq does not read it")
