"""The one validation path: a revision read through a `Source`, checked, then judged by the CEL policies.

`gitopsq check`, `gitopsq plan`, `gitopsq render`, the sync loop and the demo all call `validate_revision` (or its
parts), so a revision that one of them accepts the others accept too. The pure work happens in
`gitopsq.manifests.check_revision` (files → objects and findings) and `gitopsq.policy.revision.head_verdicts`
(changes → verdicts); this module does the reading around them: which commit is the base, which paths the change
touched, the head commit with its signature verified against the maintainers' keys, and the repository's own
policy files.
"""

from __future__ import annotations

from collections.abc import MutableMapping, Sequence
from dataclasses import dataclass
from typing import Any

from gitopsq.api import findings
from gitopsq.api.findings import Finding
from gitopsq.errors import SourceError
from gitopsq.manifests import check_revision
from gitopsq.manifests.config_model import RepoConfig
from gitopsq.manifests.report import Report
from gitopsq.policy import Verdict
from gitopsq.policy.revision import PolicyOutcome, head_verdicts


@dataclass(frozen=True, slots=True)
class Validation:
    """A checked and judged revision. ``report`` carries the policy findings too."""

    report: Report
    base: str | None
    base_report: Report | None
    policies: PolicyOutcome
    touched: tuple[str, ...]

    @property
    def ok(self) -> bool:
        return self.report.ok


def first_parent(source: Any, commit: str) -> str | None:
    """The commit's first parent, or None for a root commit or a source without history (a plain directory)."""
    try:
        parents = source.commit_info(commit).parents
    except (SourceError, ValueError, KeyError, AttributeError):
        return None
    return parents[0] if parents else None


def touched_paths(source: Any, base: str | None, head: str) -> tuple[str, ...]:
    """Every path the change from ``base`` to ``head`` adds, modifies, deletes or renames (both names)."""
    try:
        changes = source.changed_paths(base, head)
    except (SourceError, ValueError, KeyError, AttributeError):
        return ()
    return tuple(sorted({p for c in changes for p in (c.path, c.old_path) if p}))


def commit_for_policy(source: Any, commit: str, trust: RepoConfig | None, touched: Sequence[str]) -> dict[str, Any]:
    """The commit as policies see it (`commit`), its signature verified against the maintainers' keys of the
    trusted configuration (the base's: a revision cannot add its own key and vouch for itself)."""
    from gitopsq.source.signatures import verify_signature

    info = source.commit_info(commit)
    keys: dict[str, list[str]] = {}
    for team in trust.teams if trust is not None else ():
        for person in team.maintainers:
            if person.signing_keys:
                keys.setdefault(person.email or person.name, []).extend(person.signing_keys)
    status = verify_signature(info, keys)
    return {"sha": info.sha, "message": info.message, "changedPaths": list(touched),
            "author": {"name": info.author.name, "email": info.author.email},
            "committer": {"name": info.committer.name, "email": info.committer.email},
            "signature": {"state": status.state, "kind": status.kind or "", "signer": status.signer or "",
                          "fingerprint": status.fingerprint or "", "reason": status.reason}}


def policy_files(source: Any, commit: str, report: Report) -> dict[str, str]:
    """The repository's own policy files (``policyPaths`` of gitopsq.yaml) at ``commit``."""
    config = report.config
    if config is None or not config.policy_paths:
        return {}
    listed = source.list_files(commit, list(config.policy_paths), [])
    return {e.path: source.read_blob(e.blob_id).decode("utf-8", errors="replace") for e in listed
            if e.path.endswith((".yaml", ".yml"))}


def judge(source: Any, head: str, head_report: Report, *, base: str | None, base_report: Report | None,
          backend: str | None = None) -> tuple[PolicyOutcome, tuple[str, ...]]:
    """Run the policies on the change ``base`` → ``head``; returns the outcome and the touched paths."""
    touched = touched_paths(source, base, head)
    trust = (base_report.config if base_report is not None else None) or head_report.config
    from gitopsq.source import DirectorySource

    commit: dict[str, Any] | None = None  # a plain directory has no commit: identity rules do not apply
    if not isinstance(source, DirectorySource):
        try:
            commit = commit_for_policy(source, head, trust, touched)
        except (SourceError, ValueError, KeyError, AttributeError):
            commit = None
    outcome = head_verdicts(base_report, head_report, policy_files=policy_files(source, head, head_report),
                            commit=commit, touched_paths=touched, backend=backend)
    return outcome, touched


def verdict_finding(verdict: Verdict) -> Finding:
    """A deny or warn verdict as a finding, so every caller prints and counts it like any other."""
    from gitopsq.errors import Location

    location = Location(verdict.path, verdict.line) if verdict.path else None
    make = findings.error if verdict.denies else findings.warning
    return make(f"policy/{verdict.policy}", f"policy {verdict.policy}: {verdict.message}", location=location,
                obj=verdict.obj)


def validate_revision(source: Any, commit: str, *, base: str | bool | None = True,
                      cache: MutableMapping[str, Any] | None = None, backend: str | None = None) -> Validation:
    """Check ``commit`` and judge it against ``base``.

    ``base=True`` (the default) judges the change the commit itself brings (against its first parent; a root
    commit is judged whole); a sha judges everything since that revision (a PR's base, the last applied revision);
    ``None`` judges the revision whole, as a first revision.
    """
    head_report = check_revision(source, commit, cache=cache)
    base_sha = first_parent(source, commit) if base is True else (base or None)
    base_report = None
    if isinstance(base_sha, str) and base_sha != commit:
        try:
            base_report = check_revision(source, base_sha, cache=cache)
        except SourceError:
            base_sha, base_report = None, None
    else:
        base_sha = None
    if not head_report.ok:
        # A revision that does not even load is rejected on its findings; policies would only add noise.
        return Validation(head_report, base_sha, base_report, PolicyOutcome(()), touched_paths(source, base_sha,
                                                                                                commit))
    outcome, touched = judge(source, commit, head_report, base=base_sha, base_report=base_report, backend=backend)
    extra = list(outcome.findings) + [verdict_finding(v) for v in outcome.verdicts if not v.allowed]
    return Validation(head_report.with_findings(extra), base_sha, base_report, outcome, touched)
