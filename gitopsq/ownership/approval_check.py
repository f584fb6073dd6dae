"""Whether an applied change carries the approvals its ownership requires (pure: the sync path's counterpart of
the approvers `gitopsq plan` lists).

The teams required are exactly those of `required_approvals` (gitopsq.ownership.approvers) for the files the change
touches and the global objects it changes, with ownership from the trusted ``gitopsq.yaml``. A team's approval
is *present* when the history of the change carries an approval that satisfies all three rules:

1. **evidence Git carries**: the author of a merge commit (who pressed "merge"), or a ``Reviewed-by:`` /
   ``Approved-by:`` trailer naming ``Name <email>`` — the approvals gitopsq.audit.git_approvals reads;
2. **by a maintainer of that team**: the approver's email equals, ignoring case, the email of one of the team's
   maintainers in the trusted ``gitopsq.yaml`` (a name alone never matches);
3. **not by an author of the change**: nobody approves their own work (segregation of duties), so the authors of
   the change's non-merge commits do not count, even when they are maintainers.

A team listing no maintainer with an email can never approve: its requirement is reported and stays missing. The
placeholder ``(no owner)`` (no ``platformTeam`` and no team owning the path) names nobody, so it requires nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from gitopsq.api import findings
from gitopsq.api.findings import Finding
from gitopsq.errors import Location
from gitopsq.manifests.config_model import CONFIG_PATH, RepoConfig
from gitopsq.manifests.yamldoc import load_yaml
from gitopsq.ownership.approvers import GLOBAL_KINDS, UNOWNED, required_approvals


class GivenApproval(Protocol):
    """One approval the history carries (gitopsq.audit.records.Approval has this shape)."""

    @property
    def email(self) -> str: ...


@dataclass(frozen=True, slots=True)
class TeamApproval:
    """One team whose approval the change needs, why, and the approvals that satisfy it (empty: missing)."""

    team: str
    maintainers: tuple[str, ...]
    reasons: tuple[str, ...]
    approved_by: tuple[Any, ...]
    platform: bool = False

    @property
    def present(self) -> bool:
        return bool(self.approved_by)


def check_approvals(config: RepoConfig | None, touched_paths: Iterable[str], global_objects: Iterable[str],
                    approvals: Iterable[GivenApproval], authors: Iterable[str]) -> tuple[TeamApproval, ...]:
    """Each required team (order of `required_approvals`) with the ``approvals`` that count for it under the rules
    of the module docstring; ``authors`` are the emails of the change's authors."""
    excluded = {a.lower() for a in authors}
    given = [a for a in approvals if a.email.lower() not in excluded]
    out = []
    for need in required_approvals(config, touched_paths, global_objects):
        if need.team == UNOWNED:
            continue
        team = config.team(need.team) if config is not None else None
        emails = {m.email.lower() for m in team.maintainers if m.email} if team is not None else set()
        out.append(TeamApproval(need.team, need.maintainers, need.reasons,
                                tuple(a for a in given if a.email.lower() in emails), need.platform))
    return tuple(out)


def impossible_approvals(config: RepoConfig | None, touched_paths: Iterable[str], global_objects: Iterable[str],
                         authors: Iterable[str]) -> list[Finding]:
    """A warning for each required team whose approval can never be given under rule 3: every maintainer of the
    team with an e-mail is an author of the change (a sole maintainer changing the team's own queues), or the
    team lists no maintainer with an e-mail at all."""
    excluded = {a.lower() for a in authors}
    out = []
    for need in required_approvals(config, touched_paths, global_objects):
        team = config.team(need.team) if config is not None and need.team != UNOWNED else None
        if team is None:
            continue
        emails = [m.email for m in team.maintainers if m.email]
        if emails and any(e.lower() not in excluded for e in emails):
            continue
        why = (f"its only maintainer(s) with an e-mail ({', '.join(emails)}) authored this change and nobody "
               "approves their own change" if emails else "it lists no maintainer with an e-mail")
        out.append(findings.warning(
            "approval-impossible", f"team {need.team} must approve this change ({need.reasons[0]}), but {why}: "
            f"the approval can never be given, so the audit will list the change as applied without it (add "
            f"another maintainer to team {need.team} in {CONFIG_PATH}, or let another maintainer author it)",
            location=Location(CONFIG_PATH, None)))
    return out


def changed_global_objects(path: str, old: bytes | None, new: bytes | None) -> tuple[str, ...]:
    """``Kind/name`` of the global objects (GLOBAL_KINDS) that one file adds, removes or changes between two
    versions of its bytes (None: the file does not exist on that side). Unparseable YAML yields nothing."""
    before, after = _globals(path, old), _globals(path, new)
    return tuple(sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k)))


def _globals(path: str, data: bytes | None) -> Mapping[str, Any]:
    if data is None:
        return {}
    out: dict[str, Any] = {}
    for doc in load_yaml(path, data).documents:
        body = doc.data if isinstance(doc.data, dict) else {}
        kind, metadata = body.get("kind"), body.get("metadata")
        name = metadata.get("name") if isinstance(metadata, dict) else None
        if kind in GLOBAL_KINDS and isinstance(name, str):
            out[f"{kind}/{name}"] = body
    return out
