"""README's command table and the CLI docs say what the code does, word for word: every option the table shows
exists on its command with the documented choices, and the messages the docs quote are the ones printed."""

from __future__ import annotations

import re
from pathlib import Path

import click
import pytest

from gitopsq.audit.verify import Verification
from gitopsq.cli import cli
from gitopsq.commands.audit import EXIT_NO_BRANCH, EXPORT_FORMATS
from gitopsq.commands.repo import dirty_notice

ROOT = Path(__file__).resolve().parents[2]


def _table_rows() -> list[str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text[text.index("## Commands"):text.index("## A pull request")]
    return [line for line in section.splitlines() if line.startswith("| `gitopsq ")]


def _command(words: list[str]) -> click.Command:
    ctx = click.Context(cli)
    command: click.Command = cli
    for word in words:
        assert isinstance(command, click.Group)
        found = command.get_command(ctx, word)
        assert found is not None, f"README names a command that does not exist: {words}"
        command = found
    return command


def _usages() -> list[tuple[str, str]]:
    out = []
    for row in _table_rows():
        for usage in re.findall(r"`(gitopsq [^`]*)`", row.split(" | ")[0]):
            out.append((row, usage.replace("\\|", "|")))
    return out


@pytest.mark.parametrize(("row", "usage"), _usages(), ids=[u for _, u in _usages()])
def test_readme_usage_matches_the_command(row: str, usage: str) -> None:
    """Every option in README's table exists on its command, and an `--option a|b` lists exactly its choices."""
    words = usage.split()[1:]
    verbs = []
    for word in words:
        if not re.fullmatch(r"[a-z][a-z-]*", word):  # REPO, SCENARIO.yaml, [--flag …]: the arguments begin
            break
        verbs.append(word)
    command = _command(verbs)
    options = {opt: p for p in command.params for opt in (*p.opts, *p.secondary_opts)}
    for flag, values in re.findall(r"(--[a-z-]+)(?: ([a-z]+(?:\|[a-z]+)+))?", usage):
        assert flag in options, f"{usage}: {flag} is not an option of gitopsq {' '.join(verbs)}"
        if values:
            param = options[flag]
            choices = list(param.type.choices) if isinstance(param.type, click.Choice) else list(EXPORT_FORMATS)
            assert sorted(values.split("|")) == sorted(choices), (usage, flag)


def test_readme_and_audit_docs_state_the_absent_exit_code() -> None:
    """README's table and docs/audit.md give the exit code the code uses for a missing audit branch."""
    assert EXIT_NO_BRANCH == 4
    rows = [r for r in _table_rows() if "gitopsq audit" in r]
    assert all("4 no audit branch" in r for r in rows)
    audit = (ROOT / "docs" / "audit.md").read_text(encoding="utf-8")
    assert "| 4 | `absent` | the repository has no audit branch: nothing to verify |" in audit
    assert Verification("gitopsq/audit", None, absent=True).summary() in audit


def test_check_docs_quote_the_dirty_notice_exactly() -> None:
    """The dirty-work-tree note in docs/check.md is the one the code prints."""
    note = dirty_notice("./queues", "9d4ee148353a0d4f6c6e0b47d1a1c6f1d3e2a9b0",
                        ["platform/flavors.yaml", "teams/new.yaml"])
    assert note in (ROOT / "docs" / "check.md").read_text(encoding="utf-8")
