"""Who must approve a pull request, from the ownership in ``gitopsq.yaml``.

Rules, each adding a team with the reason it is needed:

1. Every file the pull request touches needs the team owning its path (the most specific ``paths`` pattern; for
   a moved file both the old and the new path count). ``gitopsq.yaml`` belongs to the platform team.
2. A file no team owns needs the platform team.
3. A changed *global* object — ResourceFlavor, Cohort, WorkloadPriorityClass, AdmissionCheck, Topology,
   ProvisioningRequestConfig, MultiKueueConfig, MultiKueueCluster, Namespace, PriorityClass: shared by every
   team — needs the platform team, wherever its file lives.

Ownership is read from the base revision's ``gitopsq.yaml`` (the trust model already accepted: a pull request
cannot make itself its own approver); from the head's only when the base has none that parses.

Order: the platform team first, then teams by name; reasons in the order the rules found them.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

from gitopsq.manifests.config_model import CONFIG_PATH, RepoConfig

GLOBAL_KINDS: Final = frozenset({"ResourceFlavor", "Cohort", "WorkloadPriorityClass", "AdmissionCheck", "Topology",
                                 "ProvisioningRequestConfig", "MultiKueueConfig", "MultiKueueCluster", "Namespace",
                                 "PriorityClass"})
UNOWNED: Final = "(no owner)"


@dataclass(frozen=True, slots=True)
class Approval:
    """One team whose approval the change needs, its maintainers (``Name <email>``) and why."""

    team: str
    maintainers: tuple[str, ...]
    reasons: tuple[str, ...]
    platform: bool = False


def required_approvals(config: RepoConfig | None, touched_paths: Iterable[str],
                       global_objects: Iterable[str]) -> tuple[Approval, ...]:
    """Teams that must approve: ``touched_paths`` are changed files, ``global_objects`` changed global objects
    (``Kind/name``) — see the module docstring for the rules."""
    platform = config.platform_team if config is not None and config.platform_team else UNOWNED
    reasons: dict[str, list[str]] = {}

    def need(team: str, why: str) -> None:
        found = reasons.setdefault(team, [])
        if why not in found:
            found.append(why)

    for path in sorted(set(touched_paths)):
        owner = config.owner_of(path) if config is not None else None
        if path == CONFIG_PATH:
            need(platform, f"{path}: the repository's trust model")
        elif owner is None:
            need(platform, f"{path}: no team owns this path")
        else:
            need(owner, f"{path}: owned by {owner}")
    for obj in sorted(set(global_objects)):
        need(platform, f"{obj}: a global object")
    out = []
    for team in sorted(reasons, key=lambda t: (t != platform, t)):
        found = config.team(team) if config is not None else None
        maintainers = tuple(f"{p.name} <{p.email}>" if p.email else p.name for p in found.maintainers) \
            if found is not None else ()
        out.append(Approval(team, maintainers, tuple(reasons[team]), platform=team == platform))
    return tuple(out)
