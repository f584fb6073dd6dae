"""Redaction (pure): nothing secret-looking reaches a record.

Rules, applied recursively to every mapping, list and string:
1. a key that names a credential (token, password, secret, private key, API key, authorization, credential,
   cookie, session) is dropped with its value;
2. a URL with userinfo (``https://user:pass@host/…``) loses the userinfo, wherever it appears in a string;
3. a string that contains a recognisable credential (PEM private key, ``Bearer …``, GitHub/GitLab/Slack tokens,
   AWS access key ids, JWTs) has that part replaced by ``[redacted]``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from functools import lru_cache
from typing import Any

REDACTED = "[redacted]"

_SECRET_KEY = re.compile(
    r"(token|passw(or)?d|secret|private[_-]?key|api[_-]?key|authorization|credential|cookie|session[_-]?key)",
    re.IGNORECASE,
)
_USERINFO = re.compile(r"(?P<scheme>[a-zA-Z][a-zA-Z0-9+.-]*://)[^/@\s]+@")
_SECRET_VALUE = re.compile(
    r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----.*?(-----END [A-Z0-9 ]*PRIVATE KEY-----|$)"
    r"|\bBearer\s+[A-Za-z0-9._~+/=-]+"
    r"|\bgh[pousr]_[A-Za-z0-9]{20,}"
    r"|\bgithub_pat_[A-Za-z0-9_]{20,}"
    r"|\bglpat-[A-Za-z0-9_-]{16,}"
    r"|\bxox[abprs]-[A-Za-z0-9-]{10,}"
    r"|\b(AKIA|ASIA)[0-9A-Z]{16}\b"
    r"|\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*",
    re.DOTALL,
)
# Cheap pre-check so the common (clean) string costs one scan, not two substitutions.
_MAYBE = re.compile(r"://[^/\s]*@|PRIVATE KEY|Bearer|gh[pousr]_|github_pat_|glpat-|xox[abprs]-|AKIA|ASIA|eyJ")
# Lower-case fragments of everything the rules above can match. Plain substring tests on the whole JSON text
# are far cheaper than a regex; a hit only means "walk the structure", so false alarms cost time, not data.
_TRIGGERS = ("token", "passw", "passd", "secret", "private", "api_key", "api-key", "apikey", "authorization",
             "credential", "cookie", "session", "bearer", "gh", "glpat-", "xox", "akia", "asia", "eyj", "://")


@lru_cache(maxsize=4096)
def is_secret_key(key: str) -> bool:
    return _SECRET_KEY.search(key) is not None


def redact_text(text: str) -> str:
    """Strip URL userinfo and mask credentials inside one string."""
    if _MAYBE.search(text) is None:
        return text
    text = _USERINFO.sub(r"\g<scheme>", text)
    return _SECRET_VALUE.sub(REDACTED, text)


def redact(value: Any) -> Any:
    """``value`` (JSON-like data) with secret-looking keys dropped and secret-looking text masked.

    Fast path: one serialisation and two scans; clean data (nearly all of it) comes back as it is, and only
    data that may hold a secret is walked and copied.
    """
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        return _walk(value)
    lowered = text.lower()
    if not any(trigger in lowered for trigger in _TRIGGERS):
        return value
    return _walk(value)


def _walk(value: Any) -> Any:
    if isinstance(value, str):
        return redact_text(value)
    if isinstance(value, Mapping):
        return {str(k): _walk(v) for k, v in value.items() if not is_secret_key(str(k))}
    if isinstance(value, list | tuple):
        return [_walk(v) for v in value]
    return value
