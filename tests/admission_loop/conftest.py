"""Fixtures of the admission-loop tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from envtest_rig import Envtest, FullCluster
from running_loop import RunningLoop, running_on_clean


@pytest.fixture
def admission(kueue_clean: Envtest) -> Iterator[RunningLoop]:
    """A running admission loop on a rig with no Kueue objects."""
    with RunningLoop(kueue_clean) as running:
        yield running


@pytest.fixture(scope="session")
def full_kueue(full_cluster: FullCluster) -> FullCluster:
    """The full rig (controllers, scheduler, KWOK) with gitopsq's bundled CRDs installed and Established."""
    from gitopsq.cluster.crds import install_crds

    with full_cluster.api_client() as api:
        install_crds(api)
    return full_cluster


@pytest.fixture
def full_admission(full_kueue: FullCluster) -> Iterator[RunningLoop]:
    """A running admission loop on the full rig, with no Kueue objects before or after the test."""
    with running_on_clean(full_kueue) as running:
        yield running
