"""The forge end to end: a running `gitopsq controller` follows a repository on a real Gitea (tests/forge_rig.py),
woken by Gitea's push webhook, against the envtest rig. A member's pull request approved by a maintainer and
squash-merged in the forge (signed with the forge's key) is applied; the audit record names the approver from the
forge's reviews and the forge's signature; the commit statuses say pending then success; a broken revision pushed
afterwards is refused with a failure status and a notification."""

from __future__ import annotations

import json
import subprocess
import urllib.request
import uuid
from importlib.resources import files
from pathlib import Path
from typing import Any

import jsonschema
import pygit2
import pytest
from controller_process import ControllerProcess, applied_revision, wait_for
from envtest_rig import Envtest
from forge_rig import GiteaRig
from queue_repo import QueueRepo, cpu_of, cq_live

from gitopsq.audit.evidence import build_evidence
from gitopsq.audit.verify import verify_branch
from gitopsq.forge import Secret, open_forge

from .recorder import Recorder
from .scene import ORG, _ensure_org

pytestmark = [pytest.mark.envtest, pytest.mark.forge]

HOOK_SECRET = "gitea-hook-secret"


def team_a_config(repo: QueueRepo, gitea: GiteaRig, forge_key: str) -> str:
    """QueueRepo's gitopsq.yaml with team-a owning its queue file, maintained by Gitea's ``maintainer``, and the
    forge's signing key declared."""
    config = (repo.path / "gitopsq.yaml").read_text().replace(f"[{repo.team_a}, ", "[")
    team_a = (f"  - name: team-a\n    paths: [\"queues/team-a.yaml\"]\n    namespaces: [{repo.team_a}]\n"
              f"    maintainers: [{{name: Maintainer, email: {gitea.users['maintainer'].email}, "
              f"forgeUser: maintainer}}]\n")
    key = "\n".join("        " + line for line in forge_key.strip().splitlines())
    forge = f"forgeKeys:\n  - name: gitea\n    keys:\n      - |\n{key}\n"
    return config.replace("capacity:", team_a + "capacity:") + forge


def team_a_queues(repo: QueueRepo, cpu: str) -> str:
    selector = f"namespaceSelector:\n    matchLabels:\n      kubernetes.io/metadata.name: {repo.team_a}"
    return repo.cq(repo.team_a, cpu=cpu).replace("namespaceSelector: {}", selector) + repo.lq(repo.team_a)


class Forged:
    """QueueRepo's content on Gitea as ``platform/<tag>``, with ``member`` and ``maintainer`` as writers."""

    def __init__(self, gitea: GiteaRig, repo: QueueRepo) -> None:
        self.gitea, self.repo = gitea, repo
        self.slug = f"{ORG}/{repo.tag}"
        _ensure_org(gitea)
        status, body = gitea.api("forge-admin", "POST", f"/orgs/{ORG}/repos",
                                 {"name": repo.tag, "auto_init": False, "default_branch": "main"})
        assert status == 201, body
        for user in ("member", "maintainer"):
            status, body = gitea.api("forge-admin", "PUT", f"/repos/{self.slug}/collaborators/{user}",
                                     {"permission": "write"})
            assert status == 204, body
        self.push("forge-admin", "main")

    @property
    def clone_url(self) -> str:
        return f"{self.gitea.url}/{self.slug}.git"

    def push(self, who: str, branch: str) -> None:
        self.repo._git("push", "-q", "-f", self.gitea.push_url(who, ORG, self.repo.tag), f"{branch}:{branch}")

    def api(self, who: str, method: str, path: str, body: Any = None) -> Any:
        status, answer = self.gitea.api(who, method, f"/repos/{self.slug}{path}", body)
        assert 200 <= status < 300, (method, path, status, answer)
        return answer

    def merge(self, pr: int, who: str) -> str:
        def merged() -> bool:
            status, _ = self.gitea.api(who, "POST", f"/repos/{self.slug}/pulls/{pr}/merge", {"Do": "squash"})
            return status == 200
        wait_for(merged, timeout=30, message="Gitea accepting the merge")
        return str(self.api(who, "GET", f"/pulls/{pr}")["merge_commit_sha"])


def sync_records(audit_repo: Path) -> dict[str, dict[str, Any]]:
    checked = verify_branch(pygit2.Repository(str(audit_repo)), "gitopsq/audit")
    assert checked.ok
    return {s.entry["revision"]: s.entry for s in checked.entries if s.entry["type"] == "sync.attempt"}


def test_a_reviewed_squash_merge_on_gitea_is_applied_recorded_and_reported(
        kueue_clean: Envtest, gitea: GiteaRig, recorder: Recorder, tmp_path: Path) -> None:
    """member's PR, approved by maintainer, squash-merged in Gitea: the push webhook wakes the controller (hour-long
    poll), which applies the forge-signed merge, records maintainer's review as the required approval of team-a
    and the forge's signature, and sets pending then success on the merged sha; a broken push then gets a
    failure status naming the finding and a 'rejected' notification."""
    recorder.route("POST", "/notify", (200, {}))
    with urllib.request.urlopen(f"{gitea.url}/api/v1/signing-key.gpg", timeout=30) as answer:
        forge_key = answer.read().decode()
    repo = QueueRepo(tmp_path / "queues", f"f{uuid.uuid4().hex[:6]}")
    repo.write("gitopsq.yaml", team_a_config(repo, gitea, str(forge_key)))
    repo.write("queues/team-a.yaml", team_a_queues(repo, "8"))
    first = repo.commit("queues with team-a's ownership and the forge's key")
    forged = Forged(gitea, repo)
    secret_file, token_file = tmp_path / "hook-secret", tmp_path / "forge-token"
    secret_file.write_text(HOOK_SECRET + "\n")
    token_file.write_text(gitea.users["forge-admin"].token + "\n")
    audit_repo = tmp_path / "audit.git"
    subprocess.run(["git", "init", "-q", "--bare", str(audit_repo)], check=True)
    proc = ControllerProcess(
        kueue_clean, repo, tmp_path, "forged", "--repo", forged.clone_url, "--cache-dir", str(tmp_path / "cache"),
        "--interval", "1h", "--no-leader-elect", "--webhook-secret-file", str(secret_file),
        "--forge", "gitea", "--forge-url", gitea.url, "--forge-repo", forged.slug, "--forge-token-file",
        str(token_file), "--notify-webhook", f"{recorder.url}/notify",
        "--audit-wal-dir", str(tmp_path / "wal"), "--audit-repo", str(audit_repo))
    client = open_forge("gitea", gitea.url, forged.slug, Secret(gitea.users["member"].token))
    try:
        wait_for(lambda: applied_revision(kueue_clean, repo) == first, timeout=120, message="first sync")
        forged.api("forge-admin", "POST", "/hooks", {
            "type": "gitea", "active": True, "events": ["push"], "branch_filter": "main",
            "config": {"url": f"http://127.0.0.1:{proc.port}/hooks/git", "content_type": "json",
                       "secret": HOOK_SECRET}})

        repo._git("checkout", "-q", "-b", "cpu-12")
        repo.write("queues/team-a.yaml", team_a_queues(repo, "12"))
        head = repo.commit("team-a: 12 cpu", author=("member", gitea.users["member"].email))
        forged.push("member", "cpu-12")
        pr = int(forged.api("member", "POST", "/pulls", {"head": "cpu-12", "base": "main",
                                                           "title": "team-a: 12 cpu"})["number"])
        forged.api("maintainer", "POST", f"/pulls/{pr}/reviews", {"event": "APPROVED", "commit_id": head})
        merged = forged.merge(pr, "member")

        wait_for(lambda: applied_revision(kueue_clean, repo) == merged, timeout=120, message="webhook sync")
        assert cpu_of(cq_live(kueue_clean, repo.team_a)) == "12"
        wait_for(lambda: [s.state for s in client.statuses(merged)] == ["success", "pending"], timeout=30,
                 message="pending, then success on the merged sha")
        (success, _pending) = client.statuses(merged)
        assert success.context == "gitopsq/sync"

        repo._git("checkout", "-q", "main")
        repo._git("pull", "-q", "--ff-only", forged.clone_url, "main")
        repo.write("queues/team-b.yaml", "kind: ClusterQueue\nmetadata: [not, a, mapping]\n")
        broken = repo.commit("a broken queue file")
        forged.push("forge-admin", "main")
        wait_for(lambda: [s.state for s in client.statuses(broken)][:1] == ["failure"], timeout=60,
                 message="failure on the broken revision")
        assert "queues/team-b.yaml" in client.statuses(broken)[0].description
        wait_for(lambda: [r.json() for r in recorder.seen("POST")], timeout=30, message="the notification")
        (told,) = [r.json() for r in recorder.seen("POST")]
        assert (told["kind"], told["revision"]) == ("rejected", broken)
    finally:
        assert proc.stop() == 0
    assert gitea.users["forge-admin"].token not in proc.log.read_text()
    record = sync_records(audit_repo)[merged]
    (review,) = [a for a in record["approvals"] if a["source"] == "review"]
    assert (review["login"], review["email"], review["forge"], review["pullRequest"], review["approvedCommit"]) \
        == ("maintainer", gitea.users["maintainer"].email, "gitea", pr, head)
    assert [(n["team"], n["present"]) for n in record["requiredApprovals"]] == [("team-a", True)]
    assert record["commit"]["signature"] == {"state": "verified", "signer": "forge:gitea",
                                             "fingerprint": gitea.signing_fingerprint.upper()}
    assert merged not in {u.revision for u in build_evidence(list(sync_records(audit_repo).values())).unapproved}
    schema = json.loads(files("gitopsq.data").joinpath("audit/record.schema.json").read_text(encoding="utf-8"))
    jsonschema.validate(record, schema)
