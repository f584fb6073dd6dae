"""Approvals recorded in the repository, end to end on a real Gitea 1.26: a member's PR approved by a maintainer
and squash-merged in the forge (signed with the instance key, declared by key file), then `gitopsq approvals
record` writes and pushes the signed note; a sync with NO forge configured validates the merge and records the
approver from the note (``source: note``); a tampered note is refused and counts for nothing."""

from __future__ import annotations

import os
import subprocess
import sys
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from forge_rig import GiteaRig

from gitopsq.forge.note_source import with_notes
from gitopsq.forge.notes import NOTES_REF
from gitopsq.forge.reviews import approvals_reader
from gitopsq.source import open_source
from gitopsq.sync.audit_sink import SyncAuditRecords
from gitopsq.validation import validate_revision

from .scene import ORG, Scene

DS_FILE = "teams/data-science/cluster-queue.yaml"
DS_CPU = '{name: cpu, nominalQuota: "96", borrowingLimit: "32"}'
RAISED = '{name: cpu, nominalQuota: "104", borrowingLimit: "32"}'
NAME = "recorded"


@dataclass(frozen=True)
class Merged:
    scene: Scene
    base: str
    pr: int
    head: str
    merge: str
    key: Path


def gitopsq(scene: Scene, *args: str) -> subprocess.CompletedProcess[str]:
    """The CLI as a CI runner runs it: an empty HOME, no system git configuration, no git identity anywhere."""
    home = scene.home / "empty-home"
    home.mkdir(exist_ok=True)
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("GIT_")}, "HOME": str(home),
           "XDG_CONFIG_HOME": str(home / ".config"), "GIT_CONFIG_NOSYSTEM": "1",
           "GITOPSQ_CACHE_DIR": str(scene.home / "cli-cache")}
    return subprocess.run([sys.executable, "-m", "gitopsq", *args], cwd=scene.root, env=env, capture_output=True,
                          text=True, timeout=120, check=False)


@pytest.fixture(scope="module")
def merged(gitea: GiteaRig, tmp_path_factory: pytest.TempPathFactory) -> Merged:
    """repo-template on Gitea with Erin as Gitea's ``maintainer``, the instance key under forgeKeys and the CI
    recorder's public key under approvalRecorders (both as key files); member's PR approved and squash-merged."""
    work = tmp_path_factory.mktemp(NAME)
    scene = Scene(gitea, NAME, work)
    key = work / "recorder"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "ci-recorder", "-f", str(key)], check=True)
    with urllib.request.urlopen(f"{gitea.url}/api/v1/signing-key.gpg", timeout=10) as resp:
        (scene.root / "keys").mkdir()
        (scene.root / "keys/gitea.asc").write_bytes(resp.read())
    (scene.root / "keys/recorder.pub").write_text(Path(f"{key}.pub").read_text())
    config = scene.root / "gitopsq.yaml"
    text = config.read_text().replace(
        "      - name: Erin Okafor\n        email: erin@example.com\n",
        f"      - name: Erin Okafor\n        email: {gitea.users['maintainer'].email}\n        forgeUser: maintainer\n")
    config.write_text(text + "\nforgeKeys:\n  - name: gitea\n    keyFiles: [keys/gitea.asc]\n"
                             "approvalRecorders:\n  - name: ci\n    keyFiles: [keys/recorder.pub]\n")
    scene.git("add", "-A")
    scene.git("commit", "-q", "-m", "forge key, recorder key, Erin on Gitea", who="forge-admin")
    scene.git("push", "-q", gitea.push_url("forge-admin", ORG, NAME), "main", who="forge-admin")
    base = scene.git("rev-parse", "HEAD")
    scene.wait_for_branch("main", base)
    head = scene.change("raise", DS_FILE, DS_CPU, RAISED, "data-science: on-demand CPU 96 -> 104")
    pr = scene.open_pr("raise", "data-science: on-demand CPU 96 -> 104")
    status, body = scene.review(pr, "maintainer", "APPROVED", head)
    assert status == 200, body
    merge = scene.merge(pr, "maintainer")
    scene.git("fetch", "-q", gitea.push_url("member", ORG, NAME), "main")
    return Merged(scene, base, pr, head, merge, key)


def record_note(gitea: GiteaRig, merged: Merged) -> subprocess.CompletedProcess[str]:
    scene = merged.scene
    token = scene.home / "recorder-token"
    token.write_text(gitea.users["member"].token)
    merged.key.chmod(0o600)
    return gitopsq(scene, "approvals", "record", ".", "--rev", merged.merge, "--forge", "gitea", "--forge-url",
                   gitea.url, "--forge-repo", scene.slug, "--forge-token-file", str(token), "--key-file",
                   str(merged.key), "--push", gitea.push_url("member", ORG, NAME))


def synced_record(gitea: GiteaRig, merged: Merged, cache: Path) -> dict[str, Any]:
    """The audit record a controller WITHOUT --forge writes for the merge (source: Gitea over HTTP)."""
    source = open_source(f"{gitea.url}/{merged.scene.slug}.git", cache_dir=cache)
    assert source.resolve("main") == merged.merge  # the controller follows the branch
    sink = SyncAuditRecords(None, source, forge=with_notes(None, source))
    return dict(sink.enrich({"type": "sync.attempt", "revision": merged.merge,
                             "previousRevision": merged.base}).data)


def test_the_note_stands_in_for_the_forge_and_a_tampered_one_is_refused(gitea: GiteaRig, merged: Merged,
                                                                        tmp_path: Path) -> None:
    """The recorded note names maintainer's approval: without any forge the merge validates (team-owns-path is
    satisfied by the approval) and its record lists the approver with source note; after the note is edited
    (signature kept) and force-pushed, it counts for nothing: the approval is missing and `approvals show` says
    the signature does not verify."""
    done = record_note(gitea, merged)
    assert done.returncode == 0, done.stderr
    assert f"recorded {merged.scene.slug}#{merged.pr} approved by maintainer" in done.stderr
    # the notes commit names the recorder gitopsq.yaml lists for the key, not any machine's git identity
    scene = merged.scene
    assert scene.git("log", "-1", "--format=%an <%ae> / %cn <%ce>", NOTES_REF) == \
        "ci <gitopsq@localhost> / ci <gitopsq@localhost>"

    record = synced_record(gitea, merged, tmp_path / "cache-1")
    (approval,) = record["approvals"]
    assert (approval["source"], approval["login"], approval["email"], approval["forge"], approval["pullRequest"],
            approval["approvedCommit"], approval["commit"]) == \
        ("note", "maintainer", gitea.users["maintainer"].email, "gitea", merged.pr, merged.head, merged.merge)
    assert [(n["team"], n["present"]) for n in record["requiredApprovals"]] == [("data-science", True)]
    assert record["commit"]["signature"]["state"] == "verified"  # the instance key from keys/gitea.asc

    source = open_source(f"{gitea.url}/{merged.scene.slug}.git", cache_dir=tmp_path / "cache-1")
    with_note = validate_revision(source, merged.merge, base=merged.base,
                                  forge_approvals=approvals_reader(with_notes(None, source)))
    assert [f.code for f in with_note.report.findings if f.is_error] == []
    without = validate_revision(source, merged.merge, base=merged.base)
    assert "policy/team-owns-path" in {f.code for f in without.report.findings if f.is_error}

    shown = gitopsq(merged.scene, "approvals", "show", f"{gitea.url}/{merged.scene.slug}.git", "--rev", merged.merge)
    assert shown.returncode == 0 and "verified (recorder ci)" in shown.stdout

    scene.git("fetch", "-q", gitea.push_url("member", ORG, NAME), f"+{NOTES_REF}:{NOTES_REF}")
    text = scene.git("notes", "--ref", NOTES_REF, "show", merged.merge)
    forged = text.replace('"login":"maintainer"', '"login":"member"', 1)
    assert forged != text
    scene.git("notes", "--ref", NOTES_REF, "add", "-f", "-m", forged, merged.merge)
    scene.git("push", "-q", "-f", gitea.push_url("member", ORG, NAME), f"{NOTES_REF}:{NOTES_REF}")

    tampered = synced_record(gitea, merged, tmp_path / "cache-2")
    assert tampered["approvals"] == []
    assert [(n["team"], n["present"]) for n in tampered["requiredApprovals"]] == [("data-science", False)]
    refused = gitopsq(scene, "approvals", "show", f"{gitea.url}/{scene.slug}.git", "--rev", merged.merge)
    assert refused.returncode == 1 and "bad: the note's signature does not verify" in refused.stdout
