"""The audit trail's Git commands when git itself is missing: a clear AuditError, never a FileNotFoundError
traceback from the writer's thread."""

from __future__ import annotations

from pathlib import Path

import pytest

from gitopsq.audit.gitstore import git
from gitopsq.errors import AuditError


def test_a_missing_git_command_is_a_clear_audit_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With no git on PATH the audit store's git call raises AuditError naming the missing command."""
    monkeypatch.setenv("PATH", str(tmp_path))  # an empty directory: no git there
    with pytest.raises(AuditError, match="git command is not installed"):
        git(["status"], cwd=tmp_path)
