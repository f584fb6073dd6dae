"""`scripts/envtest`: the contributor's command for a long-lived rig (up, env, status, down)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from envtestrig.rig import Rig

REPO_ROOT = Path(__file__).resolve().parents[2]
SCRIPT = REPO_ROOT / "scripts" / "envtest"

pytestmark = pytest.mark.envtest


def _run(state: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "GITOPSQ_ENVTEST_STATE": str(state)}
    return subprocess.run([str(SCRIPT), *args], env=env, capture_output=True, text=True, check=False, timeout=180)


def test_up_env_status_down_round_trip(tmp_path: Path) -> None:
    """up starts a rig kubectl can use through `env`, up again is a no-op, down stops exactly its PIDs."""
    state = tmp_path / "state"
    assert _run(state, "up").returncode == 0
    try:
        again = _run(state, "up")
        assert "already running" in again.stdout
        exports = _run(state, "env").stdout
        assert f"export KUBECONFIG={state / 'kubeconfig'}" in exports
        kubectl = subprocess.run(
            ["kubectl", "get", "--raw", "/readyz"], env={**os.environ, "KUBECONFIG": str(state / "kubeconfig")},
            capture_output=True, text=True, check=False,
        )  # fmt: skip
        assert kubectl.stdout.strip() == "ok"
        assert _run(state, "status").returncode == 0
        pids = Rig.load(state).state
    finally:
        down = _run(state, "down")
    assert down.returncode == 0, down.stderr
    for pid in (pids.etcd_pid, pids.apiserver_pid):
        assert not Path(f"/proc/{pid}").exists() or "Z" in Path(f"/proc/{pid}/stat").read_text().split()[2]
    assert _run(state, "status").returncode == 1


def test_full_profile_up_status_down_round_trip(tmp_path: Path) -> None:
    """up --full starts eight processes (the JobSet and Trainer controllers and the KubeRay operator among them)
    that status lists as running, and down stops every one of those PIDs."""
    state = tmp_path / "state"
    up = _run(state, "up", "--full")
    assert up.returncode == 0, up.stderr
    try:
        assert "full rig ready" in up.stdout
        status = _run(state, "status")
        assert status.returncode == 0, status.stdout
        for name in ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok", "jobset",
                     "trainer", "kuberay"):
            assert f"{name}: running" in status.stdout
        assert "profile: full" in status.stdout
        assert "already running (full)" in _run(state, "up", "--full").stdout
        pids = Rig.load(state).pids()
    finally:
        down = _run(state, "down")
    assert down.returncode == 0, down.stderr
    assert len(pids) == 8
    for pid in pids.values():
        assert not Path(f"/proc/{pid}").exists() or "Z" in Path(f"/proc/{pid}/stat").read_text().split()[2]
    assert _run(state, "status").returncode == 1


def test_unknown_verb_prints_usage(tmp_path: Path) -> None:
    """A wrong verb exits 2 with the list of verbs."""
    wrong = _run(tmp_path, "start")
    assert wrong.returncode == 2
    assert "prepare" in wrong.stderr and "down" in wrong.stderr and "--full" in wrong.stderr
    assert _run(tmp_path, "up", "--fast").returncode == 2
