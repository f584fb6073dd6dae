"""SSH signatures for audit commits, made and checked with ``ssh-keygen -Y`` (namespace ``git``).

A signed audit commit carries the signature in its ``gpgsig`` header, exactly as ``git commit -S`` with
``gpg.format=ssh`` writes it, so ``git verify-commit`` with an allowed-signers file accepts it too.
"""

from __future__ import annotations

import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from gitopsq.errors import AuditError

NAMESPACE = "git"


@dataclass(frozen=True, slots=True)
class SshSigner:
    """Signs with a private key file (the matching ``.pub`` must sit next to it, as ssh-keygen expects)."""

    key_path: str

    def sign(self, payload: bytes) -> str:
        result = subprocess.run(["ssh-keygen", "-Y", "sign", "-q", "-n", NAMESPACE, "-f", self.key_path],
                                input=payload, capture_output=True, check=False, timeout=30)
        if result.returncode != 0:
            detail = result.stderr.decode("utf-8", "replace").strip().splitlines()
            raise AuditError(f"cannot sign audit commit with {self.key_path}: {detail[-1] if detail else 'failed'}")
        return result.stdout.decode("ascii")


def verify_ssh_signature(payload: bytes, signature: str, *, allowed_signers: str, principal: str) -> bool:
    """True when ``signature`` over ``payload`` is good and made by ``principal``'s key in allowed_signers."""
    with tempfile.TemporaryDirectory() as tmp:
        sig_path = Path(tmp) / "commit.sig"
        sig_path.write_text(signature, encoding="ascii")
        result = subprocess.run(
            ["ssh-keygen", "-Y", "verify", "-f", allowed_signers, "-I", principal, "-n", NAMESPACE,
             "-s", str(sig_path)], input=payload, capture_output=True, check=False, timeout=30)
    return result.returncode == 0
