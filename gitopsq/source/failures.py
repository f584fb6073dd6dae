"""The one place where pygit2 / libgit2 failures become gitopsq errors.

Every message is one line, names what we were doing and the repository (its credential-free display form),
and is scrubbed of secrets. Callers match on the class (SourceError, UnknownRevisionError,
AuthenticationError), never on the text.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager

import pygit2

from gitopsq.errors import AuthenticationError, GitopsqError, SourceError, UnknownRevisionError
from gitopsq.source.credentials import (
    CallbackAbort,
    CredentialsMissing,
    CredentialsRefused,
    HostUnverified,
    TransferTimeout,
)
from gitopsq.source.locations import redact

_AUTH_HINTS = ("401", "403", "authentication", "unauthorized", "credentials", "permission denied (publickey")
_UNREACHABLE_HINTS = (
    "failed to connect", "connection refused", "could not resolve", "resolve host", "timed out", "timeout",
    "unexpected disconnect", "early eof", "network is unreachable", "no route to host", "failed to send request",
    "failed to resolve", "connection reset", "404", "not found", "not exported", "does not appear to be a git",
    "could not find repository", "not a git repository", "unknown host", "hostkey", "ssl", "certificate",
)


def translate(
    exc: BaseException,
    *,
    action: str,
    repo: str,
    ref: str | None = None,
    secrets: Iterable[str | None] = (),
) -> SourceError:
    """A SourceError (or subclass) describing ``exc``, which happened while doing ``action`` on ``repo``."""
    secret_list = list(secrets)
    shown = redact(repo, secret_list)

    def clean(text: str) -> str:
        return redact(text, secret_list)

    if isinstance(exc, CredentialsRefused):
        return AuthenticationError(f"authentication failed for {shown}: the remote refused the credentials",
                                   url=shown, ref=ref)
    if isinstance(exc, CredentialsMissing):
        return AuthenticationError(f"authentication required by {shown}: provide {exc.wanted}", url=shown, ref=ref)
    if isinstance(exc, TransferTimeout):
        return SourceError(f"cannot {action} {shown}: timed out", url=shown, ref=ref)
    if isinstance(exc, HostUnverified):
        return SourceError(f"cannot {action} {shown}: the identity of host {clean(exc.host)} could not be verified"
                           " (TLS certificate or ssh known_hosts; see GITOPSQ_SSH_KNOWN_HOSTS)", url=shown, ref=ref)
    detail = clean(str(exc)) or type(exc).__name__
    lowered = detail.lower()
    if isinstance(exc, pygit2.AuthError) or any(hint in lowered for hint in _AUTH_HINTS):
        return AuthenticationError(f"authentication failed for {shown}: {detail}", url=shown, ref=ref)
    if isinstance(exc, KeyError | pygit2.InvalidSpecError | pygit2.AmbiguousError) and ref is not None:
        return unknown_revision(ref, shown, detail)
    if any(hint in lowered for hint in _UNREACHABLE_HINTS):
        return SourceError(f"cannot reach {shown}: {detail}", url=shown, ref=ref)
    return SourceError(f"git failed to {action} {shown}: {detail}", url=shown, ref=ref)


def unknown_revision(ref: str, repo: str, why: str = "no branch, tag or commit has that name") -> UnknownRevisionError:
    shown = redact(repo)
    return UnknownRevisionError(f"unknown revision {ref!r} in {shown}: {redact(why)}", url=shown, ref=ref)


def ambiguous_revision(ref: str, repo: str, why: str) -> UnknownRevisionError:
    """A name that means several refs (gitopsq.source.refnames): refused rather than resolved to one of them."""
    shown = redact(repo)
    return UnknownRevisionError(f"ambiguous revision {ref!r} in {shown}: {redact(why)}", url=shown, ref=ref)


@contextmanager
def git_errors(
    action: str, repo: str, *, ref: str | None = None, secrets: Iterable[str | None] = ()
) -> Iterator[None]:
    """Translate pygit2 / callback failures raised inside the block; gitopsq errors pass through untouched."""
    try:
        yield
    except GitopsqError:
        raise
    except (pygit2.GitError, CallbackAbort, OSError, ValueError) as exc:
        raise translate(exc, action=action, repo=repo, ref=ref, secrets=secrets) from exc
