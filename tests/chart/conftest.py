"""Fixtures of the chart tests: one Helm engine per session."""

from __future__ import annotations

from pathlib import Path

import pytest
from chart_helm import Helm, helm_binary


@pytest.fixture(scope="session")
def helm(tmp_path_factory: pytest.TempPathFactory) -> Helm:
    """The real Helm CLI (scripts/helm-prepare), with its config and cache in a temporary home."""
    home: Path = tmp_path_factory.mktemp("helm-home")
    return Helm(helm_binary(), home)
