"""``gitopsq.yaml`` as policies see it (``repo``), path ownership, and signing-key fingerprints.

The shape comes from the manifest loader (`gitopsq.manifests.config`, ``RepoConfig.as_policy_dict``), and path
ownership and key fingerprints use its functions too: one set of rules for what a path or a key means.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import yaml

from gitopsq.api.quantity import QuantityError, parse_quantity
from gitopsq.manifests import paths
from gitopsq.manifests.config import parse_config
from gitopsq.manifests.config_model import DEFAULT_TEAM_CLUSTER_KINDS, key_fingerprint, platform_file

__all__ = ["key_fingerprint", "normalise_repo_config", "owner_of_path", "path_matches"]

SIGNING_MODES = ("required", "optional", "off")


def path_matches(path: str, patterns: Sequence[str]) -> bool:
    """Whether ``path`` matches any pattern, with gitopsq.yaml's path rules (`gitopsq.manifests.paths`)."""
    return any(paths.matches(path, p) for p in patterns)


def owner_of_path(repo: Mapping[str, Any], path: str) -> str | None:
    """The team owning ``path`` in a normalised ``repo``: the most specific matching pattern wins, and
    gitopsq.yaml, ``.gitattributes``/``.gitmodules`` and policy files are the platform team's (docs/config.md rule
    4 and 6, the same code as the manifest loader)."""
    if platform_file(path, list(repo.get("policyPaths") or ())):
        return str(repo.get("platformTeam") or "") or None
    best: tuple[tuple[int, int], str] | None = None
    for team in repo.get("teams", []):
        for pattern in team.get("paths", []):
            if paths.matches(path, pattern):
                score = paths.specificity(pattern)
                if best is None or score > best[0]:
                    best = (score, team["name"])
    return best[1] if best else None


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _strings(value: Any) -> list[str]:
    return [str(v) for v in value] if isinstance(value, list) else []


def _maintainer(raw: Mapping[str, Any]) -> dict[str, Any]:
    keys = _strings(raw.get("signingKeys"))
    return {"name": str(raw.get("name") or ""), "email": str(raw.get("email") or "").lower(),
            "signingKeys": keys, "fingerprints": [key_fingerprint(k) for k in keys],
            "forgeUser": str(raw.get("forgeUser") or "")}


def _quantity_or_text(value: Any) -> str:
    try:
        return str(parse_quantity(value))
    except QuantityError:
        return str(value)


def normalise_repo_config(raw: Mapping[str, Any] | Any | None) -> dict[str, Any]:
    """The normalised ``repo`` variable (docs/config.md "As policies see it").

    A parsed `RepoConfig` gives its own ``as_policy_dict()``. A raw dict goes through the same parser
    (`gitopsq.manifests.config`); only a dict that parser cannot use at all is shaped leniently here, so that
    policies still run while the configuration's own findings are reported elsewhere.
    """
    if raw is not None and hasattr(raw, "as_policy_dict"):
        view: dict[str, Any] = raw.as_policy_dict()
        return view
    raw = raw or {}
    try:
        parsed = parse_config(yaml.safe_dump(dict(raw), sort_keys=False).encode()).config
    except yaml.YAMLError:
        parsed = None
    if parsed is not None:
        return parsed.as_policy_dict()
    return _lenient(raw)


def _lenient(raw: Mapping[str, Any]) -> dict[str, Any]:
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
        "teamClusterScopedKinds": _strings(raw.get("teamClusterScopedKinds")) if "teamClusterScopedKinds" in raw
        else list(DEFAULT_TEAM_CLUSTER_KINDS),
        "platformTeam": str(raw.get("platformTeam") or ""),
        "teams": teams,
        "teamsByName": {t["name"]: t for t in teams},
        "capacity": capacity,
        "trustZones": zones,
        "trustZonesByName": {z["name"]: z for z in zones},
        "signing": {"mode": str(signing.get("mode") or "off")},
        "forgeKeys": [{"name": str(f.get("name") or ""),
                       "fingerprints": [key_fingerprint(k) for k in _strings(f.get("keys"))]}
                      for f in raw.get("forgeKeys") or [] if isinstance(f, Mapping)],
        "audit": {"repository": "", "branch": "gitopsq/audit", "batchSeconds": 5, "batchRecords": 500,
                  **_mapping(raw.get("audit"))},
        "policies": {"disabled": _strings(policies.get("disabled"))},
        "admission": dict(raw.get("admission") or {}),
        "namespaceOwner": {ns: t["name"] for t in teams for ns in t["namespaces"]},
        "cohortZone": {c: z["name"] for z in zones for c in z["cohorts"]},
        "cluster": "",
        "clusters": [{"name": str(c.get("name") or ""), "paths": _strings(c.get("paths"))}
                     for c in raw.get("clusters") or [] if isinstance(c, Mapping)],
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
