"""The docs are for users: README.md and docs/*.md say what gitopsq does, not the story of the work on it, and
README's command table lists exactly the commands the CLI registers.

The story (which numbered work period or issue found what, "this night", attempt N) belongs in CHANGELOG.md and
the git history. An upstream reference stays welcome when qualified (`kubernetes-sigs/kueue#3710`)."""

from __future__ import annotations

import re
from pathlib import Path

import click

from gitopsq.cli import cli

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

DIARY = [
    re.compile(r"\b[Ss]ession [0-9]+"),
    re.compile(r"\b[Ss]ince session\b"),
    re.compile(r"\b[Tt]his night\b"),
    re.compile(r"\b[Tt]he night before\b"),
    re.compile(r"\b[Ii]ssue #?[0-9]+"),
    re.compile(r"\b[Aa]ttempt [0-9]+"),
    # An unqualified issue or pull-request number (`#21`, "(#3710)"); `owner/repo#N` names an upstream one.
    re.compile(r"(?<![\w/.-])#[0-9]{2,}\b"),
]


def diary_lines(path: Path) -> list[str]:
    """`file:line: text` for every line of ``path`` that tells the story of the work."""
    found = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if any(p.search(line) for p in DIARY):
            found.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    return found


def test_the_diary_patterns_catch_the_story_and_spare_upstream_references(tmp_path: Path) -> None:
    """The check itself: each kind of diary phrase is caught, a qualified upstream reference is not."""
    story = ["Session 12 measured it.", "as the night before", "since session 9", "against issue 21's goals",
             "see #21", "(issue #38)", "attempt 3 found", "this night's run"]
    spared = ["kubernetes-sigs/kueue#3710", "platform/quotas#42", "a session token", "`#` comments",
              "[x](#anchor-12)", "three attempts in all"]
    for text in story:
        assert any(p.search(text) for p in DIARY), text
    for text in spared:
        assert not any(p.search(text) for p in DIARY), text


def test_readme_and_docs_tell_no_story_of_the_work() -> None:
    """No numbered work periods, nights, issue numbers or numbered attempts in README.md or docs/*.md."""
    found = [hit for path in DOCS for hit in diary_lines(path)]
    assert not found, "the docs tell the story of the work (move it to CHANGELOG.md):\n" + "\n".join(found)


def registered_commands() -> set[str]:
    """Every command a user can run, as words after `gitopsq` (a group's subcommands, not the group itself)."""
    out: set[str] = set()

    def walk(group: click.Group, prefix: tuple[str, ...]) -> None:
        ctx = click.Context(group)
        for name in group.list_commands(ctx):
            command = group.get_command(ctx, name)
            if command is None or command.hidden:
                continue
            if isinstance(command, click.Group):
                walk(command, (*prefix, name))
            else:
                out.add(" ".join((*prefix, name)))

    walk(cli, ())
    return out


def readme_commands() -> set[str]:
    """The commands README's command table lists: the lowercase words of each row's usage before its arguments."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text[text.index("## Commands"):text.index("## A pull request")]
    out = set()
    for row in section.splitlines():
        match = re.match(r"\| `gitopsq ([^`]*)`", row)
        if match:
            words = []
            for word in match.group(1).split():
                if not re.fullmatch(r"[a-z][a-z-]*", word):
                    break
                words.append(word)
            out.add(" ".join(words))
    return out


def test_readme_lists_every_registered_command_and_no_other() -> None:
    """README's command table and the click CLI agree both ways: every registered command (subcommands of groups
    included) has a row, and every row is a registered command."""
    registered, listed = registered_commands(), readme_commands()
    assert registered - listed == set(), f"commands missing from README's table: {sorted(registered - listed)}"
    extra = sorted(listed - registered)
    assert not extra, f"README lists commands the CLI does not register: {extra}"
