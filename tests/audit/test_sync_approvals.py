"""Required approvals on sync records, read from real Git histories, and the export's list of unapproved changes."""

from __future__ import annotations

import os
import subprocess
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from gitopsq.audit import records as r
from gitopsq.audit.evidence import build_evidence
from gitopsq.audit.trail import AuditTrail
from gitopsq.commands.audit import command as audit_command
from gitopsq.source import open_directory, open_source
from gitopsq.sync.audit_sink import SyncAuditRecords

from .conftest import fast_settings, verified

CONFIG = """apiVersion: gitopsq.dev/v1alpha1
kind: RepositoryConfig
include: [queues/, platform/]
{platform}
teams:
  - name: platform
    paths: ["platform/**", "gitopsq.yaml"]
    maintainers: [{{name: Pat, email: pat@example.com}}]
  - name: team-a
    paths: ["queues/team-a/**"]
    maintainers: [{{name: Ann, email: ann@example.com}}, {{name: Abe, email: abe@example.com}}]
"""
TEAM_A = "queues/team-a/cq.yaml"
SHARED = "queues/shared/cq.yaml"
FLAVOR = "apiVersion: kueue.x-k8s.io/v1beta2\nkind: ResourceFlavor\nmetadata:\n  name: {name}\n"


def cluster_queue(name: str, cpu: int) -> str:
    return (f"apiVersion: kueue.x-k8s.io/v1beta2\nkind: ClusterQueue\nmetadata:\n  name: {name}\nspec:\n"
            f"  resourceGroups:\n  - coveredResources: [cpu]\n    flavors:\n    - name: default\n      resources:\n"
            f"      - name: cpu\n        nominalQuota: \"{cpu}\"\n")


class History:
    """A queue repository written and committed with the git CLI, each commit by a named person."""

    def __init__(self, path: Path, *, platform_team: bool = True) -> None:
        self.path = path
        path.mkdir()
        self.git("init", "-q", "-b", "main")
        self.write("gitopsq.yaml", CONFIG.format(platform="platformTeam: platform" if platform_team else ""))
        self.write("platform/flavors.yaml", FLAVOR.format(name="default"))
        self.write(TEAM_A, cluster_queue("team-a", 8))
        self.write(SHARED, cluster_queue("shared", 8))
        self.base = self.commit("initial", "Pat")

    def git(self, *args: str, who: str = "Pat") -> str:
        env = {**os.environ, "GIT_AUTHOR_NAME": who, "GIT_AUTHOR_EMAIL": f"{who.lower()}@example.com",
               "GIT_COMMITTER_NAME": who, "GIT_COMMITTER_EMAIL": f"{who.lower()}@example.com"}
        return subprocess.run(["git", "-C", str(self.path), *args], check=True, env=env, capture_output=True,
                              text=True).stdout.strip()

    def write(self, rel: str, text: str) -> None:
        (self.path / rel).parent.mkdir(parents=True, exist_ok=True)
        (self.path / rel).write_text(text)

    def commit(self, message: str, who: str) -> str:
        self.git("add", "-A", who=who)
        self.git("commit", "-q", "-m", message, who=who)
        return self.git("rev-parse", "HEAD")

    def merge(self, branch: str, who: str) -> str:
        self.git("checkout", "-q", "main", who=who)
        self.git("merge", "--no-ff", "-q", "-m", f"Merge {branch}", branch, who=who)
        return self.git("rev-parse", "HEAD")


def attempt(history: History, revision: str, previous: str | None) -> r.Record:
    return r.sync_attempt(time=datetime.now(UTC), source_url=str(history.path), revision=revision,
                          previous_revision=previous, result="applied",
                          changes=[r.ObjectChange("ClusterQueue", "team-a", "updated")], actor="gitopsq")


def enriched(history: History, revision: str, previous: str | None = None) -> dict[str, Any]:
    records = SyncAuditRecords(sink=None, source=open_source(str(history.path)))
    return dict(records.enrich(attempt(history, revision, previous or history.base)).data)


def required(data: dict[str, Any]) -> dict[str, bool]:
    return {n["team"]: n["present"] for n in data["requiredApprovals"]}


def nick_edits_team_a(history: History, message: str = "team-a: more cpu") -> str:
    history.write(TEAM_A, cluster_queue("team-a", 16))
    return history.commit(message, "Nick")


def test_non_owner_change_without_approval_is_required_and_missing(tmp_path: Path) -> None:
    """A non-owner changing team-a's queue with no approval: team-a's approval is required and missing."""
    history = History(tmp_path / "q")
    data = enriched(history, nick_edits_team_a(history))
    assert data["approvalRequired"] is True and required(data) == {"team-a": False}
    need = data["requiredApprovals"][0]
    assert need["maintainers"] == ["Ann <ann@example.com>", "Abe <abe@example.com>"]
    assert need["reasons"] == [f"{TEAM_A}: owned by team-a"] and need["approvedBy"] == []


def test_owner_trailer_approval_is_present(tmp_path: Path) -> None:
    """An Approved-by trailer naming a team-a maintainer satisfies team-a."""
    history = History(tmp_path / "q")
    data = enriched(history, nick_edits_team_a(history, "team-a: more cpu\n\nApproved-by: Ann <ann@example.com>"))
    assert required(data) == {"team-a": True}
    assert [(a["email"], a["source"]) for a in data["requiredApprovals"][0]["approvedBy"]] == \
        [("ann@example.com", "Approved-by")]


@pytest.mark.parametrize(("author", "merger", "present"), [
    pytest.param("Nick", "Abe", True, id="merge-by-an-owner-approves"),
    pytest.param("Nick", "Pat", False, id="merge-by-another-team-does-not"),
    pytest.param("Ann", "Ann", False, id="owner-merging-own-change-does-not"),
    pytest.param("Ann", "Abe", True, id="second-owner-merging-an-owners-change-does"),
])
def test_merges_approve_for_the_team_of_the_merger(tmp_path: Path, author: str, merger: str,
                                                   present: bool) -> None:
    """A merge commit is its author's approval: it counts for a team the merger maintains, unless they wrote it."""
    history = History(tmp_path / "q")
    history.git("checkout", "-q", "-b", "feature")
    history.write(TEAM_A, cluster_queue("team-a", 16))
    history.commit("team-a: more cpu", author)
    data = enriched(history, history.merge("feature", merger))
    assert required(data) == {"team-a": present}


@pytest.mark.parametrize(("platform_team", "expected"), [
    pytest.param(False, {}, id="no-platform-team-nobody-required"),
    pytest.param(True, {"platform": False}, id="platform-team-owns-what-nobody-owns"),
])
def test_unowned_change(tmp_path: Path, platform_team: bool, expected: dict[str, bool]) -> None:
    """A file no team owns needs the platform team when there is one, and nobody's approval otherwise."""
    history = History(tmp_path / "q", platform_team=platform_team)
    history.write(SHARED, cluster_queue("shared", 4))
    data = enriched(history, history.commit("shared: less cpu", "Nick"))
    assert required(data) == expected and data["approvalRequired"] is bool(expected)


def test_a_global_object_in_a_team_file_also_needs_the_platform_team(tmp_path: Path) -> None:
    """A ResourceFlavor added to team-a's file needs platform approval even when team-a approved."""
    history = History(tmp_path / "q")
    history.write(TEAM_A, cluster_queue("team-a", 8) + "---\n" + FLAVOR.format(name="team-a-gpu"))
    data = enriched(history, history.commit("gpu flavor\n\nReviewed-by: Abe <abe@example.com>", "Nick"))
    assert required(data) == {"platform": False, "team-a": True}
    assert "ResourceFlavor/team-a-gpu: a global object" in data["requiredApprovals"][0]["reasons"]


def test_a_change_cannot_make_its_author_an_owner(tmp_path: Path) -> None:
    """Ownership comes from the previous revision: adding yourself as a maintainer does not approve your change."""
    history = History(tmp_path / "q")
    history.write("gitopsq.yaml", (history.path / "gitopsq.yaml").read_text().replace(
        "{name: Abe, email: abe@example.com}", "{name: Nick, email: nick@example.com}"))
    history.write(TEAM_A, cluster_queue("team-a", 16))
    data = enriched(history, history.commit("team-a: mine now\n\nApproved-by: Nick <nick@example.com>", "Nick"))
    assert required(data) == {"platform": False, "team-a": False}


@pytest.mark.parametrize("broken", [
    pytest.param("teams: [oops\n", id="base-config-does-not-parse"),
    pytest.param("apiVersion: gitopsq.dev/v1alpha1\nkind: RepositoryConfig\nteams: 7\n", id="base-config-invalid"),
])
def test_an_unreadable_previous_config_fails_closed(tmp_path: Path, broken: str) -> None:
    """A previous revision whose gitopsq.yaml does not read: the change cannot name its own approvers through the
    applied revision's file; it is reported as needing an approval nobody can give, with the reason."""
    history = History(tmp_path / "q")
    history.write("gitopsq.yaml", broken)
    broken_base = history.commit("platform: broken config", "Pat")
    history.write("gitopsq.yaml", CONFIG.format(platform="platformTeam: platform").replace(
        "{name: Abe, email: abe@example.com}", "{name: Nick, email: nick@example.com}"))
    history.write(TEAM_A, cluster_queue("team-a", 16))
    head = history.commit("team-a: mine now\n\nApproved-by: Nick <nick@example.com>", "Nick")
    data = enriched(history, head, previous=broken_base)
    assert data["approvalRequired"] is True
    assert required(data) == {"(untrusted base)": False}
    assert "cannot judge this change against base" in data["requiredApprovals"][0]["reasons"][0]


def test_reapplying_the_same_revision_requires_nothing(tmp_path: Path) -> None:
    """A sync of the revision already applied (drift, retry) brings no change from Git and needs no approval."""
    history = History(tmp_path / "q")
    sha = nick_edits_team_a(history)
    data = enriched(history, sha, previous=sha)
    assert data["approvalRequired"] is False and data["requiredApprovals"] == [] and data["approvals"] == []


def test_first_sync_judges_the_head_commit_against_its_parent(tmp_path: Path) -> None:
    """With no previous revision the change is what the head commit brings, not the whole history."""
    history = History(tmp_path / "q")
    sha = nick_edits_team_a(history)
    records = SyncAuditRecords(sink=None, source=open_source(str(history.path)))
    data = records.enrich(attempt(history, sha, None)).data
    assert {n["team"]: n["present"] for n in data["requiredApprovals"]} == {"team-a": False}


def test_a_source_without_history_is_flagged_not_waved_through(tmp_path: Path) -> None:
    """When approvals cannot be checked the record says so and counts the change as needing one."""
    history = History(tmp_path / "q")
    records = SyncAuditRecords(sink=None, source=open_directory(history.path))
    data = records.enrich(attempt(history, "worktree", "older")).data
    assert data["approvalRequired"] is True and data["approvalError"]


@pytest.mark.parametrize(("message", "listed"), [
    pytest.param("team-a: more cpu", "team-a: no approval by a maintainer", id="missing-approval-is-listed"),
    pytest.param("team-a: more cpu\n\nApproved-by: Ann <ann@example.com>", None, id="owner-approval-not-listed"),
    pytest.param("team-a: more cpu\n\nApproved-by: Pat <pat@example.com>", "team-a: no approval by a maintainer",
                 id="approval-by-a-non-owner-is-listed"),
])
def test_export_lists_changes_applied_without_the_owners_approval(tmp_path: Path, message: str,
                                                                  listed: str | None) -> None:
    """Through a real trail and branch, `audit export` lists exactly the changes missing their owners' approval."""
    history = History(tmp_path / "q")
    sha = nick_edits_team_a(history, message)
    remote = tmp_path / "audit.git"
    subprocess.run(["git", "init", "-q", "--bare", str(remote)], check=True)
    with AuditTrail.open(str(remote), tmp_path / "wal", settings=fast_settings()) as trail:
        SyncAuditRecords(trail, open_source(str(history.path))).record(attempt(history, sha, history.base))
        assert trail.flush(30)
    unapproved = build_evidence([s.entry for s in verified(remote).entries]).unapproved
    assert [u.reason for u in unapproved if listed and listed in u.reason] == [u.reason for u in unapproved]
    assert len(unapproved) == (1 if listed else 0)
    page = CliRunner().invoke(audit_command, ["export", str(remote), "--format", "html"])
    assert page.exit_code == 0 and (listed is None or listed in page.output) and sha in page.output
