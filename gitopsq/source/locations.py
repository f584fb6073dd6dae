"""What a REPO argument names: a local repository read in place, or a remote URL fetched into a cache.

A URL may carry ``user:password@``; the password is lifted out (used as the token) and never kept in the URL we
store, log, show in errors, or hash for the cache directory.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import unquote, urlsplit, urlunsplit

from gitopsq.errors import SourceError

REMOTE_SCHEMES = frozenset({"https", "http", "ssh", "git", "file", "git+ssh", "ssh+git"})
_SCP_LIKE = re.compile(r"^(?P<user>[^@/\s:]+)@(?P<host>[^/\s:]+):(?P<path>[^/].*|/.*)$")
_USERINFO = re.compile(r"(?P<scheme>[a-zA-Z][a-zA-Z0-9+.-]*://)[^/@\s]*@")


@dataclass(frozen=True, slots=True)
class RepoLocation:
    """A parsed REPO argument. Exactly one of ``path`` (local) or ``url`` (remote) is set."""

    display: str
    path: Path | None = None
    url: str | None = None
    username: str | None = None
    password: str | None = field(default=None, repr=False)

    @property
    def is_remote(self) -> bool:
        return self.url is not None

    @property
    def scheme(self) -> str:
        if self.url is None:
            return "local"
        if _SCP_LIKE.match(self.url):
            return "ssh"
        return urlsplit(self.url).scheme.lower()

    @property
    def cache_key(self) -> str:
        """sha256 of the credential-free URL: the name of this remote's cache directory."""
        return hashlib.sha256((self.url or str(self.path)).encode()).hexdigest()


def parse_location(repo: str) -> RepoLocation:
    """Classify ``repo`` as a URL (scheme://…, or scp-like user@host:path) or a local path."""
    text = repo.strip()
    if not text:
        raise SourceError("the repository is empty: give a local path or a URL")
    scp = _SCP_LIKE.match(text)
    if "://" not in text and scp is None:
        path = Path(text).expanduser()
        return RepoLocation(display=str(path), path=path)
    if scp is not None:
        return RepoLocation(display=text, url=text, username=scp.group("user"))
    parts = urlsplit(text)
    scheme = parts.scheme.lower()
    if scheme not in REMOTE_SCHEMES:
        shown = redact(text)
        raise SourceError(f"unsupported repository URL scheme {scheme!r} in {shown}: use https, http, ssh, git or file",
                          url=shown)
    if scheme == "file":
        return RepoLocation(display=text, url=text)
    username = unquote(parts.username) if parts.username else None
    password = unquote(parts.password) if parts.password else None
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    netloc = host + (f":{parts.port}" if parts.port else "")
    if username is not None and scheme not in ("https", "http"):
        netloc = f"{parts.username}@{netloc}"  # ssh keeps its user in the URL; it is not a secret
    clean = urlunsplit((scheme, netloc, parts.path, parts.query, ""))
    return RepoLocation(display=clean, url=clean, username=username, password=password)


def redact(text: str, secrets: Iterable[str | None] = ()) -> str:
    """``text`` with URL user-info removed and every given secret value replaced, on one line."""
    cleaned = _USERINFO.sub(lambda m: m.group("scheme"), text)
    for secret in secrets:
        if secret:
            cleaned = cleaned.replace(secret, "[redacted]")
    return " ".join(cleaned.split())
