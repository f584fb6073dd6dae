"""Parse and validate gitopsq.yaml (docs/config.md): every rule there, each problem a finding with its line."""

from __future__ import annotations

import base64
import binascii
import re
import struct
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from gitopsq.api.findings import Finding
from gitopsq.api.frozenmap import FrozenMap
from gitopsq.api.quantity import Quantity
from gitopsq.api.reader import FieldPath, Reader
from gitopsq.manifests import names, paths
from gitopsq.manifests.config_model import (
    CONFIG_API_VERSION,
    CONFIG_KIND,
    CONFIG_PATH,
    DEFAULT_TEAM_CLUSTER_KINDS,
    SIGNING_MODES,
    AdmissionSettings,
    AuditTarget,
    ClusterSpec,
    ForgeKey,
    Maintainer,
    RepoConfig,
    Team,
    TrustZone,
)
from gitopsq.manifests.pgpkeys import is_armored_public_key, pgp_fingerprint
from gitopsq.manifests.pods_ready_config import read_pods_ready
from gitopsq.manifests.yamldoc import load_yaml

__all__ = ["CONFIG_PATH", "ConfigResult", "RepoConfig", "parse_config"]

_TOP: Final = ("apiVersion", "kind", "include", "exclude", "policyPaths", "allowKinds", "platformTeam", "teams",
               "capacity", "trustZones", "signing", "audit", "policies", "admission", "teamClusterScopedKinds",
               "forgeKeys", "clusters")
_CLUSTER_KEYS: Final = ("name", "paths", "capacity", "trustZones")
_STRATEGIES: Final = ("LessThanOrEqualToFinalShare", "LessThanInitialShare")
# the Kueue v0.19.2 gates the admission engine models, with Kueue's defaults (gitopsq/admission/topology.py)
FEATURE_GATES: Final = {"FlavorFungibilityPreserveScanProgress": True, "PrioritizePreemptorWorkloads": False}
_SSH_TYPES: Final = ("ssh-ed25519", "ssh-rsa", "ecdsa-sha2-nistp256", "ecdsa-sha2-nistp384", "ecdsa-sha2-nistp521",
                     "sk-ssh-ed25519@openssh.com", "sk-ecdsa-sha2-nistp256@openssh.com")
_GPG: Final = re.compile(r"^[0-9A-Fa-f]{40}$")
_KIND: Final = re.compile(r"^[A-Z][A-Za-z0-9]*$")
_ALLOW_KIND: Final = re.compile(r"^(?:[a-z0-9.-]+/)?v[0-9]+(?:(?:alpha|beta)[0-9]+)?/[A-Z][A-Za-z0-9]*$")


@dataclass(frozen=True, slots=True)
class ConfigResult:
    """The parsed configuration (None when it is unusable: no include paths could be read) and the findings."""

    config: RepoConfig | None
    findings: tuple[Finding, ...]

    @property
    def ok(self) -> bool:
        return self.config is not None and not any(f.is_error for f in self.findings)


def parse_config(data: bytes, path: str = CONFIG_PATH) -> ConfigResult:
    loaded = load_yaml(path, data)
    if loaded.findings and not loaded.documents:
        return ConfigResult(None, loaded.findings)
    if len(loaded.documents) != 1:
        r = Reader(file=path, doc_line=1, obj=CONFIG_KIND)
        r.error((), "config-invalid", f"{path} must hold exactly one YAML document with kind {CONFIG_KIND}, "
                f"found {len(loaded.documents)}")
        return ConfigResult(None, (*loaded.findings, *r.findings))
    doc = loaded.documents[0]
    r = Reader(file=path, doc_line=doc.line, obj=CONFIG_KIND, line_of=doc.line_of)
    config = _Parser(r).parse(doc.data)
    return ConfigResult(config, (*loaded.findings, *r.findings))


class _Parser:
    def __init__(self, r: Reader) -> None:
        self.r = r

    def parse(self, raw: Any) -> RepoConfig | None:
        r = self.r
        top = r.mapping(raw, (), allowed=_TOP)
        for key, expected in (("apiVersion", CONFIG_API_VERSION), ("kind", CONFIG_KIND)):
            r.string(top.get(key), (key,), required=True, choices=(expected,))
        include = self.patterns(top.get("include"), ("include",))
        teams = self.teams(top.get("teams"))
        team_names = {t.name for t in teams}
        clusters = self.clusters(top.get("clusters"), team_names)
        if not include and clusters and "include" not in top:  # the repository is the union of its clusters
            include = tuple(dict.fromkeys(p for c in clusters for p in c.paths))
        if not include:
            if "include" in top:
                r.error(("include",), "invalid-value", "include must list at least one directory or glob")
            else:
                r.error(("include",), "missing-field", "include is required: the directories or globs that hold "
                        "queue definitions (e.g. [platform/, teams/])")
        platform = r.string(top.get("platformTeam"), ("platformTeam",), required=True)
        if platform and platform not in team_names:
            r.error(("platformTeam",), "config-unknown-team", f"platformTeam {platform!r} is not one of the teams "
                    f"({', '.join(sorted(team_names)) or 'none declared'})")
        config = RepoConfig(
            include=include,
            exclude=self.patterns(top.get("exclude"), ("exclude",)),
            policy_paths=self.patterns(top.get("policyPaths"), ("policyPaths",)),
            allow_kinds=self.allow_kinds(top.get("allowKinds")),
            platform_team=platform, teams=teams, capacity=self.capacity(top.get("capacity")),
            trust_zones=self.zones(top.get("trustZones"), team_names),
            signing_mode=self.signing(top.get("signing")), forge_keys=self.forge_keys(top.get("forgeKeys")),
            audit=self.audit(top.get("audit")),
            disabled_policies=self.disabled(top.get("policies")), admission=self.admission(top.get("admission")),
            team_cluster_kinds=self.team_cluster_kinds(top), clusters=clusters, raw=top)
        return config if include else None

    def patterns(self, raw: Any, path: FieldPath) -> tuple[str, ...]:
        out = []
        for i, pattern in enumerate(self.r.string_list(raw, path)):
            problem = paths.pattern_problem(pattern)
            if problem:
                self.r.error((*path, i), "config-invalid-pattern", f"pattern {pattern!r} has {problem}")
            else:
                out.append(pattern)
        return tuple(out)

    def allow_kinds(self, raw: Any) -> tuple[str, ...]:
        out = []
        for i, entry in enumerate(self.r.string_list(raw, ("allowKinds",))):
            if not _ALLOW_KIND.match(entry):
                self.r.error(("allowKinds", i), "invalid-value", f"allowKinds entry {entry!r} must be "
                             "\"group/version/Kind\" (\"v1/ConfigMap\" for the core group)")
            else:
                out.append(entry)
        return tuple(out)

    def team_cluster_kinds(self, top: Mapping[str, Any]) -> tuple[str, ...]:
        """``teamClusterScopedKinds``: the cluster-scoped kinds teams may define under their own paths."""
        if "teamClusterScopedKinds" not in top:
            return DEFAULT_TEAM_CLUSTER_KINDS
        out = []
        for i, kind in enumerate(self.r.string_list(top.get("teamClusterScopedKinds"), ("teamClusterScopedKinds",))):
            if not _KIND.match(kind):
                self.r.error(("teamClusterScopedKinds", i), "invalid-value",
                             f"teamClusterScopedKinds entry {kind!r} must be a kind such as ClusterQueue")
            else:
                out.append(kind)
        return tuple(out)

    def label(self, value: str, path: FieldPath, what: str) -> bool:
        problem = names.dns_label(value)
        if problem:
            self.r.error(path, "config-invalid-name", f"{what} {value!r} {problem}")
        return problem is None

    def teams(self, raw: Any) -> tuple[Team, ...]:
        r = self.r
        teams: list[Team] = []
        seen: dict[str, str] = {}  # name / namespace / pattern -> owning team
        for i, item in enumerate(r.sequence(raw, ("teams",))):
            p: FieldPath = ("teams", i)
            body = r.mapping(item, p, allowed=("name", "paths", "namespaces", "cohorts", "maintainers"))
            name = r.string(body.get("name"), (*p, "name"), required=True)
            if name and self.label(name, (*p, "name"), "team name") and f"team:{name}" in seen:
                r.error((*p, "name"), "config-duplicate", f"team {name!r} is declared twice")
            seen.setdefault(f"team:{name}", name)
            team_paths = self.patterns(body.get("paths"), (*p, "paths"))
            for j, pattern in enumerate(team_paths):
                owner = seen.setdefault(f"path:{paths.normalise(pattern)}", name)
                if owner != name:
                    r.error((*p, "paths", j), "config-conflict",
                            f"path pattern {pattern!r} is already owned by team {owner!r}")
            namespaces = r.string_list(body.get("namespaces"), (*p, "namespaces"))
            for j, ns in enumerate(namespaces):
                if self.label(ns, (*p, "namespaces", j), "namespace"):
                    owner = seen.setdefault(f"ns:{ns}", name)
                    if owner != name:
                        r.error((*p, "namespaces", j), "config-conflict",
                                f"namespace {ns!r} already belongs to team {owner!r}")
            cohorts = r.string_list(body.get("cohorts"), (*p, "cohorts"))
            for j, cohort in enumerate(cohorts):
                self.label(cohort, (*p, "cohorts", j), "cohort name")
            teams.append(Team(name=name, paths=team_paths, namespaces=namespaces, cohorts=cohorts,
                              maintainers=self.maintainers(body.get("maintainers"), (*p, "maintainers"))))
        return tuple(teams)

    def maintainers(self, raw: Any, path: FieldPath) -> tuple[Maintainer, ...]:
        r = self.r
        out = []
        for i, item in enumerate(r.sequence(raw, path)):
            p = (*path, i)
            body = r.mapping(item, p, allowed=("name", "email", "signingKeys", "forgeUser"))
            email = r.string(body.get("email"), (*p, "email"))
            if email and not re.match(r"^[^@\s]+@[^@\s]+$", email):
                r.error((*p, "email"), "invalid-value", f"email {email!r} is not an e-mail address")
            keys = r.string_list(body.get("signingKeys"), (*p, "signingKeys"))
            for j, key in enumerate(keys):
                problem = signing_key_problem(key)
                if problem:
                    r.error((*p, "signingKeys", j), "config-invalid-key", problem)
            out.append(Maintainer(name=r.string(body.get("name"), (*p, "name"), required=True), email=email,
                                  signing_keys=keys, forge_user=r.string(body.get("forgeUser"), (*p, "forgeUser"))))
        return tuple(out)

    def forge_keys(self, raw: Any) -> tuple[ForgeKey, ...]:
        r = self.r
        out = []
        for i, item in enumerate(r.sequence(raw, ("forgeKeys",))):
            p: FieldPath = ("forgeKeys", i)
            body = r.mapping(item, p, allowed=("name", "keys"))
            keys = r.string_list(body.get("keys"), (*p, "keys"))
            if not keys:
                r.error((*p, "keys"), "config-invalid-key", "a forge key entry lists no keys")
            for j, key in enumerate(keys):
                problem = signing_key_problem(key)
                if problem:
                    r.error((*p, "keys", j), "config-invalid-key", problem)
            out.append(ForgeKey(name=r.string(body.get("name"), (*p, "name"), required=True), keys=keys))
        return tuple(out)

    def clusters(self, raw: Any, team_names: set[str]) -> tuple[ClusterSpec, ...]:
        """``clusters:`` (docs/fleet.md): unique DNS-label names, non-empty valid paths, own capacity and zones."""
        r = self.r
        out: list[ClusterSpec] = []
        seen: set[str] = set()
        for i, item in enumerate(r.sequence(raw, ("clusters",))):
            p: FieldPath = ("clusters", i)
            body = r.mapping(item, p, allowed=_CLUSTER_KEYS)
            name = r.string(body.get("name"), (*p, "name"), required=True)
            if name and self.label(name, (*p, "name"), "cluster name"):
                if name in seen:
                    r.error((*p, "name"), "config-duplicate", f"cluster {name!r} is declared twice")
                seen.add(name)
            cluster_paths = self.patterns(body.get("paths"), (*p, "paths"))
            if not cluster_paths and "paths" not in body:
                r.error(p, "missing-field", f"cluster {name!r} needs paths: the directories or globs that make up "
                        "its revision (e.g. [queues/base/, queues/clusters/NAME/])")
            elif not body.get("paths"):
                r.error((*p, "paths"), "invalid-value", f"cluster {name!r} must list at least one path")
            out.append(ClusterSpec(
                name=name, paths=cluster_paths,
                capacity=self.capacity(body["capacity"], (*p, "capacity")) if "capacity" in body else None,
                trust_zones=self.zones(body["trustZones"], team_names, (*p, "trustZones"))
                if "trustZones" in body else None, line=getattr(r.location(p), "line", None)))
        return tuple(out)

    def capacity(self, raw: Any, at: FieldPath = ("capacity",)) -> FrozenMap[str, FrozenMap[str, Quantity]]:
        r = self.r
        out: dict[str, FrozenMap[str, Quantity]] = {}
        top = r.mapping(raw, at, allowed=raw.keys() if isinstance(raw, Mapping) else ())
        for flavor, resources in top.items():
            p: FieldPath = (*at, flavor)
            problem = names.dns_subdomain(str(flavor))
            if problem:
                r.error(p, "config-invalid-name", f"capacity key {flavor!r} is a ResourceFlavor name and {problem}")
            body = r.mapping(resources, p, allowed=resources.keys() if isinstance(resources, Mapping) else ())
            amounts = {}
            for resource, value in body.items():
                q = r.quantity(value, (*p, resource), required=True)
                if q is not None and q.milli < 0:
                    r.error((*p, resource), "invalid-quantity", f"capacity of {resource} on {flavor} must not be "
                            f"negative, got {value!r}")
                elif q is not None:
                    amounts[str(resource)] = q
            out[str(flavor)] = FrozenMap(amounts)
        return FrozenMap(out)

    def zones(self, raw: Any, team_names: set[str], at: FieldPath = ("trustZones",)) -> tuple[TrustZone, ...]:
        r = self.r
        out = []
        zone_of: dict[str, str] = {}
        for i, item in enumerate(r.sequence(raw, at)):
            p: FieldPath = (*at, i)
            body = r.mapping(item, p, allowed=("name", "teams", "cohorts"))
            name = r.string(body.get("name"), (*p, "name"), required=True)
            if name:
                self.label(name, (*p, "name"), "trust zone name")
            members = r.string_list(body.get("teams"), (*p, "teams"))
            for j, team in enumerate(members):
                if team not in team_names:
                    r.error((*p, "teams", j), "config-unknown-team", f"trust zone {name!r} names team {team!r}, "
                            "which is not declared under teams")
            cohorts = r.string_list(body.get("cohorts"), (*p, "cohorts"))
            for j, cohort in enumerate(cohorts):
                if self.label(cohort, (*p, "cohorts", j), "cohort name"):
                    other = zone_of.setdefault(cohort, name)
                    if other != name:
                        r.error((*p, "cohorts", j), "config-conflict",
                                f"cohort {cohort!r} is already in trust zone {other!r}")
            out.append(TrustZone(name=name, teams=members, cohorts=cohorts))
        return tuple(out)

    def signing(self, raw: Any) -> str:
        body = self.r.mapping(raw, ("signing",), allowed=("mode",))
        return self.r.string(body.get("mode"), ("signing", "mode"), default="off", choices=SIGNING_MODES)

    def audit(self, raw: Any) -> AuditTarget:
        r = self.r
        body = r.mapping(raw, ("audit",), allowed=("repository", "branch", "batchSeconds", "batchRecords"))
        branch = r.string(body.get("branch"), ("audit", "branch"), default="gitopsq/audit")
        if not branch or branch.startswith(("/", "-")) or ".." in branch or " " in branch:
            r.error(("audit", "branch"), "invalid-value", f"audit.branch {branch!r} is not a valid branch name")
        return AuditTarget(repository=r.string(body.get("repository"), ("audit", "repository")), branch=branch,
                           batch_seconds=r.integer(body.get("batchSeconds"), ("audit", "batchSeconds"), default=5,
                                                   minimum=1) or 5,
                           batch_records=r.integer(body.get("batchRecords"), ("audit", "batchRecords"),
                                                   default=500, minimum=1) or 500)

    def disabled(self, raw: Any) -> tuple[str, ...]:
        body = self.r.mapping(raw, ("policies",), allowed=("disabled",))
        return self.r.string_list(body.get("disabled"), ("policies", "disabled"))

    def admission(self, raw: Any) -> AdmissionSettings:
        r = self.r
        if raw is None:
            return AdmissionSettings()
        body = r.mapping(raw, ("admission",), allowed=("fairSharing", "inadmissibleRequeue", "waitForPodsReady",
                                                     "featureGates"))
        gates = r.mapping(body.get("featureGates") or {}, ("admission", "featureGates"), allowed=tuple(FEATURE_GATES))
        feature_gates = tuple((str(name), r.boolean(value, ("admission", "featureGates", name),
                                                    default=FEATURE_GATES[str(name)]))
                              for name, value in sorted(gates.items()) if str(name) in FEATURE_GATES)
        requeue = r.string(body.get("inadmissibleRequeue"), ("admission", "inadmissibleRequeue"), default="Batched",
                           choices=("Batched", "Immediate"))
        pods_ready = read_pods_ready(r, body.get("waitForPodsReady"), ("admission", "waitForPodsReady"))
        if body.get("fairSharing") is None:
            return AdmissionSettings(inadmissible_requeue=requeue, declared=True, wait_for_pods_ready=pods_ready,
                                     feature_gates=feature_gates)
        p: FieldPath = ("admission", "fairSharing")
        fs = r.mapping(body["fairSharing"], p, allowed=("enable", "preemptionStrategies", "lookAhead"))
        strategies = r.string_list(fs.get("preemptionStrategies"), (*p, "preemptionStrategies"))
        for i, strategy in enumerate(strategies):
            if strategy not in _STRATEGIES:
                r.error((*p, "preemptionStrategies", i), "invalid-value",
                        f"unknown preemption strategy {strategy!r} (use {' or '.join(_STRATEGIES)})")
        return AdmissionSettings(fair_sharing=r.boolean(fs.get("enable"), (*p, "enable"), default=True),
                                 preemption_strategies=strategies or _STRATEGIES,
                                 fair_sharing_look_ahead=r.boolean(fs.get("lookAhead"), (*p, "lookAhead"),
                                                                   default=False),
                                 inadmissible_requeue=requeue, declared=True, wait_for_pods_ready=pods_ready,
                                 feature_gates=feature_gates)


def signing_key_problem(key: str) -> str | None:
    """Why ``key`` is neither an SSH public key in authorized_keys form, an ASCII-armored OpenPGP public key
    block nor a 40-hex GPG fingerprint, or None."""
    text = key.strip()
    if _GPG.match(text.replace(" ", "")):
        return None
    if is_armored_public_key(text):
        return None if pgp_fingerprint(text) else \
            "the OpenPGP public key block does not hold a readable v4 primary key (damaged or truncated copy?)"
    parts = text.split()
    if len(parts) < 2 or parts[0] not in _SSH_TYPES:
        return (f"signing key {text[:40]!r}… is neither an SSH public key (\"ssh-ed25519 AAAA… comment\"), an "
                "armored OpenPGP public key (gpg --armor --export) nor a 40-hex GPG fingerprint")
    try:
        blob = base64.b64decode(parts[1], validate=True)
        (length,) = struct.unpack(">I", blob[:4])
        declared = blob[4 : 4 + length].decode("ascii")
    except (binascii.Error, ValueError, struct.error, UnicodeDecodeError):
        return f"signing key of type {parts[0]} has a body that is not valid base64 key data"
    if declared != parts[0]:
        return f"signing key says {parts[0]} but its body holds a {declared or 'malformed'} key"
    if parts[0] == "ssh-ed25519" and len(blob) != 51:
        return "ssh-ed25519 key body has the wrong length (a truncated copy?)"
    return None
