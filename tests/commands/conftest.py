"""Fixtures of the command tests."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from cli_runs import TEMPLATE, commit_tree


@pytest.fixture
def template_repo(tmp_path: Path) -> Path:
    """repo-template copied to ``queues/`` and committed on main as Alice, a platform maintainer."""
    root = tmp_path / "queues"
    shutil.copytree(TEMPLATE, root)
    commit_tree(root, "template")
    return root
