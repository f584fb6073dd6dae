"""Credentials for remotes, from the environment or files, handed to libgit2 through RemoteCallbacks.

Environment (docs/source.md):
  GITOPSQ_GIT_TOKEN / GITOPSQ_GIT_TOKEN_FILE   https token (the file wins when both are set)
  GITOPSQ_GIT_USERNAME                         https user name sent with the token (default ``git``)
  GITOPSQ_SSH_KEY_FILE                         private key for ssh remotes (public key read from ``<file>.pub``)
  GITOPSQ_SSH_KNOWN_HOSTS                      known_hosts file to check ssh host keys against

Secret values are kept out of ``repr`` and are listed by :meth:`Credentials.secrets` so every error message can
be scrubbed of them.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pygit2
from pygit2.enums import CredentialType

from gitopsq.errors import SourceError

DEFAULT_USERNAME = "git"


@dataclass(frozen=True, slots=True)
class Credentials:
    """What we may present to a remote. Every field is optional; the remote decides what it asks for."""

    username: str = DEFAULT_USERNAME
    token: str | None = field(default=None, repr=False)
    ssh_key_file: Path | None = None
    ssh_known_hosts: Path | None = None

    @classmethod
    def from_environment(cls, env: Mapping[str, str] | None = None) -> Credentials:
        env = os.environ if env is None else env
        token = env.get("GITOPSQ_GIT_TOKEN") or None
        token_file = env.get("GITOPSQ_GIT_TOKEN_FILE")
        if token_file:
            try:
                token = Path(token_file).read_text(encoding="utf-8").strip() or None
            except OSError as exc:
                raise SourceError(f"cannot read GITOPSQ_GIT_TOKEN_FILE {token_file}: {exc.strerror}") from None
        key = env.get("GITOPSQ_SSH_KEY_FILE")
        known = env.get("GITOPSQ_SSH_KNOWN_HOSTS")
        return cls(
            username=env.get("GITOPSQ_GIT_USERNAME") or DEFAULT_USERNAME,
            token=token,
            ssh_key_file=Path(key).expanduser() if key else None,
            ssh_known_hosts=Path(known).expanduser() if known else None,
        )

    def with_url_userinfo(self, username: str | None, password: str | None) -> Credentials:
        """URL ``user:password@`` overrides the environment (a password is then used as the token)."""
        return Credentials(username or self.username, password or self.token, self.ssh_key_file,
                           self.ssh_known_hosts)

    def secrets(self) -> tuple[str, ...]:
        return (self.token,) if self.token else ()


class CallbackAbort(Exception):  # noqa: N818 - internal signal, translated in failures.py
    """Raised inside a libgit2 callback to stop the transfer; failures.py turns it into a SourceError."""


class CredentialsRefused(CallbackAbort):
    """The remote asked again after we presented our credentials: they were refused."""


class CredentialsMissing(CallbackAbort):
    """The remote asked for a kind of credential we do not have."""

    def __init__(self, wanted: str) -> None:
        super().__init__(wanted)
        self.wanted = wanted


class TransferTimeout(CallbackAbort):
    """The transfer ran past its deadline."""


class HostUnverified(CallbackAbort):
    """TLS or SSH could not verify the server's identity."""

    def __init__(self, host: str) -> None:
        super().__init__(host)
        self.host = host


class GitCallbacks(pygit2.RemoteCallbacks):
    """Presents credentials once per kind, refuses to loop on rejection, and enforces a deadline."""

    def __init__(self, credentials: Credentials, *, timeout_seconds: float) -> None:
        super().__init__()
        self._credentials = credentials
        self._deadline = time.monotonic() + timeout_seconds
        self._presented: set[str] = set()
        self.transfers = 0

    def credentials(self, url: str, username_from_url: str | None, allowed_types: CredentialType) -> Any:
        creds = self._credentials
        if allowed_types & CredentialType.USERPASS_PLAINTEXT:
            if creds.token is None:
                raise CredentialsMissing("an https token (set GITOPSQ_GIT_TOKEN or GITOPSQ_GIT_TOKEN_FILE)")
            return self._once("userpass", pygit2.UserPass(creds.username, creds.token))
        if allowed_types & CredentialType.SSH_KEY:
            if creds.ssh_key_file is None:
                raise CredentialsMissing("an ssh key (set GITOPSQ_SSH_KEY_FILE)")
            public = creds.ssh_key_file.with_name(creds.ssh_key_file.name + ".pub")
            user = username_from_url or creds.username
            keypair = pygit2.Keypair(user, public if public.exists() else None, creds.ssh_key_file, "")
            return self._once("ssh", keypair)
        if allowed_types & CredentialType.USERNAME:
            return self._once("username", pygit2.Username(username_from_url or creds.username))
        raise CredentialsMissing("a kind of credential gitopsq does not support")

    def _once(self, kind: str, credential: Any) -> Any:
        if kind in self._presented:
            raise CredentialsRefused(kind)
        self._presented.add(kind)
        return credential

    def certificate_check(self, certificate: None, valid: bool, host: bytes) -> bool:
        if not valid:
            raise HostUnverified(host.decode("utf-8", "replace") if isinstance(host, bytes) else str(host))
        return True

    def transfer_progress(self, stats: Any) -> None:
        self.transfers += 1
        self._check_deadline()

    def sideband_progress(self, string: str) -> None:
        self._check_deadline()

    def _check_deadline(self) -> None:
        if time.monotonic() > self._deadline:
            raise TransferTimeout()
