"""Differential tests against upstream Kueue: kept out of the quick run, bounded when enabled, unbounded on demand.

Tests marked ``differential`` in this directory are deselected unless ``GITOPSQ_DIFFERENTIAL=1`` or the ``-m``
expression names the marker: a bare ``pytest`` (the quick run) leaves them out; ``scripts/test``, which CI runs,
builds the oracle and sets ``GITOPSQ_DIFFERENTIAL=1`` (``GITOPSQ_DIFFERENTIAL=0 scripts/test`` leaves them out).

How many random scenarios a run compares: ``GITOPSQ_DIFFERENTIAL_CASES`` (default `DEFAULT_CASES`, sized to keep
a run under ten minutes on two cores); from which seed: ``GITOPSQ_DIFFERENTIAL_SEED`` (default: today's date, so
every day's run sees new scenarios and a failure reproduces all day). Thousands of cases:
``scripts/differential --cases 5000 --seed N``.
"""

from __future__ import annotations

import datetime as dt
import os
import random
from collections.abc import Iterator
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
DEFAULT_CASES = 40


def differential_enabled(config: pytest.Config) -> bool:
    if os.environ.get("GITOPSQ_DIFFERENTIAL") == "1":
        return True
    return "differential" in (config.getoption("markexpr", "") or "")


def case_count() -> int:
    return int(os.environ.get("GITOPSQ_DIFFERENTIAL_CASES", DEFAULT_CASES))


DEFAULT_HANDWRITTEN = 20


def handwritten_sample(paths: list[Path]) -> list[Path]:
    """The hand-written scenarios a run replays on Kueue: ``GITOPSQ_DIFFERENTIAL_HANDWRITTEN`` of them (default
    `DEFAULT_HANDWRITTEN`, ``all`` for every one), chosen by the run's seed so that successive days cover them
    all while a CI run stays bounded; a failure reproduces with the same seed."""
    wanted = os.environ.get("GITOPSQ_DIFFERENTIAL_HANDWRITTEN", str(DEFAULT_HANDWRITTEN))
    if wanted == "all" or int(wanted) >= len(paths):
        return paths
    return sorted(random.Random(base_seed()).sample(paths, int(wanted)))


def base_seed() -> int:
    """Seeds of a run are base_seed()+0 … base_seed()+N-1; the default base is YYYYMMDD × 10 000."""
    configured = os.environ.get("GITOPSQ_DIFFERENTIAL_SEED")
    if configured:
        return int(configured)
    return int(dt.datetime.now(dt.UTC).strftime("%Y%m%d")) * 10_000


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Deselect this directory's ``differential`` tests from the quick run (other directories are untouched)."""
    if differential_enabled(config):
        return
    keep, drop = [], []
    for item in items:
        inside = Path(str(item.path)).resolve().is_relative_to(HERE)
        (drop if inside and item.get_closest_marker("differential") else keep).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


@pytest.fixture(scope="session")
def kueue_oracle(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    """Upstream Kueue v0.19.2 on its own rig (Kueue's CRDs), shared by the session's differential tests."""
    from differential.oracle import KueueOracle

    oracle = KueueOracle.start(tmp_path_factory.mktemp("kueue-oracle"))
    try:
        yield oracle
    finally:
        oracle.close()
