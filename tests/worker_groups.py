"""pytest plugin: which tests share a worker when the suite runs in parallel (pytest-xdist, ``--dist loadgroup``).

A rig is a session fixture, so every worker that runs a test needing one starts its own. The expensive ones are
kept to one worker each: the full rig (controller manager, scheduler, KWOK and the frameworks' controllers),
upstream Kueue's oracle rig of the differential sample, and Gitea. The bare rig (etcd and kube-apiserver, ready in
seconds) is cheap enough for any worker to start its own, so its tests spread like the rest. The groups are found
from each test's fixture closure, so a new test joins the right worker by asking for its rig; nothing is listed by
hand. A test may also name a group itself with ``pytest.mark.xdist_group(NAME)``.

xdist's own ``loadgroup`` scheduler finds groups by a suffix it writes into each test's node id, which pytest 9.2
no longer lets a plugin change, so the groups would be silently ignored. This plugin therefore brings its own
scheduler: each worker writes the group of every test it collected to a file in the run's directory
(tests/machine_isolation.py), and the scheduler, which xdist calls once every worker has collected, reads them.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from machine_isolation import MARK
from xdist.remote import Producer
from xdist.scheduler import LoadGroupScheduling

GROUPS = (  # first match wins: a test that needs the full rig and the bare one runs with the full rig
    ("full-rig", frozenset({"full_cluster", "node_pools", "jobset_cluster", "trainer_cluster", "kuberay_cluster"})),
    ("kueue-oracle", frozenset({"kueue_oracle"})),
    ("gitea", frozenset({"gitea"})),
)


def group_of(fixtures: frozenset[str], marked: str | None = None) -> str | None:
    """The worker group of a test with these fixtures and ``xdist_group`` mark (None: any worker)."""
    return next((name for name, needs in GROUPS if needs & fixtures), marked)


def _groups_file(worker: str) -> Path:
    return Path(os.environ[MARK]) / f"xdist-groups-{worker}.json"


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    groups: dict[str, str] = {}
    for item in items:
        mark = item.get_closest_marker("xdist_group")
        marked = str(mark.args[0] if mark and mark.args else mark.kwargs.get("name", "default")) if mark else None
        group = group_of(frozenset(getattr(item, "fixturenames", ())), marked)
        if group is not None:
            groups[item.nodeid] = group
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if worker:
        _groups_file(worker).write_text(json.dumps(groups), encoding="utf-8")


def pytest_xdist_make_scheduler(config: pytest.Config, log: Producer) -> LoadGroupScheduling | None:
    if config.getvalue("dist") != "loadgroup":
        return None
    return RigGroupScheduling(config, log)


class RigGroupScheduling(LoadGroupScheduling):
    """xdist's group scheduling, with the groups the workers wrote at collection (largest groups start first)."""

    def __init__(self, config: pytest.Config, log: Producer | None = None) -> None:
        super().__init__(config, log)
        self._groups: dict[str, str] | None = None

    def _split_scope(self, nodeid: str) -> str:
        if self._groups is None:  # first asked once every worker has collected, so every file is written
            self._groups = {}
            for path in sorted(Path(os.environ[MARK]).glob("xdist-groups-*.json")):
                self._groups.update(json.loads(path.read_text(encoding="utf-8")))
        return self._groups.get(nodeid) or super()._split_scope(nodeid)
