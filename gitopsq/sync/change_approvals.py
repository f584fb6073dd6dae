"""The approvals an applied revision needed and whether it had them: the reading around the pure rules of
gitopsq.ownership.approval_check (docs/audit.md "Required approvals").

The change is the one from the previously applied revision to the applied one; on a first sync (no previous
revision) it is what the head commit brings against its first parent, as the sync's validation judges it. Read
from Git for that change: the touched files, the global objects they add, change or remove, the commits (their
approvals and their authors), and the ownership of the trusted ``gitopsq.yaml`` — the previous revision's, the
applied one's only when the previous has none (a change cannot name its own approvers). A previous revision whose
``gitopsq.yaml`` exists but cannot be read or parsed fails closed: the change is reported as needing the platform's
approval, missing, with the reason (gitopsq.trust.read_base_config), never judged by the applied revision's file.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from gitopsq.audit.git_approvals import approvals_from_commits
from gitopsq.audit.records import Approval
from gitopsq.manifests.config_model import RepoConfig
from gitopsq.ownership.approval_check import TeamApproval, changed_global_objects, check_approvals
from gitopsq.source.port import HistorySource
from gitopsq.sync.repo_config import repo_config
from gitopsq.trust import read_base_config
from gitopsq.validation import first_parent

YAML_SUFFIXES = (".yaml", ".yml")
ForgeApprovals = Callable[[str | None, str, RepoConfig | None], Sequence[Approval]]


@dataclass(frozen=True, slots=True)
class ChangeApprovals:
    """What the history of one change carries (``approvals``) and what its ownership asks for (``required``)."""

    base: str | None
    approvals: tuple[Approval, ...]
    required: tuple[TeamApproval, ...]

    def required_json(self) -> list[dict[str, object]]:
        return [{"team": t.team, "platform": t.platform, "maintainers": list(t.maintainers),
                 "reasons": list(t.reasons), "approvedBy": [a.to_json() for a in t.approved_by],
                 "present": t.present} for t in self.required]


def change_approvals(source: HistorySource, revision: str, previous: str | None,
                     given_elsewhere: ForgeApprovals | None = None) -> ChangeApprovals:
    """Approvals given and required for the change ``previous`` → ``revision`` (see the module docstring).
    ``given_elsewhere(base, revision, trusted config)`` adds approvals Git does not carry (the forge's reviews,
    gitopsq.forge.reviews). Raises what the source raises (SourceError, or AttributeError for a source
    without history) and what ``given_elsewhere`` raises."""
    if previous == revision:  # a re-apply of the same revision (drift, retry) changes nothing in Git
        return ChangeApprovals(previous, (), ())
    base = previous if previous is not None else first_parent(source, revision)
    commits = source.commits_between(base, revision)
    approvals = tuple(approvals_from_commits(commits))
    authors = {c.author.email for c in commits if not c.is_merge}
    changes = source.changed_paths(base, revision)
    touched = sorted({p for c in changes for p in (c.path, c.old_path) if p})
    head_config = repo_config(source, revision)
    base_trust = read_base_config(source, base)
    if base_trust.problem is not None:
        return ChangeApprovals(base, approvals, (_untrusted_base(base_trust.problem.message),))
    trust = base_trust.config or head_config
    if given_elsewhere is not None:
        approvals += tuple(given_elsewhere(base, revision, trust))
    global_objects: set[str] = set()
    for change in changes:
        paths = [p for p in (change.path, change.old_path) if p]
        if not any(p.endswith(YAML_SUFFIXES) and (head_config is None or head_config.selects(p)) for p in paths):
            continue
        old = source.read_blob(change.old_blob_id) if change.old_blob_id else None
        new = source.read_blob(change.new_blob_id) if change.new_blob_id else None
        global_objects.update(changed_global_objects(change.path, old, new))
    return ChangeApprovals(base, approvals, check_approvals(trust, touched, global_objects, approvals, authors))


UNTRUSTED_BASE_TEAM = "(untrusted base)"


def _untrusted_base(reason: str) -> TeamApproval:
    """The one requirement of a change whose trusted gitopsq.yaml cannot be read: nobody's approval can count."""
    return TeamApproval(UNTRUSTED_BASE_TEAM, (), (reason,), (), platform=True)
