"""``gitopsq.yaml`` as policies see it (``repo``), path ownership, and signing-key fingerprints.

`normalise_repo_config` is tolerant: validating the file is the manifest loader's job (docs/config.md); this
module only shapes what the loader accepted into the form documented under "As policies see it", so that
expressions never need ``has()`` for an optional list.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
from collections.abc import Mapping, Sequence
from functools import lru_cache
from typing import Any

from gitopsq.policy import functions as fn

SIGNING_MODES = ("required", "optional", "off")
_GPG_FINGERPRINT = re.compile(r"^[0-9A-Fa-f]{16,40}$")


@lru_cache(maxsize=1024)
def glob_regex(pattern: str) -> re.Pattern[str]:
    """``*``/``?`` stay in one segment, ``**`` spans segments, a trailing ``/`` covers everything below."""
    while pattern.startswith(("./", "/")):
        pattern = pattern[2:] if pattern.startswith("./") else pattern[1:]
    if pattern.endswith("/"):
        pattern += "**"
    out: list[str] = []
    segments = pattern.split("/")
    for index, segment in enumerate(segments):
        last = index == len(segments) - 1
        if segment == "**":
            out.append(".*" if last else "(?:[^/]+/)*")
            continue
        part = "".join("[^/]*" if ch == "*" else "[^/]" if ch == "?" else re.escape(ch) for ch in segment)
        out.append(part if last else part + "/")
    return re.compile("^" + "".join(out) + "$")


def path_matches(path: str, patterns: Sequence[str]) -> bool:
    return any(glob_regex(p).match(path) for p in patterns)


def _literal_length(pattern: str) -> int:
    found = re.search(r"[*?\[]", pattern)
    return len(pattern) if found is None else found.start()


def owner_of_path(repo: Mapping[str, Any], path: str) -> str | None:
    """The team owning ``path``: the matching pattern with the longest literal prefix wins (docs/config.md)."""
    if path == "gitopsq.yaml" and repo.get("platformTeam"):
        return str(repo["platformTeam"])
    best: tuple[int, str] | None = None
    for team in repo.get("teams", []):
        for pattern in team.get("paths", []):
            if glob_regex(pattern).match(path):
                score = _literal_length(pattern)
                if best is None or score > best[0]:
                    best = (score, team["name"])
    return best[1] if best else None


def key_fingerprint(key: str) -> str:
    """Normalise a signing key to the fingerprint form the source layer reports.

    A GPG fingerprint becomes upper-case hex; an SSH public key (``type base64 comment``) becomes
    ``SHA256:<unpadded base64 of the SHA-256 of the key blob>``, as ``ssh-keygen -l`` prints it.
    """
    text = key.strip()
    compact = text.replace(" ", "")
    if _GPG_FINGERPRINT.match(compact):
        return compact.upper()
    if text.startswith("SHA256:"):
        return text
    parts = text.split()
    if len(parts) >= 2:
        try:
            blob = base64.b64decode(parts[1], validate=True)
        except (binascii.Error, ValueError):
            return text
        return "SHA256:" + base64.b64encode(hashlib.sha256(blob).digest()).decode().rstrip("=")
    return text


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _strings(value: Any) -> list[str]:
    return [str(v) for v in value] if isinstance(value, list) else []


def _maintainer(raw: Mapping[str, Any]) -> dict[str, Any]:
    keys = _strings(raw.get("signingKeys"))
    return {"name": str(raw.get("name") or ""), "email": str(raw.get("email") or "").lower(),
            "signingKeys": keys, "fingerprints": [key_fingerprint(k) for k in keys]}


def _quantity_or_text(value: Any) -> str:
    try:
        return fn.quantity(str(value))
    except fn.CelFunctionError:
        return str(value)


def normalise_repo_config(raw: Mapping[str, Any] | None) -> dict[str, Any]:
    """The normalised ``repo`` variable: optional lists present, quantities canonical, lookup maps added."""
    raw = raw or {}
    teams = []
    for team in raw.get("teams") or []:
        if not isinstance(team, Mapping):
            continue
        teams.append({
            "name": str(team.get("name") or ""),
            "paths": _strings(team.get("paths")),
            "namespaces": _strings(team.get("namespaces")),
            "cohorts": _strings(team.get("cohorts")),
            "maintainers": [_maintainer(m) for m in team.get("maintainers") or [] if isinstance(m, Mapping)],
        })
    capacity = {
        str(flavor): {str(res): _quantity_or_text(q) for res, q in (resources or {}).items()}
        for flavor, resources in (raw.get("capacity") or {}).items()
        if isinstance(resources, Mapping) or resources is None
    }
    zones = [{"name": str(z.get("name") or ""), "teams": _strings(z.get("teams")),
              "cohorts": _strings(z.get("cohorts"))}
             for z in raw.get("trustZones") or [] if isinstance(z, Mapping)]
    signing = _mapping(raw.get("signing"))
    policies = _mapping(raw.get("policies"))
    return {
        "apiVersion": str(raw.get("apiVersion") or ""),
        "kind": str(raw.get("kind") or ""),
        "include": _strings(raw.get("include")),
        "exclude": _strings(raw.get("exclude")),
        "policyPaths": _strings(raw.get("policyPaths")),
        "allowKinds": _strings(raw.get("allowKinds")),
        "platformTeam": str(raw.get("platformTeam") or ""),
        "teams": teams,
        "teamsByName": {t["name"]: t for t in teams},
        "capacity": capacity,
        "trustZones": zones,
        "trustZonesByName": {z["name"]: z for z in zones},
        "signing": {"mode": str(signing.get("mode") or "off")},
        "audit": dict(raw.get("audit") or {}),
        "policies": {"disabled": _strings(policies.get("disabled"))},
        "admission": dict(raw.get("admission") or {}),
        "namespaceOwner": {ns: t["name"] for t in teams for ns in t["namespaces"]},
        "cohortZone": {c: z["name"] for z in zones for c in z["cohorts"]},
    }


def teams_of_fingerprint(repo: Mapping[str, Any], fingerprint: str) -> tuple[dict[str, Any] | None, list[str]]:
    """The maintainer holding the key with this fingerprint, and every team listing that maintainer's key."""
    wanted = key_fingerprint(fingerprint) if fingerprint else ""
    found: dict[str, Any] | None = None
    teams: list[str] = []
    for team in repo.get("teams", []):
        for person in team["maintainers"]:
            if wanted and wanted in person["fingerprints"]:
                found = found or person
                teams.append(team["name"])
                break
    return found, teams


def teams_of_email(repo: Mapping[str, Any], email: str) -> list[str]:
    wanted = email.strip().lower()
    return [t["name"] for t in repo.get("teams", []) if wanted and any(m["email"] == wanted for m in t["maintainers"])]
