"""Signature verification binds the signing key to an identity of the trust map, never to the claimed committer."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import pytest

from gitopsq.source import open_source
from gitopsq.source.facts import CommitInfo
from gitopsq.source.signatures import SignatureVerifier, verify_signature

from .conftest import GitRepo

ALICE = {"GIT_COMMITTER_NAME": "Alice Maintainer", "GIT_COMMITTER_EMAIL": "alice@example.com",
         "GIT_AUTHOR_NAME": "Alice Maintainer", "GIT_AUTHOR_EMAIL": "alice@example.com"}


@dataclass(frozen=True)
class SshKey:
    private: Path
    public_line: str
    fingerprint: str


def _ssh_key(directory: Path, name: str) -> SshKey:
    private = directory / name
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", f"{name}@laptop", "-f", str(private)],
                   check=True, capture_output=True)
    listing = subprocess.run(["ssh-keygen", "-l", "-f", f"{private}.pub"], check=True, capture_output=True,
                             text=True).stdout
    return SshKey(private, Path(f"{private}.pub").read_text().strip(), listing.split()[1])


@pytest.fixture(scope="module")
def ssh_keys(tmp_path_factory: pytest.TempPathFactory) -> dict[str, SshKey]:
    directory = tmp_path_factory.mktemp("ssh-keys")
    return {name: _ssh_key(directory, name) for name in ("alice", "bob", "mallory")}


@dataclass(frozen=True)
class GpgKey:
    fingerprint: str
    armored: str


@dataclass(frozen=True)
class Gpg:
    home: Path
    keys: dict[str, GpgKey]


@pytest.fixture(scope="module")
def gpg() -> Iterator[Gpg]:
    """A throw-away GNUPGHOME (short path, for gpg-agent's socket) with passphrase-less keys; agent stopped after."""
    home = Path(tempfile.mkdtemp(prefix="gq-gpg-", dir="/tmp"))
    home.chmod(0o700)
    base = ["gpg", "--homedir", str(home), "--batch", "--no-tty", "--quiet"]
    keys: dict[str, GpgKey] = {}
    try:
        for name in ("alice", "bob", "mallory"):
            subprocess.run([*base, "--passphrase", "", "--quick-gen-key", f"{name.title()} <{name}@example.com>",
                            "ed25519", "sign", "never"], check=True, capture_output=True)
            colons = subprocess.run([*base, "--with-colons", "--list-keys", f"{name}@example.com"], check=True,
                                    capture_output=True, text=True).stdout
            fingerprint = next(line.split(":")[9] for line in colons.splitlines() if line.startswith("fpr:"))
            armored = subprocess.run([*base, "--armor", "--export", fingerprint], check=True, capture_output=True,
                                     text=True).stdout
            keys[name] = GpgKey(fingerprint, armored)
        yield Gpg(home, keys)
    finally:
        subprocess.run(["gpgconf", "--homedir", str(home), "--kill", "all"], check=False, capture_output=True)
        shutil.rmtree(home, ignore_errors=True)


def ssh_signed(repo: GitRepo, key: SshKey, message: str, env: dict[str, str] | None = None) -> str:
    return _commit_with(repo, message, ["-c", "gpg.format=ssh", "-c", f"user.signingkey={key.private}"], env)


def gpg_signed(repo: GitRepo, gpg: Gpg, name: str, message: str, env: dict[str, str] | None = None) -> str:
    config = ["-c", "gpg.format=openpgp", "-c", f"user.signingkey={gpg.keys[name].fingerprint}"]
    return _commit_with(repo, message, config, {"GNUPGHOME": str(gpg.home), **(env or {})})


def _commit_with(repo: GitRepo, message: str, config: list[str], env: dict[str, str] | None) -> str:
    repo.write({f"{message}.yaml": "x: 1\n"})
    repo.git("add", "-A")
    repo.git(*config, "commit", "-q", "-S", "-m", message, env=env)
    return repo.git("rev-parse", "HEAD")


def tampered(repo: GitRepo, sha: str) -> str:
    """A copy of a signed commit whose message was changed after signing (signature header kept verbatim)."""
    raw = repo.git("cat-file", "commit", sha).encode() + b"\n"
    forged = raw.replace(b"\n\nraise", b"\n\nRAISE", 1)
    assert forged != raw
    return repo.git("hash-object", "-t", "commit", "-w", "--stdin", input=forged)


def info(repo: GitRepo, sha: str) -> CommitInfo:
    return open_source(str(repo.path)).commit_info(sha)


SSH_CASES = [
    pytest.param("alice", ALICE, "good", "alice", id="maintainer-signs-own-commit"),
    pytest.param("bob", ALICE, "good", "bob", id="committer-claims-alice-but-bob-signed"),
    pytest.param("mallory", ALICE, "unknown-key", None, id="key-of-nobody-in-the-trust-map"),
]


@pytest.mark.parametrize(("signer", "claimed", "state", "identity"), SSH_CASES)
def test_ssh_signatures_bind_to_the_key_owner(repo: GitRepo, ssh_keys: dict[str, SshKey], *, signer: str,
                                              claimed: dict[str, str], state: str, identity: str | None) -> None:
    """An SSH-signed commit is attributed to the identity whose key verified it, whatever the committer claims."""
    sha = ssh_signed(repo, ssh_keys[signer], "raise quota", claimed)
    trust = {"alice": [ssh_keys["alice"].public_line], "bob": [f'cert-authority,no-pty {ssh_keys["bob"].public_line}']}
    status = verify_signature(info(repo, sha), trust)
    assert (status.state, status.kind, status.signer) == (state, "ssh", identity)
    assert status.fingerprint == ssh_keys[signer].fingerprint
    assert status.verified is (state == "good")


def test_tampered_ssh_signed_commit_is_bad(repo: GitRepo, ssh_keys: dict[str, SshKey]) -> None:
    """Changing a signed commit's content after signing makes its SSH signature bad, with no signer."""
    sha = ssh_signed(repo, ssh_keys["alice"], "raise quota", ALICE)
    status = verify_signature(info(repo, tampered(repo, sha)), {"alice": [ssh_keys["alice"].public_line]})
    assert (status.state, status.kind, status.signer) == ("bad", "ssh", None)


def test_unsigned_commit_by_a_claimed_maintainer_is_unsigned(repo: GitRepo, ssh_keys: dict[str, SshKey]) -> None:
    """A commit whose committer claims to be a maintainer but carries no signature is unsigned, with no signer."""
    sha = repo.commit("raise quota", {"a.yaml": "x: 1\n"}, env=ALICE)
    status = verify_signature(info(repo, sha), {"alice": [ssh_keys["alice"].public_line]})
    assert (status.state, status.kind, status.signer, status.fingerprint) == ("unsigned", None, None, None)


def test_one_verifier_serves_many_commits(repo: GitRepo, ssh_keys: dict[str, SshKey]) -> None:
    """A SignatureVerifier prepares the keys once and verifies a range of commits, cleaning up afterwards."""
    first = ssh_signed(repo, ssh_keys["alice"], "raise quota", ALICE)
    second = ssh_signed(repo, ssh_keys["bob"], "raise more", ALICE)
    third = repo.commit("unsigned", {"c.yaml": "x\n"})
    source = open_source(str(repo.path))
    trust = {"alice": [ssh_keys["alice"].public_line], "bob": [ssh_keys["bob"].public_line]}
    with SignatureVerifier(trust) as verifier:
        states = [(verifier.verify(source.commit_info(s)).state, verifier.verify(source.commit_info(s)).signer)
                  for s in (first, second, third)]
        workdir = verifier._workdir
    assert states == [("good", "alice"), ("good", "bob"), ("unsigned", None)]
    assert not workdir.exists()


GPG_CASES = [
    pytest.param("alice", "good", "alice", id="maintainer-signs-own-commit"),
    pytest.param("bob", "good", "bob", id="committer-claims-alice-but-bob-signed"),
    pytest.param("mallory", "unknown-key", None, id="key-of-nobody-in-the-trust-map"),
]


@pytest.mark.parametrize(("signer", "state", "identity"), GPG_CASES)
def test_gpg_signatures_bind_to_the_key_owner(repo: GitRepo, gpg: Gpg, signer: str, state: str,
                                              identity: str | None) -> None:
    """An OpenPGP-signed commit is attributed to the identity whose armored key verified it."""
    sha = gpg_signed(repo, gpg, signer, "raise quota", ALICE)
    trust = {"alice": [gpg.keys["alice"].armored], "bob": [gpg.keys["bob"].armored]}
    status = verify_signature(info(repo, sha), trust)
    assert (status.state, status.kind, status.signer) == (state, "gpg", identity)
    assert status.fingerprint == gpg.keys[signer].fingerprint


def test_tampered_gpg_signed_commit_is_bad(repo: GitRepo, gpg: Gpg) -> None:
    """Changing a GPG-signed commit after signing gives a bad signature with no signer."""
    sha = gpg_signed(repo, gpg, "alice", "raise quota", ALICE)
    status = verify_signature(info(repo, tampered(repo, sha)), {"alice": [gpg.keys["alice"].armored]})
    assert (status.state, status.kind, status.signer) == ("bad", "gpg", None)


def test_gpg_key_listed_by_fingerprint_only_cannot_verify(repo: GitRepo, gpg: Gpg) -> None:
    """A maintainer listed by a bare fingerprint gets unknown-key with a reason asking for the armored key."""
    sha = gpg_signed(repo, gpg, "alice", "raise quota", ALICE)
    status = verify_signature(info(repo, sha), {"alice": [gpg.keys["alice"].fingerprint]})
    assert (status.state, status.signer) == ("unknown-key", None)
    assert "armored" in status.reason


def test_fingerprint_listed_key_verifies_from_the_keyring(repo: GitRepo, gpg: Gpg) -> None:
    """A maintainer listed by fingerprint is bound when the keyring holds that key; other keyring keys bind nobody."""
    trust = {"alice": [gpg.keys["alice"].fingerprint]}
    keyring = [gpg.keys["alice"].armored, gpg.keys["mallory"].armored]
    by_alice = gpg_signed(repo, gpg, "alice", "raise quota", ALICE)
    by_mallory = gpg_signed(repo, gpg, "mallory", "raise more", ALICE)
    with SignatureVerifier(trust, gpg_keyring=keyring) as verifier:
        good = verifier.verify(info(repo, by_alice))
        stranger = verifier.verify(info(repo, by_mallory))
    assert (good.state, good.signer, good.fingerprint) == ("good", "alice", gpg.keys["alice"].fingerprint)
    assert (stranger.state, stranger.signer) == ("unknown-key", None)


def test_ssh_keys_do_not_verify_gpg_signatures(repo: GitRepo, gpg: Gpg, ssh_keys: dict[str, SshKey]) -> None:
    """A GPG-signed commit checked against SSH keys only is unknown-key: key kinds never cross over."""
    sha = gpg_signed(repo, gpg, "alice", "raise quota", ALICE)
    status = verify_signature(info(repo, sha), {"alice": [ssh_keys["alice"].public_line]})
    assert (status.state, status.kind, status.signer) == ("unknown-key", "gpg", None)


def test_unsupported_signature_format_is_not_trusted(repo: GitRepo) -> None:
    """An X.509 (or any unknown) signature is reported unknown-key with no kind and no signer."""
    sha = repo.commit("raise quota", {"a.yaml": "x: 1\n"})
    fake = replace(info(repo, sha), signature=b"-----BEGIN SIGNED MESSAGE-----\nAAAA\n-----END SIGNED MESSAGE-----\n",
                   signed_payload=b"payload")
    status = verify_signature(fake, {"alice": []})
    assert (status.state, status.kind, status.signer) == ("unknown-key", None, None)
