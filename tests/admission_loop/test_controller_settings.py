"""`gitopsq controller` gives its admission loop gitopsq.yaml's ``admission`` block of the applied revision, and
follows it when a new revision changes it (a real repository, a real controller process on the rig)."""

from __future__ import annotations

import signal
import uuid
from pathlib import Path

import pytest
from controller_process import ControllerProcess, applied_revision, wait_for
from envtest_rig import Envtest
from queue_repo import QueueRepo

pytestmark = pytest.mark.envtest

BLOCK = """admission:
  fairSharing: {{preemptionStrategies: [LessThanInitialShare]}}
  inadmissibleRequeue: {requeue}
  featureGates: {{PrioritizePreemptorWorkloads: true}}
"""


def _settings(proc: ControllerProcess) -> list[dict[str, object]]:
    return [e for e in proc.events() if e.get("event") == "admission settings changed"]


def test_admission_settings_follow_the_applied_revision(kueue_clean: Envtest, tmp_path: Path) -> None:
    """The first applied revision's block switches fair sharing on with its strategy and requeue mode; a later
    revision that changes the requeue mode reaches the running loop; one that changes nothing else does not
    log a change."""
    repo = QueueRepo(tmp_path / "queues", f"s{uuid.uuid4().hex[:6]}")
    config = (repo.path / "gitopsq.yaml").read_text()
    repo.write("gitopsq.yaml", config + BLOCK.format(requeue="Batched"))
    first = repo.commit("fair sharing on")
    proc = ControllerProcess(kueue_clean, repo, tmp_path, "settings", "--interval", "1s", "--no-leader-elect")
    try:
        wait_for(lambda: applied_revision(kueue_clean, repo) == first, message="first sync")
        changed = wait_for(lambda: _settings(proc), message="settings given to the loop")
        assert changed[0]["fair_sharing"] is True
        assert changed[0]["preemption_strategies"] == ["LessThanInitialShare"]
        assert changed[0]["inadmissible_requeue"] == "Batched"
        repo.write("gitopsq.yaml", config + BLOCK.format(requeue="Immediate"))
        second = repo.commit("immediate requeue")
        wait_for(lambda: applied_revision(kueue_clean, repo) == second, message="second sync")
        later = wait_for(lambda: len(_settings(proc)) >= 2 and _settings(proc), message="the new block applied")
        assert later[-1]["inadmissible_requeue"] == "Immediate"
        repo.write("queues/team-b.yaml", repo.cq(repo.team_b, cpu="3") + repo.lq(repo.team_b))
        third = repo.commit("no settings change")
        wait_for(lambda: applied_revision(kueue_clean, repo) == third, message="third sync")
        wait_for(lambda: len(proc.sync_passes()) >= 4, message="more passes")
        assert len(_settings(proc)) == 2
    finally:
        proc.stop(signal.SIGKILL)
