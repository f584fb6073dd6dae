"""`gitopsq controller` in each mode as a real process on the rig: admission-only admits without a repository,
the combined mode syncs and admits, sync-only leaves Jobs alone; metrics and audit records of a combined run."""

from __future__ import annotations

import json
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from cluster_rig import admitted, apply, create_job, job, job_manifest, workload_of
from controller_process import Controller, killed_at_end, wait_for
from envtest_rig import Envtest
from queue_repo import QueueRepo, cpu_of, cq_live, cq_yaml, template_repo

pytestmark = pytest.mark.envtest


@pytest.fixture
def started(kueue_clean: Envtest) -> Iterator[list[Controller]]:
    with killed_at_end() as processes:
        yield processes


@pytest.fixture
def repo(tmp_path: Path) -> QueueRepo:
    return template_repo(tmp_path / "queues", "m")


def queues_by_hand(env: Envtest, tag: str) -> str:
    """A namespace, flavor, ClusterQueue and LocalQueue applied directly (as Argo CD would); returns the namespace."""
    namespace = env.new_namespace(tag)
    flavor = f"apiVersion: kueue.x-k8s.io/v1beta2\nkind: ResourceFlavor\nmetadata:\n  name: {tag}-default\n---\n"
    lq = (f"---\napiVersion: kueue.x-k8s.io/v1beta2\nkind: LocalQueue\nmetadata:\n  name: main\n"
          f"  namespace: {namespace}\nspec:\n  clusterQueue: {tag}\n")
    apply(env, flavor + cq_yaml(tag).replace("name: default", f"name: {tag}-default") + lq)
    return namespace


def test_admission_only_admits_without_a_repository(kueue_clean: Envtest, tmp_path: Path,
                                                    started: list[Controller]) -> None:
    """--admission-only needs no --repo: a queued Job under hand-applied queues is admitted and unsuspended, the
    Kueue metrics appear on the metrics endpoint, and no sync runs."""
    tag = f"ao{uuid.uuid4().hex[:6]}"
    namespace = queues_by_hand(kueue_clean, tag)
    proc = Controller(kueue_clean, tmp_path, "admission", "--admission-only", "--qps", "100", "--burst", "200")
    started.append(proc)
    create_job(kueue_clean, job_manifest(namespace, "first", "main", {"cpu": "1"}))
    wait_for(lambda: admitted(kueue_clean, namespace, "first"), message="admission")
    wait_for(lambda: job(kueue_clean, namespace, "first")["spec"]["suspend"] is False, message="job started")
    text = wait_for(lambda: (t := proc.scrape()) and f'cluster_queue="{tag}"' in t and t, message="metrics")
    assert f'kueue_admitted_workloads_total{{cluster_queue="{tag}",priority_class="",replica_role="standalone"}}' \
           " 1.0" in text
    assert "sync pass" not in proc.events()
    assert proc.stop() == 0


def test_combined_mode_syncs_the_repository_and_admits(kueue_clean: Envtest, repo: QueueRepo, tmp_path: Path,
                                                       started: list[Controller]) -> None:
    """Without a mode flag one process applies the queues from Git and admits a Job into them; the applied
    revision is a metric labelled with the GitSource and the revision."""
    sha = repo._git("rev-parse", "HEAD")
    proc = Controller(kueue_clean, tmp_path, "combined", "--repo", str(repo.path), "--name", repo.tag,
                      "--interval", "1s")
    started.append(proc)
    wait_for(lambda: "sync pass" in proc.events(), message="a sync pass")
    create_job(kueue_clean, job_manifest(repo.team_a, "train", "main", {"cpu": "2"}))
    wait_for(lambda: admitted(kueue_clean, repo.team_a, "train"), message="admission into the synced queue")
    revision = f'gitopsq_sync_applied_revision_info{{revision="{sha}",source="gitopsq-system/{repo.tag}"}} 1.0'
    # The series follow the pass's log line; a loaded machine may scrape in between.
    text = wait_for(lambda: (t := proc.scrape()) and revision in t and t, message="the applied revision series")
    assert 'gitopsq_sync_total{outcome="applied"}' in text
    assert proc.stop() == 0


def test_sync_only_does_not_admit(kueue_clean: Envtest, repo: QueueRepo, tmp_path: Path,
                                  started: list[Controller]) -> None:
    """--sync-only applies the queues but creates no Workload for a queued Job (another scheduler admits)."""
    proc = Controller(kueue_clean, tmp_path, "sync", "--sync-only", "--repo", str(repo.path), "--name", repo.tag,
                      "--interval", "1s")
    started.append(proc)
    wait_for(lambda: proc.events().count("sync pass") >= 2, message="two sync passes")
    create_job(kueue_clean, job_manifest(repo.team_a, "waits", "main", {"cpu": "1"}))
    wait_for(lambda: proc.events().count("sync pass") >= 5, message="three more passes")
    assert workload_of(kueue_clean, repo.team_a, "waits") is None
    assert job(kueue_clean, repo.team_a, "waits")["spec"]["suspend"] is True
    assert "kueue_admitted_workloads_total{" not in proc.scrape()
    assert proc.stop() == 0


def test_audit_records_of_sync_and_admission_reach_the_branch(kueue_clean: Envtest, repo: QueueRepo, tmp_path: Path,
                                                              started: list[Controller]) -> None:
    """With --audit-wal-dir the combined controller records the sync (with its commit and the approval trailer of
    the history) and the admission on the audit branch, and exports the audit series."""
    repo.write("queues/team-b.yaml", repo.cq(repo.team_b, cpu="4") + repo.lq(repo.team_b))
    sha = repo.commit("team-b: 4 cpus\n\nApproved-by: Pat Lead <pat@example.com>")
    audit_repo = tmp_path / "audit.git"
    subprocess.run(["git", "init", "-q", "--bare", str(audit_repo)], check=True)
    proc = Controller(kueue_clean, tmp_path, "audited", "--repo", str(repo.path), "--name", repo.tag,
                      "--interval", "1s", "--audit-wal-dir", str(tmp_path / "wal"), "--audit-repo", str(audit_repo))
    started.append(proc)
    wait_for(lambda: "sync pass" in proc.events(), message="a sync pass")
    create_job(kueue_clean, job_manifest(repo.team_b, "audited", "main", {"cpu": "1"}))
    wait_for(lambda: admitted(kueue_clean, repo.team_b, "audited"), message="admission")
    wait_for(lambda: "gitopsq_audit_last_push_timestamp_seconds " in proc.scrape(), message="audit metrics")
    assert proc.stop() == 0
    assert "audit_batch_pushed" in proc.events()  # the audit module's logger follows logs.configure (JSON lines)
    shown = subprocess.run(["git", "--git-dir", str(audit_repo), "log", "-p", "gitopsq/audit"], capture_output=True,
                           text=True, check=True).stdout
    records = [json.loads(line[1:]) for line in shown.splitlines()
               if line.startswith('+{"') and '"type":' in line]
    sync = next(r for r in records if r["type"] == "sync.attempt")
    assert sync["revision"] == sha and sync["commit"]["sha"] == sha
    assert [a["email"] for a in sync["approvals"]] == ["pat@example.com"]
    assert any(r["type"] == "admission.admitted" and r["workload"]["namespace"] == repo.team_b for r in records)


def test_drift_corrections_are_counted_by_kind(kueue_clean: Envtest, repo: QueueRepo, tmp_path: Path,
                                               started: list[Controller]) -> None:
    """A ClusterQueue edited by hand is put back by the drift check and counted in
    gitopsq_sync_drift_corrections_total{kind="ClusterQueue"}."""
    proc = Controller(kueue_clean, tmp_path, "drift", "--sync-only", "--repo", str(repo.path), "--name", repo.tag,
                      "--interval", "500ms", "--drift-interval", "1s")
    started.append(proc)
    wait_for(lambda: "sync pass" in proc.events(), message="a sync pass")
    patch = '[{"op": "replace", "path": "/spec/resourceGroups/0/flavors/0/resources/0/nominalQuota", "value": "99"}]'
    kueue_clean.kubectl("patch", "clusterqueue", repo.team_a, "--type=json", "-p", patch)
    wait_for(lambda: cpu_of(cq_live(kueue_clean, repo.team_a)) == "8", message="drift corrected")
    text = wait_for(lambda: (t := proc.scrape()) and "gitopsq_sync_drift_corrections_total{" in t and t,
                    message="drift metric")
    assert 'gitopsq_sync_drift_corrections_total{kind="ClusterQueue"} 1.0' in text
    assert proc.stop() == 0
