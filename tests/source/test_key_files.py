"""Key files named in gitopsq.yaml (``signingKeyFiles``): read at the same trusted revision as the gitopsq.yaml
that names them, verified as real key material, owned by the platform whatever the team patterns say, and every
problem with one (missing, malformed, oversized, outside the repository) a ``config-invalid-key`` finding at
gitopsq.yaml's line that names the path."""

from __future__ import annotations

import subprocess
from pathlib import Path

from queue_repo import QueueRepo

from gitopsq.manifests.config import parse_config
from gitopsq.manifests.keyfiles import MAX_KEY_FILE_BYTES
from gitopsq.source import open_directory, open_source
from gitopsq.validation import validate_revision

from .test_gpg_in_config import ALICE
from .test_signatures import Gpg, gpg  # noqa: F401  (the module-scoped throw-away GNUPGHOME fixture)

SELECTOR = "namespaceSelector:\n    matchLabels:\n      kubernetes.io/metadata.name: g-a"


def repo_with_key_file(tmp: Path, gpg: Gpg, key_file: str = "keys/alice.asc",  # noqa: F811
                       key_text: str | None = None) -> QueueRepo:
    """QueueRepo whose team-a (queues/team-a.yaml and everything under keys/) is maintained by Alice, her
    armored GPG key named by path (``signingKeyFiles``); signing required."""
    repo = QueueRepo(tmp / "queues", "g")
    config = (repo.path / "gitopsq.yaml").read_text().replace("[g-a, ", "[")
    team_a = ("  - name: team-a\n    paths: [\"queues/team-a.yaml\", \"keys/**\"]\n    namespaces: [g-a]\n"
              "    maintainers:\n      - name: Alice\n        email: alice@example.com\n"
              f"        signingKeyFiles: [{key_file}]\n")
    repo.write("gitopsq.yaml", config.replace("capacity:", team_a + "capacity:") + "signing: {mode: required}\n")
    repo.write("queues/team-a.yaml", repo.cq("g-a").replace("namespaceSelector: {}", SELECTOR) + repo.lq("g-a"))
    if key_text is not None or key_file == "keys/alice.asc":
        (repo.path / "keys").mkdir(exist_ok=True)
        repo.write("keys/alice.asc", gpg.keys["alice"].armored if key_text is None else key_text)
    repo.commit("the platform's set-up")
    return repo


def commit_as_alice(repo: QueueRepo, gpg: Gpg, signer: str, message: str) -> str:  # noqa: F811
    env = {"GIT_AUTHOR_NAME": ALICE[0], "GIT_AUTHOR_EMAIL": ALICE[1], "GIT_COMMITTER_NAME": ALICE[0],
           "GIT_COMMITTER_EMAIL": ALICE[1], "PATH": "/usr/bin:/bin", "GNUPGHOME": str(gpg.home)}
    subprocess.run(["git", "add", "-A"], cwd=repo.path, check=True)
    subprocess.run(["git", "-c", "gpg.format=openpgp", "-c", f"user.signingkey={gpg.keys[signer].fingerprint}",
                    "commit", "-q", "-S", "-m", message], cwd=repo.path, env=env, check=True)
    return repo._git("rev-parse", "HEAD")


def quota_change(repo: QueueRepo, cpu: str) -> None:
    repo.write("queues/team-a.yaml", repo.cq("g-a", cpu=cpu).replace("namespaceSelector: {}", SELECTOR)
               + repo.lq("g-a"))


def errors(validation: object) -> list[tuple[str, str, int | None, str]]:
    found = validation.report.findings  # type: ignore[attr-defined]
    return [(f.code, f.location.path if f.location else "", f.location.line if f.location else None, f.message)
            for f in found if f.is_error]


def test_a_key_from_a_key_file_verifies_the_maintainers_signature(tmp_path: Path, gpg: Gpg) -> None:  # noqa: F811
    """Alice's armored key, named by path, verifies her GPG-signed change (passes with signing required), while a
    change signed by a key no file or entry lists is refused."""
    repo = repo_with_key_file(tmp_path, gpg)
    quota_change(repo, "12")
    good = commit_as_alice(repo, gpg, "alice", "team-a: 12 cpu")
    assert errors(validate_revision(open_source(str(repo.path)), good)) == []
    quota_change(repo, "14")
    forged = commit_as_alice(repo, gpg, "mallory", "team-a: 14 cpu")
    assert {e[0] for e in errors(validate_revision(open_source(str(repo.path)), forged))} == \
        {"policy/signed-by-maintainer"}


def test_the_key_file_is_read_at_the_trusted_base_so_a_change_cannot_swap_it(tmp_path: Path,
                                                                             gpg: Gpg) -> None:  # noqa: F811
    """A change that replaces keys/alice.asc with Mallory's key and is signed by Mallory is judged with the base's
    file (Mallory's key binds nobody) and the key file is the platform's, so the change is refused twice over."""
    repo = repo_with_key_file(tmp_path, gpg)
    repo.write("keys/alice.asc", gpg.keys["mallory"].armored)
    quota_change(repo, "16")
    head = commit_as_alice(repo, gpg, "mallory", "swap the key")
    found = errors(validate_revision(open_source(str(repo.path)), head))
    codes = {e[0] for e in found}
    assert "policy/signed-by-maintainer" in codes
    assert any(code == "policy/team-owns-path" and path == "keys/alice.asc" and "platform" in message
               for code, path, _, message in found)


def test_a_maintainer_cannot_edit_a_key_file_under_their_own_team_path(tmp_path: Path,
                                                                        gpg: Gpg) -> None:  # noqa: F811
    """Even correctly signed by its own maintainer, team-a's edit of a key file under a path team-a owns is
    refused: a key file gitopsq.yaml names belongs to the platform team."""
    repo = repo_with_key_file(tmp_path, gpg)
    repo.write("keys/alice.asc", gpg.keys["alice"].armored + "\n")
    head = commit_as_alice(repo, gpg, "alice", "touch the key file")
    found = errors(validate_revision(open_source(str(repo.path)), head))
    assert {p for _, p, _, _ in found} == {"keys/alice.asc"}
    (owns,) = [m for c, _, _, m in found if c == "policy/team-owns-path"]
    assert "belongs to team platform" in owns


def test_a_missing_key_file_is_a_finding_at_its_line(tmp_path: Path, gpg: Gpg) -> None:  # noqa: F811
    """A key file that does not exist at the revision is config-invalid-key at gitopsq.yaml's line naming it."""
    repo = repo_with_key_file(tmp_path, gpg, key_file="keys/nobody.asc")
    head = repo._git("rev-parse", "HEAD")
    found = errors(validate_revision(open_source(str(repo.path)), head, base=None))
    assert [(c, p) for c, p, _, _ in found] == [("config-invalid-key", "gitopsq.yaml")]
    lines = (repo.path / "gitopsq.yaml").read_text().splitlines()
    assert "keys/nobody.asc" in lines[found[0][2] - 1] and "'keys/nobody.asc' does not exist" in found[0][3]


def test_malformed_oversized_and_escaping_key_files_are_findings(tmp_path: Path, gpg: Gpg) -> None:  # noqa: F811
    """A file that holds no valid key, one larger than the limit (refused from the tree), and a path leaving the
    repository are each a config-invalid-key finding; none of them contributes a key."""
    repo = repo_with_key_file(tmp_path, gpg, key_text="ssh-ed25519 AAAAnotbase64!! me\n")
    head = repo._git("rev-parse", "HEAD")
    (found,) = errors(validate_revision(open_source(str(repo.path)), head, base=None))
    assert found[0] == "config-invalid-key" and "'keys/alice.asc'" in found[3] and "base64" in found[3]

    repo.write("keys/alice.asc", "# " + "x" * MAX_KEY_FILE_BYTES + "\n")
    repo.commit("huge")
    (found,) = errors(validate_revision(open_source(str(repo.path)), repo._git("rev-parse", "HEAD"), base=None))
    assert found[0] == "config-invalid-key" and "bytes; a key file holds at most" in found[3]

    text = (repo.path / "gitopsq.yaml").read_text().replace("[keys/alice.asc]", "[../outside.asc]")
    (parsed,) = [f for f in parse_config(text.encode(), read_file=lambda p: b"").findings if f.is_error]
    assert parsed.code == "config-invalid-key" and "relative to the repository root" not in parsed.message
    assert "'..'" in parsed.message


def test_without_a_revision_to_read_from_a_named_key_file_is_a_finding() -> None:
    """gitopsq.yaml parsed alone (no revision to read key files at) fails closed on a named key file."""
    text = ("apiVersion: gitopsq.dev/v1alpha1\nkind: RepositoryConfig\ninclude: [q/]\nplatformTeam: p\n"
            "teams:\n  - name: p\n    maintainers:\n      - name: A\n        signingKeyFiles: [k/a.pub]\n")
    parsed = parse_config(text.encode())
    (finding,) = [f for f in parsed.findings if f.is_error]
    assert finding.code == "config-invalid-key" and finding.location is not None and finding.location.line == 9
    assert parsed.config is not None and parsed.config.key_files == ("k/a.pub",)
    assert parsed.config.owner_of("k/a.pub") == "p"


def test_worktree_reads_key_files_from_disk_and_refuses_symlinks(tmp_path: Path, gpg: Gpg) -> None:  # noqa: F811
    """In a plain directory (check --worktree) the key file is read from the files on disk; a symbolic link
    standing in for it counts as absent (a link could point outside the repository)."""
    repo = repo_with_key_file(tmp_path, gpg)
    source = open_directory(str(repo.path))
    validation = validate_revision(source, source.resolve("WORKTREE"), base=None)
    assert errors(validation) == []
    assert validation.report.config is not None
    alice = validation.report.config.team("team-a").maintainers[0]  # type: ignore[union-attr]
    assert alice.signing_keys == (gpg.keys["alice"].armored.strip(),)
    (repo.path / "keys/alice.asc").unlink()
    (repo.path / "keys/alice.asc").symlink_to(tmp_path / "elsewhere.asc")
    (tmp_path / "elsewhere.asc").write_text(gpg.keys["alice"].armored)
    found = errors(validate_revision(source, source.resolve("WORKTREE"), base=None))
    assert [c for c, *_ in found] == ["config-invalid-key"] and "does not exist" in found[0][3]
