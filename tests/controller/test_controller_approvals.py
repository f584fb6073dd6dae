"""The controller's sync records on the rig carry the approvals the ownership in gitopsq.yaml requires."""

from __future__ import annotations

import subprocess
import uuid
from pathlib import Path
from typing import Any

import pygit2
import pytest
from controller_process import ControllerProcess, applied_revision, wait_for
from envtest_rig import Envtest
from queue_repo import QueueRepo

from gitopsq.audit.evidence import build_evidence
from gitopsq.audit.verify import verify_branch

pytestmark = pytest.mark.envtest

TEAM_A = """  - name: team-a
    paths: ["queues/team-a.yaml"]
    namespaces: [{ns}]
    maintainers: [{{name: Ann, email: ann@example.com}}]
"""
NICK, ANN, PLATFORM = ("Nick", "nick@example.com"), ("Ann", "ann@example.com"), ("t", "t@example.com")


def team_a_queues(repo: QueueRepo, cpu: str) -> str:
    """team-a's ClusterQueue (selecting only its namespace, as the built-in policies want) and LocalQueue."""
    selector = f"namespaceSelector:\n    matchLabels:\n      kubernetes.io/metadata.name: {repo.team_a}"
    return repo.cq(repo.team_a, cpu=cpu).replace("namespaceSelector: {}", selector) + repo.lq(repo.team_a)


def merged_change(repo: QueueRepo, cpu: str, *, merger: tuple[str, str]) -> str:
    """Nick (no team) changes team-a's quota on a branch; ``merger`` merges it into main (a merge commit)."""
    branch = f"cpu-{cpu}"
    repo._git("checkout", "-q", "-b", branch)
    repo.write("queues/team-a.yaml", team_a_queues(repo, cpu))
    repo.commit(f"team-a: {cpu} cpu", author=NICK)
    repo._git("checkout", "-q", "main")
    repo._git("merge", "--no-ff", "-q", "-m", f"Merge {branch}", branch, author=merger)
    return repo._git("rev-parse", "HEAD")


def sync_records(audit_repo: Path) -> dict[str, dict[str, Any]]:
    checked = verify_branch(pygit2.Repository(str(audit_repo)), "gitopsq/audit")
    assert checked.ok
    return {s.entry["revision"]: s.entry for s in checked.entries if s.entry["type"] == "sync.attempt"}


def test_a_non_owner_change_is_recorded_as_missing_its_owners_approval(kueue_clean: Envtest, tmp_path: Path) -> None:
    """A running controller records a non-owner's change to team-a's queue, merged by the platform team (which the
    policies allow), as needing team-a's approval and lacking it; the same kind of change merged by team-a's
    maintainer as approved. The export lists only the first."""
    repo = QueueRepo(tmp_path / "queues", f"o{uuid.uuid4().hex[:6]}")
    config = (repo.path / "gitopsq.yaml").read_text()
    config = config.replace(f"[{repo.team_a}, ", "[").replace("capacity:", TEAM_A.format(ns=repo.team_a) + "capacity:")
    repo.write("gitopsq.yaml", config)
    repo.write("queues/team-a.yaml", team_a_queues(repo, "8"))
    first = repo.commit("template with team-a's ownership")
    audit_repo = tmp_path / "audit.git"
    subprocess.run(["git", "init", "-q", "--bare", str(audit_repo)], check=True)
    proc = ControllerProcess(kueue_clean, repo, tmp_path, "owners", "--interval", "1s", "--no-leader-elect",
                             "--audit-wal-dir", str(tmp_path / "wal"), "--audit-repo", str(audit_repo))
    try:
        wait_for(lambda: applied_revision(kueue_clean, repo) == first, message="first sync")
        unapproved = merged_change(repo, "12", merger=PLATFORM)
        wait_for(lambda: applied_revision(kueue_clean, repo) == unapproved, message="the unapproved change")
        approved = merged_change(repo, "14", merger=ANN)
        wait_for(lambda: applied_revision(kueue_clean, repo) == approved, message="the approved change")
    finally:
        assert proc.stop() == 0
    records = sync_records(audit_repo)
    needs = {sha: {n["team"]: n["present"] for n in records[sha]["requiredApprovals"]}
             for sha in (unapproved, approved)}
    assert needs == {unapproved: {"team-a": False}, approved: {"team-a": True}}
    assert records[unapproved]["approvalRequired"] is True
    listed = {u.revision: u.reason for u in build_evidence(list(records.values())).unapproved}
    assert unapproved in listed and approved not in listed
    assert listed[unapproved].startswith("team-a: no approval by a maintainer")
