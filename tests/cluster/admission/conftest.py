"""Fixtures of the admission-loop tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from envtest_rig import Envtest
from running_loop import RunningLoop


@pytest.fixture
def admission(kueue_clean: Envtest) -> Iterator[RunningLoop]:
    """A running admission loop on a rig with no Kueue objects."""
    with RunningLoop(kueue_clean) as running:
        yield running
