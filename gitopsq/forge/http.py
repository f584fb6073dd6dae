"""The one HTTP helper the forge clients and notifications share: JSON over urllib, a timeout on every call,
retries with exponential backoff on 429/5xx and on connection failures, and a token that never reaches a log.
"""

from __future__ import annotations

import json
import os
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gitopsq.errors import RuntimeFailure, UsageError

RETRIED = frozenset({429, 500, 502, 503, 504})


class ForgeError(RuntimeFailure):
    """A forge API call failed or was refused (forge, HTTP status or None when unreachable, method and path)."""

    def __init__(self, reason: str, *, forge: str, status: int | None = None, method: str = "",
                 path: str = "") -> None:
        super().__init__(reason)
        self.forge = forge
        self.status = status
        self.method = method
        self.path = path


class Secret:
    """A credential whose text never appears in a repr, a str or a log line (only `reveal` gives it out)."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def reveal(self) -> str:
        return self._value

    def __repr__(self) -> str:
        return "Secret('[redacted]')"

    __str__ = __repr__


def load_token(token_file: str | None = None, env: str | None = None) -> Secret:
    """The token from a file (a mounted Secret key) or else the environment variable ``env``.

    UsageError when neither gives a non-empty token; the message names where it looked, never the value.
    """
    if token_file:
        try:
            text = Path(token_file).read_text(encoding="utf-8").strip()
        except OSError as err:
            raise UsageError(f"cannot read the forge token file {token_file}: {err.strerror}") from err
        if not text:
            raise UsageError(f"the forge token file {token_file} is empty")
        return Secret(text)
    if env and os.environ.get(env, "").strip():
        return Secret(os.environ[env].strip())
    where = f"--token-file or ${env}" if env else "--token-file"
    raise UsageError(f"no forge token: give {where}")


@dataclass(frozen=True, slots=True)
class Backoff:
    """How often and how patiently to retry: ``attempts`` in all, waits ``base``·2ⁿ capped at ``cap`` seconds."""

    attempts: int = 4
    base: float = 0.5
    cap: float = 8.0

    def delay(self, attempt: int, retry_after: str | None = None) -> float:
        if retry_after and retry_after.strip().isdigit():
            return min(float(retry_after.strip()), self.cap)
        return min(self.base * 2.0 ** attempt, self.cap)


@dataclass(slots=True)
class Http:
    """JSON requests to one base URL (``https://host/api/v1``) with the forge's auth headers."""

    forge: str
    base_url: str
    headers: Mapping[str, str] = field(default_factory=dict)
    secret_headers: Mapping[str, Secret] = field(default_factory=dict)
    timeout: float = 10.0
    backoff: Backoff = field(default_factory=Backoff)
    sleep: Callable[[float], None] = time.sleep

    def request(self, method: str, path: str, body: Any = None, *, query: Sequence[tuple[str, str]] = (),
                decode: bool = True, extra: Mapping[str, str] | None = None) -> tuple[Any, Mapping[str, str]]:
        """Send one request (retrying as `backoff` says); return the decoded JSON body (None if empty; the raw
        bytes when not ``decode``) and the answer's headers.

        ForgeError on a 4xx, on a 5xx/429 or a connection failure that outlasts the retries, or on a body that
        is not JSON.
        """
        url = self.base_url.rstrip("/") + path + (("?" + urllib.parse.urlencode(query)) if query else "")
        data = None if body is None else (body if isinstance(body, bytes) else json.dumps(body).encode())
        headers = {"Accept": "application/json", "User-Agent": "gitopsq", **self.headers, **(extra or {})}
        if data is not None:
            headers["Content-Type"] = "application/json"
        last = ""
        status: int | None = None
        for attempt in range(self.backoff.attempts):
            req = urllib.request.Request(url, data=data, method=method, headers=headers)
            for name, secret in self.secret_headers.items():  # not repeated to wherever a redirect points
                req.add_unredirected_header(name, secret.reveal())
            retry_after = None
            try:
                with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                    raw = resp.read()
                    return (_decode(raw, self.forge, method, path) if decode else raw), dict(resp.headers)
            except urllib.error.HTTPError as err:
                status, last = err.code, _reason(err)
                if err.code not in RETRIED:
                    raise ForgeError(f"{self.forge} {method} {path}: HTTP {err.code}: {last}", forge=self.forge,
                                     status=err.code, method=method, path=path) from None
                retry_after = err.headers.get("Retry-After") if err.headers else None
            except (urllib.error.URLError, TimeoutError, ConnectionError) as err:
                status, last = None, str(getattr(err, "reason", err))
            if attempt + 1 < self.backoff.attempts:
                self.sleep(self.backoff.delay(attempt, retry_after))
        what = f"HTTP {status}: {last}" if status else f"unreachable: {last}"
        raise ForgeError(f"{self.forge} {method} {path}: {what} (after {self.backoff.attempts} attempts)",
                         forge=self.forge, status=status, method=method, path=path)

    def json(self, method: str, path: str, body: Any = None, *, query: Sequence[tuple[str, str]] = ()) -> Any:
        return self.request(method, path, body, query=query)[0]

    def pages(self, path: str, *, size_param: str, size: int = 50, query: Sequence[tuple[str, str]] = (),
              limit: int = 50) -> list[Any]:
        """Every item of a list endpoint paged with ``page`` and ``size_param`` (stops at a short page)."""
        items: list[Any] = []
        for page in range(1, limit + 1):
            got = self.json("GET", path, query=[*query, ("page", str(page)), (size_param, str(size))]) or []
            if not isinstance(got, list):
                raise ForgeError(f"{self.forge} GET {path}: expected a list, got {type(got).__name__}",
                                 forge=self.forge, method="GET", path=path)
            items.extend(got)
            if len(got) < size:
                break
        return items


def _decode(raw: bytes, forge: str, method: str, path: str) -> Any:
    if not raw.strip():
        return None
    try:
        return json.loads(raw)
    except ValueError as err:
        raise ForgeError(f"{forge} {method} {path}: the answer is not JSON", forge=forge, method=method,
                         path=path) from err


def _reason(err: urllib.error.HTTPError) -> str:
    """The forge's own message (``message``/``error`` of a JSON body) or the HTTP reason, on one short line."""
    try:
        raw = err.read()
    except OSError:
        raw = b""
    text = raw.decode("utf-8", "replace").strip()
    try:
        data = json.loads(text)
        if isinstance(data, dict):
            text = str(data.get("message") or data.get("error") or text)
    except ValueError:
        pass
    return (text or str(err.reason)).splitlines()[0][:300] if (text or err.reason) else "no reason given"
