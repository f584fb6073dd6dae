"""`gitopsq controller` as real processes on the rig: one writer per Lease, hand-over, webhooks, health, shutdown."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from cluster_rig import admitted, create_job, job_manifest, rest
from controller_process import ControllerProcess, applied_revision, killed_at_end, wait_for
from envtest_rig import Envtest
from queue_repo import QueueRepo, cpu_of, cq_live, get, template_repo

from gitopsq.cluster.kube import ClusterConflict
from gitopsq.webhook.push import sign

pytestmark = pytest.mark.envtest

NS = "gitopsq-system"
SECRET = b"webhook-secret-for-tests"


@pytest.fixture
def repo(tmp_path: Path) -> QueueRepo:
    return template_repo(tmp_path / "queues", "c")


@pytest.fixture
def processes(kueue_clean: Envtest) -> Iterator[list[ControllerProcess]]:
    with killed_at_end() as started:
        yield started


def lease_holder(env: Envtest, repo: QueueRepo) -> str | None:
    lease = get(env, f"/apis/coordination.k8s.io/v1/namespaces/{NS}/leases/lease-{repo.tag}")
    return None if lease is None else (lease["spec"].get("holderIdentity") or "")


def test_two_replicas_one_writer_and_hand_over_on_sigterm(kueue_clean: Envtest, repo: QueueRepo, tmp_path: Path,
                                                          processes: list[ControllerProcess]) -> None:
    """Of two replicas on one Lease only the holder syncs; SIGTERM releases the Lease and the other takes over."""
    sha = repo._git("rev-parse", "HEAD")
    processes += [ControllerProcess(kueue_clean, repo, tmp_path, f"replica-{i}", "--interval", "1s") for i in (1, 2)]
    wait_for(lambda: applied_revision(kueue_clean, repo) == sha, message="first sync")
    leader_id = wait_for(lambda: lease_holder(kueue_clean, repo), message="a lease holder")
    leader = next(p for p in processes if p.identity == leader_id)
    standby = next(p for p in processes if p.identity != leader_id)
    wait_for(lambda: len(leader.sync_passes()) >= 3, message="leader polling")
    assert standby.sync_passes() == []
    assert leader.http("/healthz") == 200 and standby.http("/readyz") == 200

    assert leader.stop() == 0
    assert any(e.get("event") == "released lease" for e in leader.events())
    repo.write("queues/team-a.yaml", repo.cq(repo.team_a, cpu="12") + repo.lq(repo.team_a))
    new_sha = repo.commit("after hand-over")
    wait_for(lambda: applied_revision(kueue_clean, repo) == new_sha, message="standby applies")
    assert lease_holder(kueue_clean, repo) == standby.identity
    assert cpu_of(cq_live(kueue_clean, repo.team_a)) == "12"


def _steal(env: Envtest, repo: QueueRepo) -> bool:
    """Write another holder on the Lease for 3 s (False when a renewal got in between: try again)."""
    path = f"/apis/coordination.k8s.io/v1/namespaces/{NS}/leases/lease-{repo.tag}"
    lease = get(env, path)
    assert lease is not None
    lease["spec"].update(holderIdentity="thief", leaseDurationSeconds=3,
                         renewTime=time.strftime("%Y-%m-%dT%H:%M:%S.000000Z", time.gmtime()))
    try:
        rest(env).request("PUT", path, body=lease, retry=False)
    except ClusterConflict:
        return False
    return True


def _count(proc: ControllerProcess, event: str) -> int:
    return sum(1 for e in proc.events() if e.get("event") == event)


def test_a_replica_that_loses_the_lease_and_takes_it_back_admits_and_syncs_again(
        kueue_clean: Envtest, repo: QueueRepo, tmp_path: Path, processes: list[ControllerProcess]) -> None:
    """Another holder on the Lease stops the runnables at the next renewal; once it expires the replica leads
    again, and both loops work again: a queued Job is admitted (a new term builds the admission loop's watches
    afresh) and a new commit is applied — no runnable failed."""
    sha = repo._git("rev-parse", "HEAD")
    proc = ControllerProcess(kueue_clean, repo, tmp_path, "flapping", "--interval", "1s")
    processes.append(proc)
    wait_for(lambda: applied_revision(kueue_clean, repo) == sha, message="first sync")
    create_job(kueue_clean, job_manifest(repo.team_a, "before", "main", {"cpu": "1"}))
    wait_for(lambda: admitted(kueue_clean, repo.team_a, "before"), message="admission in the first term")

    assert lease_holder(kueue_clean, repo) == proc.identity
    wait_for(lambda: _steal(kueue_clean, repo), message="another holder written over the renewals")
    wait_for(lambda: _count(proc, "runnables stopped") >= 1, message="runnables stopped under another holder")
    wait_for(lambda: _count(proc, "runnables started") >= 2, message="leading again once the Lease expired")
    assert lease_holder(kueue_clean, repo) == proc.identity

    create_job(kueue_clean, job_manifest(repo.team_a, "after", "main", {"cpu": "1"}))
    wait_for(lambda: admitted(kueue_clean, repo.team_a, "after"), message="admission in the second term")
    assert _count(proc, "admission loop leads again") == 1
    repo.write("queues/team-a.yaml", repo.cq(repo.team_a, cpu="7") + repo.lq(repo.team_a))
    new_sha = repo.commit("after the second term began")
    wait_for(lambda: applied_revision(kueue_clean, repo) == new_sha, message="sync in the second term")
    assert cpu_of(cq_live(kueue_clean, repo.team_a)) == "7"
    assert _count(proc, "runnable failed; restarting it") == 0
    assert "Traceback" not in proc.log.read_text(errors="replace")
    assert proc.stop() == 0


def test_webhook_triggers_a_sync_only_when_signed(kueue_clean: Envtest, repo: QueueRepo, tmp_path: Path,
                                                  processes: list[ControllerProcess]) -> None:
    """With an hour-long interval, a correctly signed push webhook applies a new commit at once; a bad one does not."""
    secret_file = tmp_path / "secret"
    secret_file.write_bytes(SECRET + b"\n")
    proc = ControllerProcess(kueue_clean, repo, tmp_path, "solo", "--interval", "1h", "--webhook-secret-file",
                             str(secret_file))
    processes.append(proc)
    first = repo._git("rev-parse", "HEAD")
    wait_for(lambda: applied_revision(kueue_clean, repo) == first, message="first sync")
    repo.write("queues/team-b.yaml", repo.cq(repo.team_b, cpu="3") + repo.lq(repo.team_b))
    new_sha = repo.commit("team-b: 3 cpus")
    body = json.dumps({"ref": "refs/heads/main", "after": new_sha}).encode()

    bad = proc.http("/hooks/git", body, {"X-Hub-Signature-256": sign(b"guess", body), "X-GitHub-Event": "push"})
    assert bad == 401
    time.sleep(2)
    assert applied_revision(kueue_clean, repo) == first

    good = proc.http("/hooks/git", body, {"X-Hub-Signature-256": sign(SECRET, body), "X-GitHub-Event": "push"})
    assert good == 202
    wait_for(lambda: applied_revision(kueue_clean, repo) == new_sha, message="webhook sync")
    assert cpu_of(cq_live(kueue_clean, repo.team_b)) == "3"
    assert proc.stop(signal.SIGINT) == 0


def test_unreachable_api_keeps_running_and_recovers(kueue_clean: Envtest, repo: QueueRepo, tmp_path: Path,
                                                    processes: list[ControllerProcess]) -> None:
    """While the API server is down the controller stays up (healthz 200) and applies the new commit once it is back."""
    proc = ControllerProcess(kueue_clean, repo, tmp_path, "solo", "--interval", "1s", "--no-leader-elect")
    processes.append(proc)
    first = repo._git("rev-parse", "HEAD")
    wait_for(lambda: applied_revision(kueue_clean, repo) == first, message="first sync")
    kueue_clean.stop_apiserver()
    try:
        repo.write("queues/team-a.yaml", repo.cq(repo.team_a, cpu="5") + repo.lq(repo.team_a))
        new_sha = repo.commit("during the outage")
        time.sleep(2)
        assert proc.proc.poll() is None and proc.http("/healthz") == 200
    finally:
        kueue_clean.start_apiserver()
    wait_for(lambda: applied_revision(kueue_clean, repo) == new_sha, timeout=90, message="sync after outage")
    assert cpu_of(cq_live(kueue_clean, repo.team_a)) == "5"


def test_sync_records_reach_the_audit_branch(kueue_clean: Envtest, repo: QueueRepo, tmp_path: Path,
                                             processes: list[ControllerProcess]) -> None:
    """With --audit-wal-dir, the first sync is recorded as sync.attempt on the audit branch of --audit-repo."""
    audit_repo = tmp_path / "audit.git"
    subprocess.run(["git", "init", "-q", "--bare", str(audit_repo)], check=True)
    proc = ControllerProcess(kueue_clean, repo, tmp_path, "audited", "--interval", "1s", "--no-leader-elect",
                             "--audit-wal-dir", str(tmp_path / "wal"), "--audit-repo", str(audit_repo))
    processes.append(proc)
    sha = repo._git("rev-parse", "HEAD")
    wait_for(lambda: applied_revision(kueue_clean, repo) == sha, message="first sync")
    assert proc.stop() == 0
    shown = subprocess.run(["git", "--git-dir", str(audit_repo), "log", "-p", "gitopsq/audit"], capture_output=True,
                           text=True, check=True).stdout
    assert "sync.attempt" in shown and sha in shown
