"""git fsck's tree rules on raw tree bytes (gitopsq.source.tree_rules): every spelling of `.git` that Windows or
macOS file systems would turn into Git's own directory, Git's order (a directory compared as if its name ended
with `/`), modes and truncated entries. The end-to-end refusals on real repositories are in
test_tree_entries.py."""

from __future__ import annotations

import pytest

from gitopsq.source.tree_rules import parse_tree, tree_problems

OID = bytes(range(20))


def raw(*entries: tuple[bytes, bytes]) -> bytes:
    return b"".join(mode + b" " + name + b"\0" + OID for mode, name in entries)


@pytest.mark.parametrize("name", [".git", ".GIT", ".Git", ".git.", ".git ", ".git. .", "git~1", "GIT~1",
                                  ".git::$INDEX_ALLOCATION", ".g\u200cit", "\ufeff.git", ".GI\u200dT"])
def test_every_spelling_of_dotgit_is_refused(name: str) -> None:
    problems, subtrees = tree_problems(raw((b"40000", name.encode())), "teams/a")
    assert [(p.rule, p.entry, p.tree) for p in problems] == [("hasDotgit", name, "teams/a")]
    assert subtrees == []  # a refused directory is not walked into


@pytest.mark.parametrize("name", [".github", ".gitattributes", "git", "gitopsq.yaml", ".gitx", "my.git", "git~2"])
def test_names_that_only_look_alike_are_fine(name: str) -> None:
    problems, _ = tree_problems(raw((b"100644", name.encode())), "")
    assert problems == []


def test_a_directory_sorts_as_if_its_name_ended_with_a_slash() -> None:
    """Git's order: file `a.b` before directory `a` (`a.b` < `a/`), directory `a` before file `a0`."""
    ordered = raw((b"100644", b"a.b"), (b"40000", b"a"), (b"100644", b"a0"))
    assert tree_problems(ordered, "")[0] == []
    problems, _ = tree_problems(raw((b"40000", b"a"), (b"100644", b"a.b")), "")
    assert [(p.rule, p.entry) for p in problems] == [("treeNotSorted", "a.b")]


def test_a_file_and_a_directory_of_one_name_are_duplicates() -> None:
    problems, _ = tree_problems(raw((b"100644", b"a"), (b"100644", b"a.b"), (b"40000", b"a")), "x")
    assert [(p.rule, p.entry) for p in problems] == [("duplicateEntries", "a")]


def test_unknown_modes_and_truncated_entries_are_refused() -> None:
    problems, _ = tree_problems(raw((b"100666", b"a.yaml")) + b"100644 b.yaml\0" + OID[:7], "")
    assert [p.rule for p in problems] == ["badFilemode", "badTree"]
    entries, broken = parse_tree(b"100644 no-terminator")
    assert entries == [] and broken is not None and "bytes 0.." in broken
