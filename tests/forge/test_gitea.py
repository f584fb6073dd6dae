"""The Gitea client end to end on a real Gitea 1.26 (tests/forge_rig.py): a member's pull request approved by a
maintainer and squash-merged in the forge, then read back through gitopsq's client: approvals, the PR of the merge
commit, commit statuses and the plan comment updated in place."""

from __future__ import annotations

import hashlib
import hmac
import os
import subprocess
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from forge_rig import GiteaRig

from gitopsq.forge import ForgeError, Secret, open_forge

from .recorder import Recorder
from .scene import Scene

DS_CPU = '{name: cpu, nominalQuota: "96", borrowingLimit: "32"}'
RAISED = '{name: cpu, nominalQuota: "128", borrowingLimit: "32"}'


class Merged:
    def __init__(self, scene: Scene, pr: int, head: str, merge: str) -> None:
        self.scene, self.pr, self.head, self.merge = scene, pr, head, merge


@pytest.fixture(scope="module")
def merged(gitea: GiteaRig, tmp_path_factory: pytest.TempPathFactory) -> Merged:
    """member raises data-science's CPU in a PR, maintainer approves it, maintainer squash-merges it."""
    scene = Scene(gitea, "quotas", tmp_path_factory.mktemp("scene"))
    head = scene.change("raise-cpu", "teams/data-science/cluster-queue.yaml", DS_CPU, RAISED,
                        "data-science: on-demand CPU 96 -> 128")
    pr = scene.open_pr("raise-cpu", "data-science: on-demand CPU 96 -> 128")
    status, body = scene.review(pr, "member", "APPROVED", head)
    assert status == 422, ("Gitea refuses self-approval", status, body)
    status, body = scene.review(pr, "maintainer", "APPROVED", head)
    assert status == 200, body
    return Merged(scene, pr, head, scene.merge(pr, "maintainer"))


def _client(gitea: GiteaRig, slug: str, user: str = "maintainer"):  # type: ignore[no-untyped-def]
    return open_forge("gitea", gitea.url, slug, Secret(gitea.users[user].token))


def test_approvals_of_the_merged_pr_name_the_maintainer_and_the_head(gitea: GiteaRig, merged: Merged) -> None:
    """The squash-merged PR has one standing approval: maintainer's, on the PR's head commit, with a time."""
    (approval,) = _client(gitea, merged.scene.slug).approvals(merged.pr)
    assert (approval.reviewer, approval.commit, approval.forge) == ("maintainer", merged.head, "gitea")
    assert approval.at and approval.at.startswith("20")


def test_the_pr_of_the_squash_commit_is_found(gitea: GiteaRig, merged: Merged) -> None:
    """The merge commit leads back to its PR; the PR's own head commit (not a merge commit) leads nowhere."""
    client = _client(gitea, merged.scene.slug)
    assert client.pull_request_of(merged.merge) == merged.pr
    assert client.pull_request_of(merged.head) is None


def test_the_squash_commit_is_signed_by_the_forge_key(gitea: GiteaRig, merged: Merged, tmp_path: Path) -> None:
    """With MERGES=always the squash commit carries a good signature by the instance key Gitea publishes."""
    with urllib.request.urlopen(f"{gitea.url}/api/v1/signing-key.gpg", timeout=10) as resp:
        armored = resp.read()
    gnupg = tmp_path / "gnupg"
    gnupg.mkdir(mode=0o700)
    env = {**os.environ, "GNUPGHOME": str(gnupg)}
    subprocess.run(["gpg", "--batch", "--import"], input=armored, env=env, capture_output=True, check=True)
    scene = merged.scene
    scene.git("fetch", "-q", gitea.push_url("member", "platform", "quotas"), "main")
    shown = subprocess.run(["git", "log", "-1", "--format=%G?|%GF|%an|%cn", merged.merge], cwd=scene.root, env=env,
                           capture_output=True, text=True, check=True).stdout.strip()
    verdict, fingerprint, author, committer = shown.split("|")
    assert verdict in ("G", "U") and fingerprint == gitea.signing_fingerprint
    assert (author, committer) == ("member", "maintainer")
    gpgconf = ["gpgconf", "--homedir", str(gnupg), "--kill", "gpg-agent"]
    subprocess.run(gpgconf, capture_output=True, check=False)


def test_statuses_are_set_and_read_back(gitea: GiteaRig, merged: Merged) -> None:
    """pending then success under one context replace each other; "running" is stored as Gitea's pending."""
    client = _client(gitea, merged.scene.slug)
    client.set_status(merged.merge, "pending", context="gitopsq/sync", description="validating")
    client.set_status(merged.merge, "success", context="gitopsq/sync", description="applied 3 objects",
                      target_url="http://127.0.0.1/records/1")
    client.set_status(merged.merge, "running", context="gitopsq/validate", description="checking")
    listed = client.statuses(merged.merge)  # newest first
    assert [(s.context, s.state) for s in listed] == [("gitopsq/validate", "pending"), ("gitopsq/sync", "success"),
                                                      ("gitopsq/sync", "pending")]
    latest = {s.context: s for s in reversed(listed)}  # the newest per context wins
    assert (latest["gitopsq/sync"].state, latest["gitopsq/sync"].description) == ("success", "applied 3 objects")
    assert latest["gitopsq/sync"].target_url == "http://127.0.0.1/records/1"
    assert latest["gitopsq/validate"].state == "pending"
    status, combined = gitea.api("maintainer", "GET", f"/repos/{merged.scene.slug}/commits/{merged.merge}/status")
    assert status == 200 and combined["state"] == "pending"  # validate is still pending


def test_a_comment_is_created_then_updated_by_its_marker(gitea: GiteaRig, merged: Merged) -> None:
    """The first upsert creates a comment, the second edits that one: one marked comment with the new body."""
    client = _client(gitea, merged.scene.slug, "member")
    first = client.upsert_comment(merged.pr, "<!-- gitopsq-test -->", "<!-- gitopsq-test -->\nfirst")
    second = client.upsert_comment(merged.pr, "<!-- gitopsq-test -->", "<!-- gitopsq-test -->\nsecond")
    assert first.created and not second.created and first.id == second.id
    status, comments = gitea.api("member", "GET", f"/repos/{merged.scene.slug}/issues/{merged.pr}/comments")
    marked = [c["body"] for c in comments if "<!-- gitopsq-test -->" in c["body"]]
    assert status == 200 and marked == ["<!-- gitopsq-test -->\nsecond"]


def test_a_bad_token_is_a_forge_error_without_the_token(gitea: GiteaRig, merged: Merged) -> None:
    """Gitea answers 401 to a wrong token: ForgeError with the status, and the token is not in the message."""
    client = open_forge("gitea", gitea.url, merged.scene.slug, Secret("not-a-real-token-42"))
    with pytest.raises(ForgeError) as err:
        client.set_status(merged.merge, "success", context="gitopsq/sync", description="x")
    assert err.value.status == 401 and "not-a-real-token-42" not in str(err.value)


def test_push_webhooks_reach_a_loopback_receiver_signed(gitea: GiteaRig, merged: Merged, recorder: Recorder) -> None:
    """The rig lets Gitea deliver push webhooks to 127.0.0.1 (ALLOWED_HOST_LIST=loopback), each signed with
    X-Gitea-Signature = hex HMAC-SHA256(secret, body): what the controller's webhook receives from this forge."""
    recorder.route("POST", "/hook", (200, {}))
    scene = merged.scene
    status, body = gitea.api("forge-admin", "POST", f"/repos/{scene.slug}/hooks", {
        "type": "gitea", "active": True, "events": ["push"], "branch_filter": "*",
        "config": {"url": f"{recorder.url}/hook", "content_type": "json", "secret": "hook-secret"}})
    assert status == 201, body
    pushed = scene.change("more-cpu", "teams/data-science/cluster-queue.yaml", DS_CPU,
                          '{name: cpu, nominalQuota: "160", borrowingLimit: "32"}', "data-science: CPU -> 160")
    deadline = time.monotonic() + 20

    def ours() -> list[Any]:  # the squash merge's own push may also be delivered (Gitea queues it)
        return [r for r in recorder.seen("POST") if r.json().get("ref") == "refs/heads/more-cpu"]

    while not ours() and time.monotonic() < deadline:
        time.sleep(0.1)
    (delivery,) = ours()
    assert delivery.headers["x-gitea-event"] == "push" and delivery.json()["after"] == pushed
    mac = hmac.new(b"hook-secret", delivery.body, hashlib.sha256).hexdigest()
    assert delivery.headers["x-gitea-signature"] == mac
