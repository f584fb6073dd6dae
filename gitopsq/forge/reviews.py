"""Approvals given in the forge for the merges a sync applies (docs/audit.md "Required approvals").

A squash merge carries no approval Git can show: the reviews live in the forge. For the change ``base`` →
``revision`` this walks the first-parent chain of ``revision`` back to ``base`` (each step is one merge or
squash commit the branch received), asks the forge which pull request each commit merged, and returns that pull
request's standing approvals as `MergedReview` rows; gitopsq.sync.audit_sink turns them into record approvals. A
reviewer counts under the same rules as every other approval (gitopsq.ownership.approval_check): the e-mail must be
a maintainer's — the one the forge shows (Gitea) or, where the forge hides it (GitHub, GitLab), that of the
maintainer whose ``forgeUser`` in the trusted gitopsq.yaml is the reviewer's login; a reviewer neither resolves
is recorded with an empty e-mail and never satisfies a requirement. `approvals_reader` serves validation
(gitopsq.policy.forge_merge) the same facts as plain data.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from gitopsq.api.raw_objects import JsonValue
from gitopsq.forge.port import Approval, Forge
from gitopsq.manifests.config_model import RepoConfig
from gitopsq.source.port import Source

MAX_MERGES = 50  # first-parent steps asked about per change: one forge call each (a catch-up sync may span many)


@dataclass(frozen=True, slots=True)
class MergedReview:
    """One standing approval of the pull request that ``merge`` (a merge or squash commit) brought in."""

    merge: str
    pull_request: int
    approval: Approval


def first_parent_chain(source: Source, base: str | None, revision: str, limit: int = MAX_MERGES) -> list[str]:
    """``revision`` and its first parents down to (not including) ``base``, newest first, at most ``limit``."""
    out: list[str] = []
    sha: str | None = revision
    while sha is not None and sha != base and len(out) < limit:
        out.append(sha)
        parents = source.commit_info(sha).parents
        sha = parents[0] if parents else None
    return out


def merged_reviews(forge: Forge, source: Source, base: str | None, revision: str) -> list[MergedReview]:
    """The forge's standing approvals of the pull requests merged by ``base..revision`` (first parents), each
    with the commit that merged it and the PR number. Raises what the forge client raises (ForgeError)."""
    out: list[MergedReview] = []
    for sha in first_parent_chain(source, base, revision):
        pr = forge.pull_request_of(sha)
        if pr is not None:
            out.extend(MergedReview(sha, pr, given) for given in forge.approvals(pr))
    return out


def approvals_reader(forge: Forge) -> Callable[[str], list[dict[str, JsonValue]]]:
    """For validation (gitopsq.trust.commits_for_policy): sha of a forge-signed commit → the standing approvals
    of the pull request it merged, as policies read them (gitopsq.policy.forge_merge); [] when it merged none.
    Raises ForgeError: a sync that cannot ask the forge fails and retries instead of judging without them."""

    def read(sha: str) -> list[dict[str, JsonValue]]:
        pr = forge.pull_request_of(sha)
        if pr is None:
            return []
        return [{"email": a.email or "", "login": a.reviewer, "forge": a.forge, "at": a.at, "pullRequest": pr,
                 "approvedCommit": a.commit, "via": a.via} for a in forge.approvals(pr)]

    return read


def maintainer_logins(config: RepoConfig | None) -> dict[str, tuple[str, str]]:
    """``forgeUser`` (lower case) → (name, email) for every maintainer of ``config`` that names one."""
    out: dict[str, tuple[str, str]] = {}
    for team in getattr(config, "teams", ()) or ():
        for person in team.maintainers:
            login = getattr(person, "forge_user", "") or ""
            if login and person.email:
                out.setdefault(login.lower(), (person.name, person.email))
    return out


def approvals_at_head(forge: Forge, pr: int, head: str) -> tuple[list[dict[str, JsonValue]], list[Approval]]:
    """A pull request under review (`gitopsq check`/`plan` with forge options): its standing approvals given at
    ``head`` as policies read them (``reviewApprovals``), and the approvals that do not count there — given on an
    older head (a push after the review), or on a commit the forge does not name (GitLab): fail closed."""
    counted: list[dict[str, JsonValue]] = []
    stale: list[Approval] = []
    for given in forge.approvals(pr):
        if given.commit != head:
            stale.append(given)
            continue
        counted.append({"email": given.email or "", "login": given.reviewer, "forge": forge.name, "at": given.at,
                        "pullRequest": pr, "approvedCommit": given.commit})
    return counted, stale
