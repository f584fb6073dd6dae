"""Revisions only move forward, on the real API server: a branch moved back to an older revision, or force-pushed
onto another history, is refused before validation; nothing is applied, the GitSource is Stalled with reason
HistoryRewound, and an Event, a metric and an audit record name both revisions (docs/sync.md). Going back is a
revert commit, applied like any change."""

from __future__ import annotations

import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
from controller_process import ROOT
from envtest_rig import Envtest
from prometheus_client import CollectorRegistry
from queue_repo import NS, QueueRepo, cpu_of, cq_live, get

from gitopsq.cluster.apply import KubeRest
from gitopsq.cluster.status import SourceRef
from gitopsq.metrics import SyncMetrics
from gitopsq.source import open_source
from gitopsq.sync.syncer import Syncer
from gitopsq.sync.values import SyncOptions

pytestmark = pytest.mark.envtest


class Records:
    """An audit sink that keeps what it is given (the trail's own tests cover writing it to Git)."""

    def __init__(self) -> None:
        self.items: list[dict[str, Any]] = []

    def record(self, record: Any) -> None:
        self.items.append(dict(record.data))


@pytest.fixture
def repo(tmp_path: Path) -> QueueRepo:
    r = QueueRepo(tmp_path / "queues", f"f{uuid.uuid4().hex[:6]}")
    r.commit("template")
    return r


def make_syncer(env: Envtest, repo: QueueRepo, audit: Records | None = None) -> Syncer:
    """A fresh syncer, as `gitopsq apply` makes: what was applied comes from the GitSource's status alone."""
    return Syncer(open_source(str(repo.path)), KubeRest(env.api_client()), SourceRef(NS, repo.tag),
                  url=str(repo.path), audit=audit)


def status_of(env: Envtest, repo: QueueRepo) -> dict[str, Any]:
    obj = get(env, f"/apis/gitopsq.dev/v1alpha1/namespaces/{NS}/gitsources/{repo.tag}")
    assert obj is not None
    return dict(obj["status"])


def conditions(status: dict[str, Any]) -> dict[str, tuple[str, str]]:
    return {c["type"]: (c["status"], c["reason"]) for c in status["conditions"]}


def quota(repo: QueueRepo, cpu: str, message: str) -> str:
    repo.write("queues/team-a.yaml", repo.cq(repo.team_a, cpu=cpu) + repo.lq(repo.team_a))
    return repo.commit(message)


def test_a_rewound_branch_is_refused_and_the_applied_revision_stays(kueue_clean: Envtest, repo: QueueRepo) -> None:
    """main moved back from the applied revision (16 cpus) to its parent (8 cpus): refused, nothing written,
    Stalled HistoryRewound, one Event and one audit record naming both commits, counted by the metric; polling
    again adds neither. A revert on top of the applied revision then goes back the right way."""
    old = make_syncer(kueue_clean, repo).sync()
    assert old.outcome == "applied", old.to_json()
    applied = quota(repo, "16", "team-a: 16 cpus")
    assert make_syncer(kueue_clean, repo).sync().outcome == "applied"
    assert cpu_of(cq_live(kueue_clean, repo.team_a)) == "16"

    repo._git("reset", "-q", "--hard", old.revision or "")
    records = Records()
    registry = CollectorRegistry()
    metrics = SyncMetrics(registry)
    syncer = make_syncer(kueue_clean, repo, records)
    result = syncer.sync()
    metrics.observe(result)
    assert result.outcome == "rewound" and result.exit_code == 1, result.to_json()
    assert result.revision == old.revision and result.plan is None
    assert cpu_of(cq_live(kueue_clean, repo.team_a)) == "16"
    status = status_of(kueue_clean, repo)
    assert status["lastAppliedRevision"] == applied
    assert status["lastAttemptedRevision"] == old.revision
    assert conditions(status) == {"Ready": ("False", "HistoryRewound"), "Stalled": ("True", "HistoryRewound")}
    assert status["lastRejection"]["revision"] == old.revision
    assert status["lastRejection"]["findings"][0]["code"] == "history-not-forward"
    message = status["conditions"][0]["message"]
    assert f"revision {(old.revision or '')[:12]} does not descend from {applied[:12]}" in message, message
    assert "the branch was moved back" in message and f"revision {applied} stays applied" in message
    assert [(r["type"], r["reason"], r["revision"], r["appliedRevision"]) for r in records.items] == [
        ("sync.rejected", "HistoryRewound", old.revision, applied)]
    assert registry.get_sample_value("gitopsq_sync_rewinds_refused_total") == 1
    assert registry.get_sample_value("gitopsq_sync_total", {"outcome": "rewound"}) == 1

    again = syncer.sync()  # polled again: the same refusal, no second Event or record
    assert again.outcome == "rewound"
    assert [e["reason"] for e in syncer.store.events()].count("HistoryRewound") == 1
    assert len(records.items) == 1

    repo._git("reset", "-q", "--hard", applied)  # the branch put back, then the way back: a revert commit
    repo._git("revert", "--no-edit", "HEAD")
    reverted = make_syncer(kueue_clean, repo).sync()
    assert reverted.outcome == "applied", reverted.to_json()
    assert cpu_of(cq_live(kueue_clean, repo.team_a)) == "8"
    assert conditions(status_of(kueue_clean, repo)) == {"Ready": ("True", "ReconciliationSucceeded")}


def test_a_force_push_onto_another_history_is_refused(kueue_clean: Envtest, repo: QueueRepo) -> None:
    """main replaced by an unrelated history holding the same files: nothing differs, yet it is refused as a
    history that has diverged from the applied revision."""
    applied = make_syncer(kueue_clean, repo).sync()
    assert applied.outcome == "applied", applied.to_json()
    repo._git("checkout", "-q", "--orphan", "other")
    repo._git("commit", "-q", "-m", "a fresh start")
    repo._git("branch", "-q", "-f", "main", "other")
    repo._git("checkout", "-q", "main")
    result = make_syncer(kueue_clean, repo).sync(SyncOptions(rev="main"))
    assert result.outcome == "rewound", result.to_json()
    assert "the two histories have diverged" in (result.error or "")
    assert status_of(kueue_clean, repo)["lastAppliedRevision"] == applied.revision


def test_gitopsq_apply_of_an_older_revision_exits_1_and_changes_nothing(kueue_clean: Envtest,
                                                                      repo: QueueRepo) -> None:
    """`gitopsq apply --rev <an ancestor of the applied revision>` is a rewind too: exit 1 naming both revisions,
    the applied quota stays; `--rev` of the branch, which moved on, applies."""
    older = repo._git("rev-parse", "HEAD")
    applied = quota(repo, "16", "team-a: 16 cpus")

    def apply(rev: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "gitopsq", "apply", str(repo.path), "--rev", rev, "--name",
                               repo.tag, "--kubeconfig", str(kueue_clean.kubeconfig)], cwd=ROOT,
                              capture_output=True, text=True, check=False, timeout=120)

    assert apply("main").returncode == 0
    done = apply(older)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "rewound" in done.stdout and f"does not descend from {applied[:12]}" in done.stdout, done.stdout
    assert cpu_of(cq_live(kueue_clean, repo.team_a)) == "16"
    assert status_of(kueue_clean, repo)["lastAppliedRevision"] == applied
