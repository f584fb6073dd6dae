"""Verify commit signatures (SSH and OpenPGP) against the keys of known identities.

The trust boundary is the mapping identity → public keys that the caller passes (gitopsq.yaml's maintainers):
a signature is ``good`` only when it verifies with one of those keys, and ``signer`` is the identity that owns
that key. The committer's or author's claimed name and email play no part (git's own allowed-signers check
would accept any listed key for any committer).

SSH signatures are checked with ``ssh-keygen -Y`` (namespace ``git``) against an allowed-signers file written to
a private temporary directory. OpenPGP signatures are checked with ``gpg --verify`` in a temporary GNUPGHOME
holding only the given armored public keys; the web of trust is not consulted. Without ``gpg`` (Debian package
``gnupg``) or ``ssh-keygen`` (``openssh-client``), such signatures come back ``unknown-key`` with the reason.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType

from gitopsq.errors import SourceError
from gitopsq.source.facts import CommitInfo, SignatureStatus

__all__ = ["SignatureStatus", "SignatureVerifier", "verify_signature"]

_SSH_ARMOUR = b"-----BEGIN SSH SIGNATURE-----"
_PGP_ARMOUR = b"-----BEGIN PGP SIGNATURE-----"
_PGP_KEY_ARMOUR = "-----BEGIN PGP PUBLIC KEY BLOCK-----"
_SSH_KEY_TYPE = re.compile(r"^(ssh-[a-z0-9-]+|ecdsa-sha2-[a-z0-9-]+|sk-[a-z0-9@.-]+)$")
_SSH_FINGERPRINT = re.compile(r"(SHA256:[A-Za-z0-9+/=]+)")
_FPR_ONLY = re.compile(r"^(?:[0-9A-Fa-f]{4}\s*){10}$")
TIMEOUT_SECONDS = 30.0


def verify_signature(
    commit: CommitInfo, keys: Mapping[str, Sequence[str]], *, gpg_keyring: Sequence[str] = ()
) -> SignatureStatus:
    """Verify one commit; for many commits, use one SignatureVerifier to prepare the keys once."""
    with SignatureVerifier(keys, gpg_keyring=gpg_keyring) as verifier:
        return verifier.verify(commit)


class SignatureVerifier:
    """Holds the prepared key material (allowed-signers file, GNUPGHOME) in a private temporary directory.

    ``keys`` maps an identity (a maintainer's name or email, as the caller chooses) to public keys: SSH keys in
    authorized_keys form, ASCII-armored OpenPGP public key blocks, or a 40-hex OpenPGP fingerprint. A key listed
    by fingerprint verifies only when its armored block is among ``gpg_keyring`` (e.g. an exported keyring the
    operator mounts); keyring keys nobody lists by fingerprint are never bound to anyone. Use as a context
    manager.
    """

    def __init__(self, keys: Mapping[str, Sequence[str]], *, gpg_keyring: Sequence[str] = ()) -> None:
        self._workdir = Path(tempfile.mkdtemp(prefix="gitopsq-sig-"))
        self._principals: dict[str, str] = {}
        self._pgp_owner: dict[str, str] = {}
        self._pgp_fingerprint_only: dict[str, str] = {}
        self._gpg = shutil.which("gpg")
        self._ssh_keygen = shutil.which("ssh-keygen")
        self._gnupghome: Path | None = None
        lines: list[str] = []
        armored: list[tuple[str | None, str]] = []
        for index, (identity, identity_keys) in enumerate(keys.items()):
            principal = f"identity-{index}"
            self._principals[principal] = identity
            for key in identity_keys:
                text = key.strip()
                if text.startswith(_PGP_KEY_ARMOUR):
                    armored.append((identity, text))
                elif _FPR_ONLY.match(text):
                    self._pgp_fingerprint_only.setdefault(re.sub(r"\s", "", text).upper(), identity)
                else:
                    ssh_key = _ssh_key_fields(text)
                    if ssh_key is not None:
                        lines.append(f'{principal} namespaces="git" {ssh_key}')
        self._allowed_signers = self._workdir / "allowed_signers"
        self._allowed_signers.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
        if self._pgp_fingerprint_only:
            armored.extend((None, block) for block in gpg_keyring)
        if armored and self._gpg is not None:
            self._prepare_gpg(armored)

    def __enter__(self) -> SignatureVerifier:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()

    def close(self) -> None:
        if self._gnupghome is not None and shutil.which("gpgconf"):
            # gpg may have started an agent for this home; stop exactly that one.
            subprocess.run(["gpgconf", "--homedir", str(self._gnupghome), "--kill", "all"],
                           capture_output=True, check=False, timeout=TIMEOUT_SECONDS)
        shutil.rmtree(self._workdir, ignore_errors=True)

    # -- dispatch --------------------------------------------------------------------------------------------

    def verify(self, commit: CommitInfo) -> SignatureStatus:
        signature, payload = commit.signature, commit.signed_payload
        if not signature or payload is None:
            return SignatureStatus("unsigned", None, None, None, "the commit is not signed")
        if signature.lstrip().startswith(_SSH_ARMOUR):
            return self._verify_ssh(signature, payload)
        if signature.lstrip().startswith(_PGP_ARMOUR):
            return self._verify_gpg(signature, payload)
        return SignatureStatus("unknown-key", None, None, None,
                               "unsupported signature format (only SSH and OpenPGP signatures are verified)")

    # -- SSH -------------------------------------------------------------------------------------------------

    def _verify_ssh(self, signature: bytes, payload: bytes) -> SignatureStatus:
        if self._ssh_keygen is None:
            return SignatureStatus("unknown-key", "ssh", None, None, "ssh-keygen is not installed")
        sig_file = self._workdir / "commit.sig"
        sig_file.write_bytes(signature)
        check = self._run([self._ssh_keygen, "-Y", "check-novalidate", "-n", "git", "-s", str(sig_file)], payload)
        if check.returncode != 0:
            return SignatureStatus("bad", "ssh", None, None,
                                   "the SSH signature does not match the commit (content changed after signing)")
        found = _SSH_FINGERPRINT.search(check.stdout + check.stderr)
        fingerprint = found.group(1) if found else None
        lookup = self._run([self._ssh_keygen, "-Y", "find-principals", "-s", str(sig_file),
                            "-f", str(self._allowed_signers)], b"")
        principals = [p for p in lookup.stdout.split() if p in self._principals] if lookup.returncode == 0 else []
        if not principals:
            shown = fingerprint or "(unknown)"
            return SignatureStatus("unknown-key", "ssh", None, fingerprint,
                                   f"signed with SSH key {shown}, which belongs to no known identity")
        principal = principals[0]
        verdict = self._run([self._ssh_keygen, "-Y", "verify", "-f", str(self._allowed_signers), "-I", principal,
                             "-n", "git", "-s", str(sig_file)], payload)
        identity = self._principals[principal]
        if verdict.returncode != 0:
            return SignatureStatus("bad", "ssh", None, fingerprint, "the SSH signature did not verify")
        return SignatureStatus("good", "ssh", identity, fingerprint,
                               f"good SSH signature by {identity} with key {fingerprint}")

    # -- OpenPGP ---------------------------------------------------------------------------------------------

    def _prepare_gpg(self, armored: list[tuple[str | None, str]]) -> None:
        assert self._gpg is not None
        home = self._workdir / "gnupg"
        home.mkdir(mode=0o700)
        self._gnupghome = home
        for identity, block in armored:
            shown = self._run([self._gpg, *self._gpg_base(), "--with-colons", "--import-options", "show-only",
                               "--import"], block.encode())
            owner, primary_next = identity, False
            for line in shown.stdout.splitlines():
                fields = line.split(":")
                if fields[0] == "pub":
                    owner, primary_next = identity, True
                elif fields[0] == "sub":
                    primary_next = False
                elif fields[0] == "fpr" and len(fields) > 9:
                    fpr = fields[9].upper()
                    if identity is None and primary_next:
                        # A keyring key belongs to whoever lists its primary fingerprint, if anyone.
                        owner = self._pgp_fingerprint_only.get(fpr)
                    if owner is not None:
                        # Primary and subkey fingerprints alike belong to the key's owner.
                        self._pgp_owner.setdefault(fpr, owner)
            self._run([self._gpg, *self._gpg_base(), "--import"], block.encode())

    def _gpg_base(self) -> list[str]:
        return ["--homedir", str(self._gnupghome), "--batch", "--no-tty", "--quiet", "--no-auto-key-retrieve",
                "--status-fd", "1"]

    def _verify_gpg(self, signature: bytes, payload: bytes) -> SignatureStatus:
        if self._gpg is None:
            return SignatureStatus("unknown-key", "gpg", None, None, "gpg is not installed (Debian package gnupg)")
        if self._gnupghome is None:
            home = self._workdir / "gnupg"
            home.mkdir(mode=0o700)
            self._gnupghome = home
        sig_file = self._workdir / "commit.asc"
        payload_file = self._workdir / "commit.payload"
        sig_file.write_bytes(signature)
        payload_file.write_bytes(payload)
        result = self._run([self._gpg, *self._gpg_base(), "--verify", str(sig_file), str(payload_file)], b"")
        status = _gpg_status(result.stdout)
        if "BADSIG" in status:
            return SignatureStatus("bad", "gpg", None, None,
                                   "the OpenPGP signature does not match the commit (content changed after signing)")
        for word, why in (("EXPKEYSIG", "the signing key has expired"), ("REVKEYSIG", "the signing key is revoked"),
                          ("EXPSIG", "the signature has expired")):
            if word in status:
                return SignatureStatus("bad", "gpg", None, _validsig_primary(status), why)
        if "GOODSIG" in status and "VALIDSIG" in status:
            primary = _validsig_primary(status)
            identity = self._pgp_owner.get(primary or "")
            if identity is None:
                return SignatureStatus("unknown-key", "gpg", None, primary,
                                       f"signed with OpenPGP key {primary}, which belongs to no known identity")
            return SignatureStatus("good", "gpg", identity, primary,
                                   f"good OpenPGP signature by {identity} with key {primary}")
        fpr = _errsig_fingerprint(status)
        if fpr and fpr in self._pgp_fingerprint_only:
            return SignatureStatus("unknown-key", "gpg", None, fpr,
                                   f"key {fpr} of {self._pgp_fingerprint_only[fpr]} is listed by fingerprint only;"
                                   " its armored public key is needed to verify")
        return SignatureStatus("unknown-key", "gpg", None, fpr,
                               f"signed with OpenPGP key {fpr or '(unknown)'}, which belongs to no known identity")

    def _run(self, argv: list[str], stdin: bytes) -> subprocess.CompletedProcess[str]:
        try:
            done = subprocess.run(argv, input=stdin, capture_output=True, check=False, timeout=TIMEOUT_SECONDS,
                                  cwd=self._workdir)
        except subprocess.TimeoutExpired:
            raise SourceError(f"signature verification timed out ({Path(argv[0]).name})") from None
        return subprocess.CompletedProcess(argv, done.returncode, done.stdout.decode("utf-8", "replace"),
                                           done.stderr.decode("utf-8", "replace"))


def _ssh_key_fields(line: str) -> str | None:
    """``keytype base64`` from an authorized_keys line, dropping options and comment; None if not an SSH key."""
    tokens = line.split()
    for index, token in enumerate(tokens[:-1]):
        if _SSH_KEY_TYPE.match(token):
            return f"{token} {tokens[index + 1]}"
    return None


def _gpg_status(stdout: str) -> dict[str, list[str]]:
    status: dict[str, list[str]] = {}
    for line in stdout.splitlines():
        if line.startswith("[GNUPG:] "):
            fields = line[len("[GNUPG:] "):].split()
            if fields:
                status.setdefault(fields[0], fields[1:])
    return status


def _validsig_primary(status: dict[str, list[str]]) -> str | None:
    fields = status.get("VALIDSIG")
    if not fields:
        return None
    return (fields[9] if len(fields) > 9 else fields[0]).upper()


def _errsig_fingerprint(status: dict[str, list[str]]) -> str | None:
    fields = status.get("ERRSIG") or status.get("NO_PUBKEY")
    if not fields:
        return None
    candidate = fields[-1] if len(fields) >= 7 else fields[0]
    return candidate.upper() if candidate not in ("-", "") else None
