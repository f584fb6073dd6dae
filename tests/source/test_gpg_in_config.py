"""Armored OpenPGP keys in gitopsq.yaml are real key material: their fingerprint is read without gpg, a commit
signed with one verifies ``good`` through the one validation path and binds to its maintainer, and with
``signing.mode: optional`` a key nobody lists warns instead of refusing."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from queue_repo import QueueRepo

from gitopsq.manifests.config import parse_config
from gitopsq.manifests.pgpkeys import pgp_fingerprint
from gitopsq.source import open_source
from gitopsq.validation import validate_revision

from .test_signatures import Gpg, gpg  # noqa: F401  (the module-scoped throw-away GNUPGHOME fixture)

ALICE = ("Alice", "alice@example.com")


def indented(block: str, spaces: int) -> str:
    return "\n".join(" " * spaces + line for line in block.strip().splitlines())


def repo_with(tmp: Path, gpg: Gpg, mode: str) -> QueueRepo:  # noqa: F811
    """QueueRepo whose team-a (queues/team-a.yaml) is maintained by Alice, her armored GPG key inline."""
    repo = QueueRepo(tmp / "queues", "g")
    config = (repo.path / "gitopsq.yaml").read_text().replace("[g-a, ", "[")
    team_a = ("  - name: team-a\n    paths: [\"queues/team-a.yaml\"]\n    namespaces: [g-a]\n"
              "    maintainers:\n      - name: Alice\n        email: alice@example.com\n        signingKeys:\n"
              "          - |\n" + indented(gpg.keys["alice"].armored, 12) + "\n")
    repo.write("gitopsq.yaml", config.replace("capacity:", team_a + "capacity:") + f"signing: {{mode: {mode}}}\n")
    selector = "namespaceSelector:\n    matchLabels:\n      kubernetes.io/metadata.name: g-a"
    repo.write("queues/team-a.yaml", repo.cq("g-a").replace("namespaceSelector: {}", selector) + repo.lq("g-a"))
    repo.commit("the platform's set-up")
    return repo


def signed_change(repo: QueueRepo, gpg: Gpg, signer: str, cpu: str) -> str:  # noqa: F811
    selector = "namespaceSelector:\n    matchLabels:\n      kubernetes.io/metadata.name: g-a"
    repo.write("queues/team-a.yaml", repo.cq("g-a", cpu=cpu).replace("namespaceSelector: {}", selector)
               + repo.lq("g-a"))
    env = {"GIT_AUTHOR_NAME": ALICE[0], "GIT_AUTHOR_EMAIL": ALICE[1], "GIT_COMMITTER_NAME": ALICE[0],
           "GIT_COMMITTER_EMAIL": ALICE[1], "PATH": "/usr/bin:/bin", "GNUPGHOME": str(gpg.home)}
    subprocess.run(["git", "-c", "gpg.format=openpgp", "-c", f"user.signingkey={gpg.keys[signer].fingerprint}",
                    "commit", "-q", "-S", "-am", f"team-a: {cpu} cpu"], cwd=repo.path, env=env, check=True)
    return repo._git("rev-parse", "HEAD")


def test_fingerprint_of_an_armored_key_is_gpgs(gpg: Gpg) -> None:  # noqa: F811
    """The pure parser reads the same primary fingerprint from the armored block as gpg lists."""
    for key in gpg.keys.values():
        assert pgp_fingerprint(key.armored) == key.fingerprint.upper()


def test_a_damaged_armored_key_is_a_config_finding(gpg: Gpg) -> None:  # noqa: F811
    """A truncated key block is refused with the field's line, not accepted as a key that can never verify."""
    lines = gpg.keys["alice"].armored.strip().splitlines()
    damaged = "\n".join([lines[0], "", "mDMEZZZZ", lines[-1]])
    text = ("apiVersion: gitopsq.dev/v1alpha1\nkind: RepositoryConfig\ninclude: [q/]\nplatformTeam: p\n"
            "teams:\n  - name: p\n    paths: ['**']\n    maintainers:\n      - name: A\n        email: a@x.io\n"
            "        signingKeys:\n          - |\n" + indented(damaged, 12) + "\n")
    (finding,) = [f for f in parse_config(text.encode()).findings if f.is_error]
    assert finding.code == "config-invalid-key" and finding.location is not None and finding.location.line == 12
    assert "OpenPGP public key block" in finding.message


@pytest.mark.parametrize(("mode", "signer", "expected"), [
    pytest.param("required", "alice", ([], []), id="required-signed-by-the-owner"),
    pytest.param("required", "mallory", (["policy/signed-by-maintainer"], []), id="required-unknown-key-refused"),
    pytest.param("optional", "mallory", ([], ["policy/signature-unverified"]), id="optional-unknown-key-warns"),
])
def test_a_gpg_signed_change_is_judged_with_the_listed_key(tmp_path: Path, gpg: Gpg, mode: str,  # noqa: F811
                                                           signer: str,
                                                           expected: tuple[list[str], list[str]]) -> None:
    """A change GPG-signed by Alice, whose armored key gitopsq.yaml lists, verifies good and passes; one signed by a
    key nobody lists is refused when signing is required and only warned about when it is optional."""
    repo = repo_with(tmp_path, gpg, mode)
    head = signed_change(repo, gpg, signer, "12")
    validation = validate_revision(open_source(str(repo.path)), head)
    found = validation.report.findings
    errors, warnings = expected
    assert sorted({f.code for f in found if f.is_error}) == errors
    assert sorted({f.code for f in found if not f.is_error and f.code.startswith("policy/")}) == warnings
