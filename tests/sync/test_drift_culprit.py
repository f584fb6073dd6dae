"""A drift correction on the real API server names what was undone and who did it: the sync.drift_corrected
record holds the field put back (live value → Git's) and the field manager from managedFields (kubectl's)."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest
from envtest_rig import Envtest
from queue_repo import NS, QueueRepo, cpu_of, cq_live

from gitopsq.cluster.apply import KubeRest
from gitopsq.cluster.status import SourceRef
from gitopsq.source import open_source
from gitopsq.sync.syncer import Syncer

pytestmark = pytest.mark.envtest


class Records:
    def __init__(self) -> None:
        self.seen: list[dict[str, Any]] = []

    def record(self, record: Any) -> None:
        self.seen.append(dict(record.data))


def test_drift_record_names_the_field_and_the_manager(kueue_clean: Envtest, tmp_path: Path) -> None:
    """kubectl patch sets team-a's CPU to 999; the next sync puts 8 back, and its drift record says
    nominalQuota was 999, put back to 8, changed by kubectl-patch."""
    repo = QueueRepo(tmp_path / "queues", f"d{uuid.uuid4().hex[:6]}")
    repo.commit("template")
    audit = Records()
    syncer = Syncer(open_source(str(repo.path)), KubeRest(kueue_clean.api_client()), SourceRef(NS, repo.tag),
                    url=str(repo.path), audit=audit)
    assert syncer.sync().outcome == "applied"
    kueue_clean.kubectl("patch", "clusterqueue", repo.team_a, "--type", "json", "-p",
                        '[{"op": "replace", "path": "/spec/resourceGroups/0/flavors/0/resources/0/nominalQuota", '
                        '"value": "999"}]')
    assert syncer.sync().outcome == "applied" and cpu_of(cq_live(kueue_clean, repo.team_a)) == "8"
    (drift,) = [r for r in audit.seen if r["type"] == "sync.drift_corrected"]
    (undone,) = drift["drift"]
    assert undone["object"] == f"ClusterQueue/{repo.team_a}" and undone["managers"] == ["kubectl-patch"]
    (field,) = undone["fields"]
    assert field["path"].endswith("resources[cpu].nominalQuota") and (field["old"], field["new"]) == ("999", "8")
    assert drift["actor"] == "kubectl-patch"
    assert "nominalQuota was 999, put back to 8 (changed by kubectl-patch)" in drift["message"]
    (event,) = [e for e in syncer.store.events() if e["reason"] == "DriftCorrected"]
    assert "nominalQuota was 999, put back to 8 (changed by kubectl-patch)" in event["message"]
