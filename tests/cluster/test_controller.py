"""`gitopsq controller` as real processes on the rig: one writer per Lease, hand-over, webhooks, health, shutdown."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from envtest_rig import Envtest
from test_sync import QueueRepo, cpu_of, cq_live, get

from gitopsq.webhook_git import sign

pytestmark = pytest.mark.envtest

ROOT = Path(__file__).resolve().parents[2]
NS = "gitopsq-system"
SECRET = b"webhook-secret-for-tests"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class ControllerProcess:
    """One `gitopsq controller` subprocess; its JSON log lines are read from a file."""

    def __init__(self, env: Envtest, repo: QueueRepo, tmp: Path, identity: str, *extra: str) -> None:
        self.identity = identity
        self.port = free_port()
        self.log = tmp / f"{identity}.log"
        args = ["controller", "--repo", str(repo.path), "--branch", "main", "--kubeconfig", str(env.kubeconfig),
                "--health-addr", f"127.0.0.1:{self.port}", "--metrics-addr", "", "--name", repo.tag,
                "--lease-name", f"lease-{repo.tag}", "--identity", identity, "--lease-duration", "15s",
                "--renew-deadline", "10s", "--retry-period", "1s", "--log-format", "json", *extra]
        # The Lease times are the defaults: a renewal starved of CPU for a few seconds on a loaded machine must
        # not hand the Lease over; hand-over in these tests is by release (SIGTERM), never by expiry.
        with self.log.open("wb") as out:
            self.proc = subprocess.Popen([sys.executable, "-m", "gitopsq", *args], cwd=ROOT, stdout=out,
                                         stderr=subprocess.STDOUT)

    def events(self) -> list[dict[str, Any]]:
        lines = self.log.read_text(errors="replace").splitlines()
        return [json.loads(line) for line in lines if line.startswith("{")]

    def sync_passes(self) -> list[dict[str, Any]]:
        return [e for e in self.events() if e.get("event") == "sync pass"]

    def http(self, path: str, body: bytes | None = None, headers: dict[str, str] | None = None) -> int:
        request = urllib.request.Request(f"http://127.0.0.1:{self.port}{path}", data=body, headers=headers or {},
                                         method="POST" if body is not None else "GET")
        try:
            with urllib.request.urlopen(request, timeout=30) as answer:
                return int(answer.status)
        except urllib.error.HTTPError as err:
            return int(err.code)
        except (urllib.error.URLError, ConnectionError):
            return 0

    def stop(self, sig: int = signal.SIGTERM) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        return self.proc.wait(timeout=60)


def wait_for(what: Callable[[], Any], timeout: float = 60.0, message: str = "") -> Any:
    """Poll until ``what`` is truthy; the timeout only bounds a failure (generous: CI machines may be loaded)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = what()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {message or what}")


@pytest.fixture
def repo(tmp_path: Path) -> QueueRepo:
    r = QueueRepo(tmp_path / "queues", f"c{uuid.uuid4().hex[:6]}")
    r.commit("template")
    return r


@pytest.fixture
def processes(kueue_clean: Envtest) -> Iterator[list[ControllerProcess]]:
    started: list[ControllerProcess] = []
    yield started
    for p in started:
        p.stop(signal.SIGKILL)


def lease_holder(env: Envtest, repo: QueueRepo) -> str | None:
    lease = get(env, f"/apis/coordination.k8s.io/v1/namespaces/{NS}/leases/lease-{repo.tag}")
    return None if lease is None else (lease["spec"].get("holderIdentity") or "")


def applied_revision(env: Envtest, repo: QueueRepo) -> str | None:
    source = get(env, f"/apis/gitopsq.dev/v1alpha1/namespaces/{NS}/gitsources/{repo.tag}")
    return None if source is None else (source.get("status") or {}).get("lastAppliedRevision")


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
