"""pytest plugin: which tests share a worker when the suite runs in parallel (pytest-xdist, ``--dist loadgroup``).

A rig is a session fixture, so every worker that runs a test needing one starts its own. The expensive ones are
kept to one worker each by an ``xdist_group``: the full rig (controller manager, scheduler, KWOK and the
frameworks' controllers), upstream Kueue's oracle rig of the differential sample, and Gitea. The bare rig (etcd and
kube-apiserver, ready in seconds) is cheap enough for any worker to start its own, so its tests spread like the
rest. The groups are found from each test's fixture closure, so a new test joins the right worker by asking for
its rig; nothing is listed by hand.
"""

from __future__ import annotations

import pytest

GROUPS = (  # first match wins: a test that needs the full rig and the bare one runs with the full rig
    ("full-rig", frozenset({"full_cluster", "node_pools", "jobset_cluster", "trainer_cluster", "kuberay_cluster"})),
    ("kueue-oracle", frozenset({"kueue_oracle"})),
    ("gitea", frozenset({"gitea"})),
)


def group_of(fixtures: frozenset[str]) -> str | None:
    """The worker group of a test with these fixtures (None: any worker)."""
    return next((name for name, needs in GROUPS if needs & fixtures), None)


@pytest.hookimpl(tryfirst=True)  # before xdist reads the xdist_group marks
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        group = group_of(frozenset(getattr(item, "fixturenames", ())))
        if group is not None:
            item.add_marker(pytest.mark.xdist_group(group))
