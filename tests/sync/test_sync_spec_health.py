"""The GitSource's spec.suspend, spec.paths and spec.interval, and health after apply, on the real API server
(docs/sync.md)."""

from __future__ import annotations

import json
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from envtest_rig import Envtest
from queue_repo import NS, QueueRepo, cpu_of, cq_live, get

from gitopsq.admission_loop.loop import AdmissionLoop
from gitopsq.admission_loop.options import LoopOptions
from gitopsq.cluster.apply import KubeRest
from gitopsq.cluster.status import SourceRef
from gitopsq.source import open_source
from gitopsq.sync.runnable import SyncLoop
from gitopsq.sync.syncer import Syncer
from gitopsq.sync.values import SyncOptions

pytestmark = pytest.mark.envtest


@pytest.fixture
def repo(tmp_path: Path) -> QueueRepo:
    r = QueueRepo(tmp_path / "queues", f"s{uuid.uuid4().hex[:6]}")
    r.commit("template")
    return r


def make_syncer(env: Envtest, repo: QueueRepo) -> Syncer:
    return Syncer(open_source(str(repo.path)), KubeRest(env.api_client()), SourceRef(NS, repo.tag),
                  url=str(repo.path))


def source(env: Envtest, repo: QueueRepo) -> dict[str, Any]:
    obj = get(env, f"/apis/gitopsq.dev/v1alpha1/namespaces/{NS}/gitsources/{repo.tag}")
    assert obj is not None
    return obj


def set_spec(env: Envtest, repo: QueueRepo, **spec: Any) -> None:
    """Edit the GitSource's spec as a person would (kubectl patch, another field manager)."""
    env.kubectl("patch", "gitsource", repo.tag, "-n", NS, "--type", "merge", "-p", json.dumps({"spec": spec}))


def conditions(obj: dict[str, Any]) -> dict[str, tuple[str, str]]:
    return {c["type"]: (c["status"], c["reason"]) for c in obj["status"]["conditions"]}


def test_suspend_stops_applying_and_drift_correction_but_keeps_reporting(kueue_clean: Envtest,
                                                                         repo: QueueRepo) -> None:
    """With spec.suspend a new commit is not applied and a kubectl edit is not corrected; the status gains
    Suspended=True naming the Git revision waiting, Ready keeps its last value; resuming applies both."""
    rig = kueue_clean
    syncer = make_syncer(rig, repo)
    first = syncer.sync()
    assert first.outcome == "applied"
    set_spec(rig, repo, suspend=True)
    rig.kubectl("patch", "clusterqueue", repo.team_b, "--type", "json", "-p",
                '[{"op":"replace","path":"/spec/resourceGroups/0/flavors/0/resources/0/nominalQuota","value":"2"}]')
    repo.write("queues/team-a.yaml", repo.cq(repo.team_a, cpu="16") + repo.lq(repo.team_a))
    sha = repo.commit("team-a: 16 cpus")
    result = syncer.sync()
    assert result.outcome == "suspended" and result.exit_code == 1
    assert cpu_of(cq_live(rig, repo.team_a)) == "8" and cpu_of(cq_live(rig, repo.team_b)) == "2"
    obj = source(rig, repo)
    assert conditions(obj) == {"Ready": ("True", "ReconciliationSucceeded"), "Suspended": ("True", "Suspended")}
    assert sha in obj["status"]["conditions"][1]["message"]
    assert obj["status"]["lastAppliedRevision"] == first.revision
    assert [e["reason"] for e in syncer.store.events()].count("Suspended") == 1
    set_spec(rig, repo, suspend=False)
    resumed = syncer.sync()
    assert resumed.outcome == "applied" and resumed.revision == sha
    assert cpu_of(cq_live(rig, repo.team_a)) == "16" and cpu_of(cq_live(rig, repo.team_b)) == "8"
    assert conditions(source(rig, repo)) == {"Ready": ("True", "ReconciliationSucceeded")}


def test_paths_limit_the_objects_a_revision_applies(kueue_clean: Envtest, repo: QueueRepo) -> None:
    """spec.paths [namespaces.yaml, flavors.yaml, queues/team-a.yaml] applies only those files' objects; the
    team-b file is validated with the rest but not applied."""
    rig = kueue_clean
    syncer = make_syncer(rig, repo)
    syncer.store.ensure(url=str(repo.path), ref="HEAD", prune=True)
    set_spec(rig, repo, paths=["namespaces.yaml", "./flavors.yaml", "queues/team-a.yaml"])
    result = syncer.sync()
    assert result.outcome == "applied", result.to_json()
    assert cq_live(rig, repo.team_a) is not None and cq_live(rig, repo.team_b) is None
    assert len(source(rig, repo)["status"]["inventory"]["entries"]) == 5  # 2 namespaces, flavor, CQ, LQ


def test_interval_overrides_the_poll_interval(kueue_clean: Envtest, repo: QueueRepo) -> None:
    """spec.interval "1m30s" makes the sync loop poll that source every 90 s instead of its own interval."""
    rig = kueue_clean
    syncer = make_syncer(rig, repo)
    loop = SyncLoop(syncer, SyncOptions(), interval=5.0, health_timeout=None)
    assert loop.once().outcome == "applied" and loop.poll_interval == 5.0
    set_spec(rig, repo, interval="1m30s")
    loop.once()
    assert loop.poll_interval == 90.0


def test_without_kueue_health_times_out_as_stalled(kueue_clean: Envtest, repo: QueueRepo) -> None:
    """With nothing writing queue status (no Kueue, no admission loop) a health check cannot pass: after the
    timeout the revision is applied but Ready=False HealthCheckFailed and Stalled, each queue Pending with the
    reason, exit 3; without a health check the same revision is Ready."""
    rig = kueue_clean
    syncer = make_syncer(rig, repo)
    result = syncer.sync(SyncOptions(health_timeout=1.0))
    assert result.outcome == "unhealthy" and result.exit_code == 3
    assert result.health is not None and {h.status for h in result.health} == {"Pending"}
    assert len(result.health) == 4 and "admission loop" in result.health[0].message
    obj = source(rig, repo)
    assert conditions(obj) == {"Ready": ("False", "HealthCheckFailed"), "Stalled": ("True", "HealthCheckFailed")}
    assert obj["status"]["lastAppliedRevision"] == result.revision
    assert obj["status"]["health"]["checked"] == 4 and obj["status"]["health"]["healthy"] == 0
    assert "4 of 4 queues not healthy" in obj["status"]["conditions"][0]["message"]
    assert "HealthCheckFailed" in [e["reason"] for e in syncer.store.events()]
    assert make_syncer(rig, repo).sync().outcome == "unchanged"  # nothing to write, and no health asked
    assert conditions(source(rig, repo)) == {"Ready": ("True", "ReconciliationSucceeded")}


def test_with_the_admission_loop_the_applied_queues_become_healthy(kueue_clean: Envtest, repo: QueueRepo) -> None:
    """With gitopsq's admission loop running (it writes the queues' Active conditions as Kueue does), a sync
    waiting for health reports every ClusterQueue and LocalQueue Healthy and the GitSource Ready; asking again
    on the applied revision judges it again and leaves the GitSource Ready."""
    rig = kueue_clean
    api = rig.api_client()
    loop = AdmissionLoop(api, LoopOptions(qps=200, burst=400, resync=1.0, message_refresh=0.0,
                                          queue_status_interval=0.1, local_queue_status_interval=0.1))
    stop = threading.Event()
    thread = threading.Thread(target=loop.run, args=(stop, lambda: True), daemon=True)
    thread.start()
    try:
        assert loop.synced.wait(30)
        result = make_syncer(rig, repo).sync(SyncOptions(health_timeout=60.0))
        again = make_syncer(rig, repo).sync(SyncOptions(health_timeout=60.0))  # asked again: judged again
    finally:
        stop.set()
        loop.cache.changed.set()
        thread.join(30)
    assert result.outcome == "applied", result.to_json()
    assert result.health is not None and len(result.health) == 4 and all(h.healthy for h in result.health)
    obj = source(rig, repo)
    assert conditions(obj) == {"Ready": ("True", "ReconciliationSucceeded")}
    assert obj["status"]["health"] == {"checked": 4, "healthy": 4, "objects": []}
    assert again.outcome == "unchanged" and again.health is not None and all(h.healthy for h in again.health)
    assert conditions(source(rig, repo)) == {"Ready": ("True", "ReconciliationSucceeded")}  # not left waiting


def test_the_controller_reports_health_as_reconciling_until_the_timeout(kueue_clean: Envtest,
                                                                        repo: QueueRepo) -> None:
    """The controller's sync loop does not block on health: while the queues have no verdict and the timeout
    has not passed the GitSource is Reconciling (HealthCheckPending, Ready Unknown); after it, Stalled."""
    rig = kueue_clean
    loop = SyncLoop(make_syncer(rig, repo), SyncOptions(), interval=5.0, health_timeout=1.5)
    first = loop.once()
    assert first.outcome == "health-pending" and loop.stats.consecutive_failures == 0
    obj = source(rig, repo)
    assert conditions(obj) == {"Ready": ("Unknown", "HealthCheckPending"), "Reconciling": ("True", "Progressing")}
    assert obj["status"]["lastAppliedRevision"] == first.revision
    time.sleep(1.6)
    assert loop.once().outcome == "unhealthy"
    assert conditions(source(rig, repo)) == {"Ready": ("False", "HealthCheckFailed"),
                                             "Stalled": ("True", "HealthCheckFailed")}
