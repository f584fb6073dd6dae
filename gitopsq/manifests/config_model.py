"""gitopsq.yaml as frozen data (docs/config.md), with path ownership, include matching and the policy view."""

from __future__ import annotations

import base64
import binascii
import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Final

from gitopsq.api.frozenmap import FrozenMap
from gitopsq.api.quantity import Quantity
from gitopsq.manifests import paths
from gitopsq.manifests.pgpkeys import is_armored_public_key, pgp_fingerprint

CONFIG_PATH: Final = "gitopsq.yaml"
CONFIG_API_VERSION: Final = "gitopsq.dev/v1alpha1"
CONFIG_KIND: Final = "RepositoryConfig"
SIGNING_MODES: Final = ("required", "optional", "off")
# Files that change how Git renders the work tree for everyone (attributes, submodules): the platform's wherever
# they are, so no team can break `render --worktree` for the whole repository (docs/config.md rule 6).
RENDERING_FILES: Final = (".gitattributes", ".gitmodules")
# Cluster-scoped kinds a team may define under its own paths unless gitopsq.yaml lists others
# (``teamClusterScopedKinds``); any other cluster-scoped object there is the platform's (docs/config.md).
DEFAULT_TEAM_CLUSTER_KINDS: Final = ("ClusterQueue", "Namespace")


def platform_file(path: str, policy_paths: tuple[str, ...] | list[str]) -> bool:
    """Whether ``path`` belongs to the platform team whatever the team patterns say: gitopsq.yaml, a
    `RENDERING_FILES` file anywhere, and every file under ``policyPaths`` (the rules that judge changes)."""
    return (path == CONFIG_PATH or path.rsplit("/", 1)[-1] in RENDERING_FILES
            or any(paths.matches(path, p) for p in policy_paths))


@dataclass(frozen=True, slots=True, kw_only=True)
class Maintainer:
    name: str
    email: str = ""
    signing_keys: tuple[str, ...] = ()
    forge_user: str = ""  # the maintainer's login on the forge: how its reviews are attributed (docs/config.md)


@dataclass(frozen=True, slots=True, kw_only=True)
class ForgeKey:
    """A forge's own signing keys (``forgeKeys:``): they sign the forge's merge and squash commits, never a
    person's work, so a signature by one binds the commit to ``forge:<name>`` and to no maintainer."""

    name: str
    keys: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class Team:
    name: str
    paths: tuple[str, ...] = ()
    namespaces: tuple[str, ...] = ()
    cohorts: tuple[str, ...] = ()
    maintainers: tuple[Maintainer, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class TrustZone:
    name: str
    teams: tuple[str, ...] = ()
    cohorts: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class AuditTarget:
    repository: str = ""
    branch: str = "gitopsq/audit"
    batch_seconds: int = 5
    batch_records: int = 500


@dataclass(frozen=True, slots=True, kw_only=True)
class PodsReadySettings:
    """``admission.waitForPodsReady`` (Kueue's block; gitopsq/manifests/pods_ready_config.py reads it)."""

    enable: bool = False
    timeout: float = 1800.0  # seconds
    recovery_timeout: float | None = None  # None: the timeout
    block_admission: bool = False
    timestamp: str = "Eviction"
    backoff_limit_count: int | None = None
    backoff_base_seconds: int = 60
    backoff_max_seconds: int = 3600


@dataclass(frozen=True, slots=True, kw_only=True)
class AdmissionSettings:
    """The ``admission`` block: present ``fairSharing`` enables fair sharing (``enable: false`` switches it off)."""

    fair_sharing: bool = False
    preemption_strategies: tuple[str, ...] = ()
    fair_sharing_look_ahead: bool = False  # gitopsq's opt-in departure from Kueue (docs/admission.md)
    inadmissible_requeue: str = "Batched"  # Kueue's; "Immediate" is gitopsq's opt-in departure
    declared: bool = False  # whether gitopsq.yaml had an admission block at all
    wait_for_pods_ready: PodsReadySettings = PodsReadySettings()  # the live loop's, not simulate's
    feature_gates: tuple[tuple[str, bool], ...] = ()  # Kueue gates the engine models, as (name, on) pairs


@dataclass(frozen=True, slots=True, kw_only=True)
class ClusterSpec:
    """One entry of ``clusters:`` (docs/fleet.md): the paths that make up its revision, and, when given, its own
    capacity and trust zones (None: the top-level ones)."""

    name: str
    paths: tuple[str, ...] = ()
    capacity: FrozenMap[str, FrozenMap[str, Quantity]] | None = None
    trust_zones: tuple[TrustZone, ...] | None = None
    line: int | None = None  # where gitopsq.yaml declares it, for findings about the cluster as a whole


@dataclass(frozen=True, slots=True, kw_only=True)
class RepoConfig:
    include: tuple[str, ...]
    exclude: tuple[str, ...] = ()
    policy_paths: tuple[str, ...] = ()
    allow_kinds: tuple[str, ...] = ()  # "group/version/Kind" ("v1/ConfigMap" for the core group)
    platform_team: str = ""
    teams: tuple[Team, ...] = ()
    capacity: FrozenMap[str, FrozenMap[str, Quantity]] = field(default_factory=FrozenMap)
    trust_zones: tuple[TrustZone, ...] = ()
    signing_mode: str = "off"
    forge_keys: tuple[ForgeKey, ...] = ()
    audit: AuditTarget = AuditTarget()
    disabled_policies: tuple[str, ...] = ()
    admission: AdmissionSettings = AdmissionSettings()
    team_cluster_kinds: tuple[str, ...] = DEFAULT_TEAM_CLUSTER_KINDS
    clusters: tuple[ClusterSpec, ...] = ()  # empty: one implicit cluster, the whole include set
    cluster: str = ""  # the cluster this view judges ("" for the implicit one or the whole repository)
    raw: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)

    def team(self, name: str) -> Team | None:
        return next((t for t in self.teams if t.name == name), None)

    def cluster_names(self) -> tuple[str, ...]:
        """The declared clusters in file order; empty for a repository without ``clusters:``."""
        return tuple(c.name for c in self.clusters)

    def cluster_spec(self, name: str) -> ClusterSpec | None:
        return next((c for c in self.clusters if c.name == name), None)

    def for_cluster(self, name: str) -> RepoConfig:
        """The configuration as cluster ``name`` sees it: its paths as the include set, its capacity and trust
        zones (the top-level ones where it declares none), ``cluster`` set. Ownership, teams, signing and the rest
        are the repository's. Raises KeyError for a name that is not declared."""
        spec = self.cluster_spec(name)
        if spec is None:
            raise KeyError(name)
        return replace(self, include=spec.paths,
                       capacity=self.capacity if spec.capacity is None else spec.capacity,
                       trust_zones=self.trust_zones if spec.trust_zones is None else spec.trust_zones,
                       cluster=name)

    def views(self) -> tuple[RepoConfig, ...]:
        """One view per cluster to judge: each declared cluster's, or this configuration alone without any."""
        return tuple(self.for_cluster(n) for n in self.cluster_names()) if self.clusters else (self,)

    def selects(self, path: str) -> bool:
        """Whether ``path`` is a queue-definition file: YAML, under an include, not excluded, not a policy."""
        if path == CONFIG_PATH or any(paths.matches(path, p) for p in self.policy_paths):
            return False
        return paths.selected(path, self.include, self.exclude)

    def allows_kind(self, api_version: str, kind: str) -> bool:
        return f"{api_version}/{kind}" in self.allow_kinds

    def owner_of(self, path: str) -> str | None:
        """The team owning ``path``: the most specific matching pattern wins; `platform_file` paths are the
        platform team's (no one's without a platform team)."""
        if platform_file(path, self.policy_paths):
            return self.platform_team or None
        best: tuple[tuple[int, int], str] | None = None
        for team in self.teams:
            for pattern in team.paths:
                if paths.matches(path, pattern):
                    score = paths.specificity(pattern)
                    if best is None or score > best[0]:
                        best = (score, team.name)
        return best[1] if best else None

    def namespace_owner(self, namespace: str) -> str | None:
        return next((t.name for t in self.teams if namespace in t.namespaces), None)

    def as_policy_dict(self) -> dict[str, Any]:
        """The normalised form CEL policies see as ``repo`` (docs/config.md "As policies see it")."""
        teams = [{"name": t.name, "paths": list(t.paths), "namespaces": list(t.namespaces),
                  "cohorts": list(t.cohorts),
                  "maintainers": [{"name": m.name, "email": m.email.lower(), "signingKeys": list(m.signing_keys),
                                   "fingerprints": [key_fingerprint(k) for k in m.signing_keys],
                                   "forgeUser": m.forge_user}
                                  for m in t.maintainers]}
                 for t in self.teams]
        zones = [{"name": z.name, "teams": list(z.teams), "cohorts": list(z.cohorts)} for z in self.trust_zones]
        admission: dict[str, Any] = {}
        if self.admission.declared and self.admission.fair_sharing:
            admission["fairSharing"] = {"enable": True,
                                        "preemptionStrategies": list(self.admission.preemption_strategies),
                                        "lookAhead": self.admission.fair_sharing_look_ahead}
        if self.admission.declared:
            admission["inadmissibleRequeue"] = self.admission.inadmissible_requeue
        return {
            "apiVersion": CONFIG_API_VERSION,
            "kind": CONFIG_KIND,
            "include": list(self.include),
            "exclude": list(self.exclude),
            "policyPaths": list(self.policy_paths),
            "allowKinds": list(self.allow_kinds),
            "teamClusterScopedKinds": list(self.team_cluster_kinds),
            "platformTeam": self.platform_team,
            "teams": teams,
            "teamsByName": {t["name"]: t for t in teams},
            "capacity": {flavor: {res: str(q) for res, q in resources.items()}
                         for flavor, resources in self.capacity.items()},
            "trustZones": zones,
            "trustZonesByName": {z["name"]: z for z in zones},
            "signing": {"mode": self.signing_mode},
            "forgeKeys": [{"name": f.name, "fingerprints": [key_fingerprint(k) for k in f.keys]}
                          for f in self.forge_keys],
            "audit": {"repository": self.audit.repository, "branch": self.audit.branch,
                      "batchSeconds": self.audit.batch_seconds, "batchRecords": self.audit.batch_records},
            "policies": {"disabled": list(self.disabled_policies)},
            "admission": admission,
            "namespaceOwner": {ns: t.name for t in self.teams for ns in t.namespaces},
            "cohortZone": {c: z.name for z in self.trust_zones for c in z.cohorts},
            "cluster": self.cluster,
            "clusters": [{"name": c.name, "paths": list(c.paths)} for c in self.clusters],
        }


def key_fingerprint(key: str) -> str:
    """``SHA256:…`` for an SSH public key (as ``ssh-keygen -l`` prints it); upper-case hex for a GPG fingerprint."""
    text = key.strip()
    parts = text.split()
    if len(parts) == 1 and all(c in "0123456789abcdefABCDEF" for c in text):
        return text.upper()
    if is_armored_public_key(text):
        return pgp_fingerprint(text) or text
    if len(parts) >= 2:
        try:
            blob = base64.b64decode(parts[1], validate=True)
        except (binascii.Error, ValueError):
            return text
        return "SHA256:" + base64.b64encode(hashlib.sha256(blob).digest()).decode().rstrip("=")
    return text
