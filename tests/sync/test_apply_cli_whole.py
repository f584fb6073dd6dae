"""`gitopsq apply` as a user runs it, for all or nothing and health: a refused revision exits 1 naming the object,
its file and line; --wait-health reports each queue and exits 3 when none can become healthy."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from controller_process import ROOT
from envtest_rig import Envtest
from queue_repo import QueueRepo, cpu_of, cq_live

pytestmark = pytest.mark.envtest


def gitopsq(env: Envtest, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gitopsq", *args, "--kubeconfig", str(env.kubeconfig)],
                          cwd=ROOT, capture_output=True, text=True, check=False, timeout=120)


@pytest.fixture
def repo(tmp_path: Path) -> QueueRepo:
    r = QueueRepo(tmp_path / "queues", f"c{uuid.uuid4().hex[:6]}")
    r.commit("template")
    return r


def test_a_refused_revision_exits_1_and_names_the_object(kueue_clean: Envtest, repo: QueueRepo) -> None:
    """A change plus a LocalQueue in a namespace nobody creates: exit 1, the text names the refused object with
    file:line and says nothing was applied, and the changed ClusterQueue keeps its quota."""
    assert gitopsq(kueue_clean, "apply", str(repo.path), "--name", repo.tag).returncode == 0
    repo.write("queues/team-a.yaml", repo.cq(repo.team_a, cpu="16") + repo.lq(repo.team_a))
    repo.write("queues/extra.yaml", repo.lq(f"{repo.tag}-later").replace(f"clusterQueue: {repo.tag}-later",
                                                                          f"clusterQueue: {repo.team_a}"))
    repo.commit("a change and a queue in a namespace nobody created")
    done = gitopsq(kueue_clean, "apply", str(repo.path), "--name", repo.tag)
    assert done.returncode == 1, done.stdout + done.stderr
    assert f"LocalQueue/{repo.tag}-later/main (queues/extra.yaml:2) refused by the API server" in done.stdout
    assert "nothing applied" in done.stdout and "Traceback" not in done.stderr
    assert cpu_of(cq_live(kueue_clean, repo.team_a)) == "8"
    as_json = json.loads(gitopsq(kueue_clean, "apply", str(repo.path), "--name", repo.tag, "-o", "json").stdout)
    assert as_json["outcome"] == "refused" and as_json["refused"][0]["path"] == "queues/extra.yaml"
    dry = gitopsq(kueue_clean, "apply", str(repo.path), "--name", repo.tag, "--dry-run")
    assert dry.returncode == 1 and dry.stdout.count("refused by the API server") == 1
    assert "apply failed" not in dry.stdout  # listed once, as refused


def test_wait_health_without_kueue_reports_each_queue_and_exits_3(kueue_clean: Envtest, repo: QueueRepo) -> None:
    """With nothing writing queue status, --wait-health --health-timeout 1s applies the revision, then reports
    every ClusterQueue and LocalQueue Pending with the reason, and exits 3."""
    done = gitopsq(kueue_clean, "apply", str(repo.path), "--name", repo.tag, "--wait-health", "--health-timeout",
                   "1s", "-o", "json")
    assert done.returncode == 3, done.stdout + done.stderr
    out = json.loads(done.stdout)
    assert out["outcome"] == "unhealthy" and len(out["health"]) == 4
    assert {h["status"] for h in out["health"]} == {"Pending"} and cq_live(kueue_clean, repo.team_a) is not None
    text = gitopsq(kueue_clean, "apply", str(repo.path), "--name", repo.tag, "--wait-health", "--health-timeout",
                   "1s")
    assert text.returncode == 3 and "health: 0 of 4 queues healthy" in text.stdout
    assert f"ClusterQueue/{repo.team_a} Pending: NoStatusYet" in text.stdout
