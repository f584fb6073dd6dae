"""The suite's own environment: isolated from the machine's HOME and git configuration (tests/machine_isolation.py)
and split over parallel workers by rig (tests/worker_groups.py)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import machine_isolation
import pytest
from worker_groups import group_of


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
