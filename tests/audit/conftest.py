"""Shared helpers for the audit tests: real bare repositories, record factories, a fast-batching trail."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pygit2
import pytest

from gitopsq.audit import records as r
from gitopsq.audit.trail import AuditTrail, TrailSettings
from gitopsq.audit.verify import Verification, verify_branch

BRANCH = "gitopsq/audit"
T0 = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)


def bare_repo(path: Path) -> Path:
    subprocess.run(["git", "init", "-q", "--bare", str(path)], check=True)
    return path


def admitted(i: int, *, prefix: str = "w", queue: str = "cq-a") -> r.Record:
    """A distinct admission record per ``i`` (uid and time differ)."""
    return r.admission("admitted", time=T0 + timedelta(seconds=i), workload=r.WorkloadRef("team-a", f"{prefix}{i}",
                       f"{prefix}-uid-{i}"), cluster_queue=queue, flavors={"main": {"cpu": "default"}},
                       times={"created": T0 + timedelta(seconds=i - 5)}, within_nominal_quota=True)


def fast_settings(**overrides: Any) -> TrailSettings:
    values: dict[str, Any] = {"batch_seconds": 0.05, "batch_records": 100_000, "backoff_initial": 0.05,
                              "backoff_max": 0.2}
    values.update(overrides)
    return TrailSettings(**values)


def verified(repo_path: Path) -> Verification:
    return verify_branch(pygit2.Repository(str(repo_path)), BRANCH)


def workload_names(repo_path: Path) -> list[str]:
    return [s.entry["workload"]["name"] for s in verified(repo_path).entries]


@pytest.fixture
def remote(tmp_path: Path) -> Path:
    return bare_repo(tmp_path / "remote.git")


@pytest.fixture
def trail(remote: Path, tmp_path: Path) -> Iterator[AuditTrail]:
    with AuditTrail.open(str(remote), tmp_path / "wal", settings=fast_settings()) as opened:
        yield opened
