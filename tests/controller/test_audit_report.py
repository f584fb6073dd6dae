"""The controller's audit anchor in the GitSource status and the rewind Event, on the rig's real API server; and
`gitopsq audit verify --anchor-from-cluster` finding a rewind the repository alone no longer shows."""

from __future__ import annotations

import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pygit2
from click.testing import CliRunner
from envtest_rig import Envtest

from gitopsq.audit import records
from gitopsq.audit.sink import TrailSettings
from gitopsq.audit.trail import AuditTrail
from gitopsq.audit.verify import verify_branch
from gitopsq.cluster.apply import KubeRest
from gitopsq.cluster.status import SourceRef, StatusStore
from gitopsq.commands.audit import command
from gitopsq.controller.audit_report import AuditReport
from gitopsq.errors import AuditError

BRANCH = "gitopsq/audit"
NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def admitted(i: int) -> records.Record:
    return records.admission("admitted", time=NOW, workload=records.WorkloadRef("team-a", f"w{i}", f"uid-{i}"),
                             cluster_queue="cq-a", flavors={}, times={}, within_nominal_quota=True)


def fast_settings() -> TrailSettings:
    return TrailSettings(batch_seconds=0.05, batch_records=100_000, backoff_initial=0.05, backoff_max=0.2)


def bare_repo(path: Path) -> Path:
    subprocess.run(["git", "init", "-q", "--bare", str(path)], check=True)
    return path


def workload_names(remote: Path) -> list[str]:
    return [s.entry["workload"]["name"] for s in verify_branch(pygit2.Repository(str(remote)), BRANCH).entries]


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout.strip()


def test_the_gitsource_anchor_exposes_a_rewind_and_the_incident_is_an_event(kueue_crds: Envtest,
                                                                             tmp_path: Path) -> None:
    """The anchor the controller wrote to status.audit catches a rewind that also removed the anchor ref; the
    restarted writer's incident becomes one Warning Event naming the recovery ref."""
    namespace = kueue_crds.new_namespace("audit")
    remote, wal = bare_repo(tmp_path / "remote.git"), tmp_path / "wal"
    with kueue_crds.api_client() as api:
        store = StatusStore(KubeRest(api), SourceRef(namespace, "queues"))
        report = AuditReport(store)
        with AuditTrail.open(str(remote), wal, settings=fast_settings()) as trail:
            for batch in (range(10), range(10, 20)):
                for i in batch:
                    trail.record(admitted(i))
                assert trail.flush(30)
            report.observe(trail.status(), NOW)  # before the first sync made the GitSource: nothing, no error
            assert not store.read().exists
            store.ensure(url=str(remote), ref="main", prune=True)
            report.observe(trail.status(), NOW)
            assert store.read().status["audit"]["head"]["seq"] == 20  # type: ignore[index]
            trail.record(admitted(20))
            assert trail.flush(30)
            report.observe(trail.status(), NOW + timedelta(seconds=5))
            assert store.read().status["audit"]["head"]["seq"] == 20, \
                "a push 5 s later is not yet published"  # type: ignore[index]
            report.observe(trail.status(), NOW + timedelta(seconds=31))
        audit = store.read().status["audit"]  # type: ignore[index]
        assert audit["branch"] == BRANCH and audit["head"]["seq"] == 21 and audit["ref"] == f"refs/heads/{BRANCH}"
        assert audit["commit"] == _git(remote, "rev-parse", BRANCH)

        first = _git(remote, "rev-list", "--max-parents=0", BRANCH)
        _git(remote, "update-ref", f"refs/heads/{BRANCH}", first)  # rewound, and the anchor ref removed
        _git(remote, "update-ref", "-d", f"refs/gitopsq/audit-anchor/{BRANCH}")
        assert workload_names(remote) == [f"w{i}" for i in range(10)]

        runner = CliRunner()
        alone = runner.invoke(command, ["verify", str(remote)])
        assert alone.exit_code == 0, "the repository alone no longer shows the rewind"
        anchored = runner.invoke(command, ["verify", str(remote), "--anchor-from-cluster", f"{namespace}/queues",
                                           "--kubeconfig", str(kueue_crds.kubeconfig)])
        assert anchored.exit_code == 1, anchored.output
        assert f"REWOUND: GitSource {namespace}/queues names chain head 21 " in anchored.output
        missing = runner.invoke(command, ["verify", str(remote), "--anchor-from-cluster", f"{namespace}/nothing",
                                          "--kubeconfig", str(kueue_crds.kubeconfig)])
        assert isinstance(missing.exception, AuditError) and missing.exception.exit_code == 3
        assert f"no GitSource {namespace}/nothing" in str(missing.exception)

        with AuditTrail.open(str(remote), wal, settings=fast_settings()) as trail:
            trail.record(admitted(21))
            assert not trail.flush(30)
            incident = trail.status().incident
            assert incident is not None
            for _ in range(2):  # the same incident sampled twice: one Event
                report.observe(trail.status(), NOW + timedelta(seconds=32))
        events = [e for e in store.events() if e["reason"] == "AuditBranchRewound"]
        assert len(events) == 1 and events[0]["type"] == "Warning"
        assert incident.recovery_ref in events[0]["message"] and first[:12] in events[0]["message"]
        audit = store.read().status["audit"]  # type: ignore[index]
        assert audit["ref"] == incident.recovery_ref and audit["head"]["seq"] == 22
