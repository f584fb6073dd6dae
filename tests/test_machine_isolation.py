"""The suite's own environment: isolated from the machine's HOME and git configuration (tests/machine_isolation.py)
and split over parallel workers by rig (tests/worker_groups.py)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import machine_isolation
import pytest
import worker_groups
from worker_groups import RigGroupScheduling, group_of


def test_the_run_has_an_empty_home_and_no_git_identity(tmp_path: Path) -> None:
    """HOME is the run's own directory, git reads no global or system configuration and knows no identity."""
    home = Path(os.environ["HOME"])
    assert home.is_relative_to(os.environ[machine_isolation.MARK])
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    assert home.name == (worker or Path(os.environ[machine_isolation.MARK]).name)
    assert os.environ["GIT_CONFIG_GLOBAL"] == str(home / ".gitconfig")
    assert os.environ["GIT_CONFIG_NOSYSTEM"] == "1"
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    ident = subprocess.run(["git", "var", "GIT_COMMITTER_IDENT"], cwd=tmp_path, capture_output=True, text=True,
                           check=False)
    assert ident.returncode != 0, f"a git identity leaked into the suite: {ident.stdout}"
    listed = subprocess.run(["git", "config", "--list", "--show-origin"], cwd=tmp_path, capture_output=True,
                            text=True, check=False)
    assert [line for line in listed.stdout.splitlines() if not line.startswith("file:.git/config")] == []
    assert not any(name.startswith(("GIT_AUTHOR", "GIT_COMMITTER", "GNUPG")) or name == "SSH_AUTH_SOCK"
                   for name in os.environ)


def test_the_build_caches_stay_shared_by_explicit_paths() -> None:
    """Every rig cache is named explicitly, outside the run's HOME, so an isolated run does not build again."""
    run_home = Path(os.environ[machine_isolation.MARK])
    for variable in machine_isolation.BUILD_CACHES:
        assert not Path(os.environ[variable]).is_relative_to(run_home), variable


def test_isolate_replaces_home_and_keeps_caches(tmp_path: Path) -> None:
    """On a fresh environment: HOME, XDG and git's global file move to a new directory; caches point at the old
    HOME; identities, agents and credentials are dropped; a second call (an xdist worker) moves to its own HOME."""
    real = tmp_path / "real-home"
    environ = {"HOME": str(real), "PATH": "/usr/bin:/bin", "GIT_AUTHOR_NAME": "Dev", "SSH_AUTH_SOCK": "/s",
               "GITOPSQ_GIT_TOKEN": "secret", "GOCACHE": "/explicit/go-build"}
    home = machine_isolation.isolate(environ)
    try:
        assert home is not None and environ["HOME"] == str(home) and home != real
        assert environ["GITOPSQ_ENVTEST_DIR"] == str(real / ".cache" / "gitopsq" / "envtest")
        assert environ["GOCACHE"] == "/explicit/go-build"
        assert environ["XDG_CONFIG_HOME"] == str(home / ".config")
        assert not {"GIT_AUTHOR_NAME", "SSH_AUTH_SOCK", "GITOPSQ_GIT_TOKEN"} & set(environ)
        environ["PYTEST_XDIST_WORKER"] = "gw3"
        assert machine_isolation.isolate(environ) is None
        assert environ["HOME"] == str(home / "gw3") and (home / "gw3").is_dir()
    finally:
        machine_isolation.remove(home)


@pytest.mark.parametrize(("fixtures", "group"), [
    ({"tmp_path"}, None),
    ({"envtest", "kueue_clean"}, None),  # the bare rig starts in seconds: any worker
    ({"envtest", "full_cluster", "full_admission"}, "full-rig"),
    ({"node_pools", "full_cluster"}, "full-rig"),
    ({"trainer_cluster", "jobset_cluster", "full_cluster"}, "full-rig"),
    ({"kueue_oracle"}, "kueue-oracle"),
    ({"gitea", "tmp_path"}, "gitea"),
])
def test_expensive_rigs_keep_to_one_worker(fixtures: set[str], group: str | None) -> None:
    assert group_of(frozenset(fixtures)) == group


def test_a_tests_own_group_mark_counts_after_the_rigs() -> None:
    assert group_of(frozenset({"tmp_path"}), "wheel") == "wheel"
    assert group_of(frozenset({"gitea"}), "wheel") == "gitea"


def test_the_scheduler_groups_tests_as_the_workers_wrote_them(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """Each worker writes the groups it collected; the controller's scheduler reads every worker's file, leaves
    other tests alone, and still honours a node id that carries xdist's own group suffix."""
    monkeypatch.setenv(machine_isolation.MARK, str(tmp_path))
    collected = {"gw0": [_Item("a.py::t1", {"node_pools", "full_cluster"}), _Item("b.py::t2", {"gitea"}),
                         _Item("d.py::t4", {"tmp_path"})],
                 "gw1": [_Item("c.py::t3", {"full_cluster"}), _Item("f.py::t6", set(), mark="wheel")]}
    for worker, items in collected.items():
        monkeypatch.setenv("PYTEST_XDIST_WORKER", worker)
        worker_groups.pytest_collection_modifyitems(items)  # type: ignore[arg-type]
    assert json.loads((tmp_path / "xdist-groups-gw1.json").read_text()) == {"c.py::t3": "full-rig",
                                                                             "f.py::t6": "wheel"}
    scheduler = object.__new__(RigGroupScheduling)  # only its scope rule, without a running xdist session
    scheduler._groups = None
    nodeids = ("a.py::t1", "b.py::t2", "c.py::t3", "d.py::t4", "e.py::t5@other", "f.py::t6")
    assert [scheduler._split_scope(n) for n in nodeids] == ["full-rig", "gitea", "full-rig", "d.py::t4", "other",
                                                            "wheel"]


class _Item:
    """What the collection hook reads of a test item."""

    def __init__(self, nodeid: str, fixtures: set[str], mark: str | None = None) -> None:
        self.nodeid, self.fixturenames = nodeid, sorted(fixtures)
        self._mark = pytest.mark.xdist_group(mark).mark if mark else None

    def get_closest_marker(self, name: str) -> object:
        return self._mark if name == "xdist_group" else None
