"""`gitopsq apply` as a user runs it: exit codes, JSON and text output, dry run, prune, unreachable API."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from controller_process import ROOT
from envtest_rig import Envtest
from queue_repo import QueueRepo, cpu_of, cq_live, template_repo

pytestmark = pytest.mark.envtest


def gitopsq(env: Envtest, *args: str, kubeconfig: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gitopsq", *args, "--kubeconfig", kubeconfig or str(env.kubeconfig)],
                          cwd=ROOT, capture_output=True, text=True, check=False, timeout=120)


@pytest.fixture
def repo(tmp_path: Path) -> QueueRepo:
    return template_repo(tmp_path / "queues", "a")


def report(done: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    parsed: dict[str, Any] = json.loads(done.stdout)
    return parsed


def test_dry_run_then_apply_then_prune(kueue_clean: Envtest, repo: QueueRepo) -> None:
    """--dry-run changes nothing; apply creates; --prune removes what left Git; each exits 0 with a JSON report."""
    dry = gitopsq(kueue_clean, "apply", str(repo.path), "--dry-run", "--name", repo.tag, "-o", "json")
    assert dry.returncode == 0, dry.stderr
    assert report(dry)["dryRun"] and cq_live(kueue_clean, repo.team_a) is None
    done = gitopsq(kueue_clean, "apply", str(repo.path), "--name", repo.tag, "-o", "json")
    assert done.returncode == 0, done.stderr
    assert {a["object"] for a in report(done)["applied"] if a["done"]} >= {f"ClusterQueue/{repo.team_a}"}
    repo.remove("queues/team-b.yaml")
    repo.commit("drop team-b")
    kept = gitopsq(kueue_clean, "apply", str(repo.path), "--name", repo.tag)
    assert kept.returncode == 0 and "not pruned (use --prune)" in kept.stdout
    pruned = gitopsq(kueue_clean, "apply", str(repo.path), "--name", repo.tag, "--prune")
    assert pruned.returncode == 0, pruned.stderr
    assert f"ClusterQueue/{repo.team_b} pruned" in pruned.stdout
    assert cq_live(kueue_clean, repo.team_b) is None


def test_rejected_revision_exits_1_and_changes_nothing(kueue_clean: Envtest, repo: QueueRepo) -> None:
    """An invalid revision exits 1 with its findings; the applied quota stays."""
    assert gitopsq(kueue_clean, "apply", str(repo.path), "--name", repo.tag).returncode == 0
    repo.write("queues/team-a.yaml", repo.cq(repo.team_a, cpu="12x") + repo.lq(repo.team_a))
    repo.commit("typo")
    done = gitopsq(kueue_clean, "apply", str(repo.path), "--name", repo.tag)
    assert done.returncode == 1
    assert "rejected" in done.stdout and "queues/team-a.yaml" in done.stdout
    assert cpu_of(cq_live(kueue_clean, repo.team_a)) == "8"


def test_unreachable_api_exits_3_without_traceback(kueue_clean: Envtest, repo: QueueRepo, tmp_path: Path) -> None:
    """A kubeconfig pointing at a closed port fails with exit 3 and one line, after the retry timeout."""
    config = kueue_clean.kubeconfig.read_text()
    port = kueue_clean.api_url.rsplit(":", 1)[1]
    broken = tmp_path / "kubeconfig"
    broken.write_text(config.replace(f":{port}", ":1"))
    done = gitopsq(kueue_clean, "apply", str(repo.path), "--retry-timeout", "1s", kubeconfig=str(broken))
    assert done.returncode == 3
    assert "Traceback" not in done.stderr and done.stderr.startswith("gitopsq: ")
