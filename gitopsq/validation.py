"""The one validation path: a revision read through a `Source`, checked, then judged by the CEL policies.

`gitopsq check`, `gitopsq plan`, `gitopsq render`, the sync loop and the demo all call `validate_revision` (or its
parts), so a revision that one of them accepts the others accept too. The pure work happens in
`gitopsq.manifests.check_revision` (files → objects and findings) and `gitopsq.policy.revision.head_verdicts`
(changes → verdicts); this module does the reading around them: which commit is the base, which paths the change
touched, the head commit with its signature verified against the maintainers' keys, and the repository's own
policy files.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterator, Mapping, MutableMapping, Sequence
from dataclasses import dataclass
from typing import Any

from gitopsq.api import findings
from gitopsq.api.findings import Finding
from gitopsq.errors import Location, PolicyError, SourceError
from gitopsq.manifests import ParseCache, check_revision
from gitopsq.manifests.config_model import RepoConfig
from gitopsq.manifests.report import Report
from gitopsq.policy import SourcedObject, Verdict, build_policy_input, evaluate, load_policies
from gitopsq.policy.revision import PolicyOutcome, head_verdicts, raw_config, sourced_objects
from gitopsq.source import DirectorySource
from gitopsq.source.signatures import verify_signature


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


class ValidationCache(MutableMapping[str, Any]):
    """What a long-lived caller (the sync loop) keeps between revisions, all bounded:
    - per-file parse results (it is the parse cache `check_revision` takes: a mapping);
    - reports by commit sha (a commit's files never change, so its report is final; the base of the next
      validation is usually the head of the previous one);
    - loaded and compiled policies by (backend, the repository's policy files' contents);
    - the policy engine's view of each object of the last head (unchanged files keep the very same objects)."""

    def __init__(self, *, max_files: int = 50_000, max_reports: int = 4, max_policy_sets: int = 4) -> None:
        self.files = ParseCache(max_files)
        self.reports: OrderedDict[str, Report] = OrderedDict()
        self.policies: OrderedDict[tuple[str | None, tuple[tuple[str, str], ...]], Any] = OrderedDict()
        self.sourced: dict[int, tuple[Any, SourcedObject]] = {}
        self.max_reports, self.max_policy_sets = max_reports, max_policy_sets

    # the parse-cache mapping
    def __getitem__(self, key: str) -> Any:
        return self.files[key]

    def __setitem__(self, key: str, value: Any) -> None:
        self.files[key] = value

    def __delitem__(self, key: str) -> None:
        del self.files[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self.files)

    def __len__(self) -> int:
        return len(self.files)

    def report(self, source: Any, commit: str) -> Report:
        found = self.reports.get(commit)
        if found is None:
            found = self.reports[commit] = check_revision(source, commit, cache=self.files)
            while len(self.reports) > self.max_reports:
                self.reports.popitem(last=False)
        else:
            self.reports.move_to_end(commit)
        return found

    def load_policies(self, policy_files: Mapping[str, str], backend: str | None) -> Any:
        """The built-in library plus ``policy_files``, compiled once per distinct contents; raises PolicyError."""
        key = (backend, tuple(sorted(policy_files.items())))
        found = self.policies.get(key)
        if found is None:
            try:
                found = load_policies(builtin=True, repo_files=policy_files, backend=backend)
            except PolicyError as err:
                found = err
            self.policies[key] = found
            while len(self.policies) > self.max_policy_sets:
                self.policies.popitem(last=False)
        if isinstance(found, PolicyError):
            raise found
        return found

    def sourced_objects(self, report: Report | None) -> list[SourcedObject]:
        """`sourced_objects` sharing the documents of objects seen in the last head (keyed by the object's
        identity, which the entry kept here holds alive, so an id is never reused while it is a key)."""
        memo = {key: pair[1] for key, pair in self.sourced.items()}
        out = sourced_objects(report, memo)
        if report is not None:
            self.sourced = {id(e): (e, memo[id(e)]) for e in report.entries}
        return out


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
          backend: str | None = None, cache: ValidationCache | None = None) -> tuple[PolicyOutcome, tuple[str, ...]]:
    """Run the policies on the change ``base`` → ``head``; returns the outcome and the touched paths."""
    touched = touched_paths(source, base, head)
    trust = (base_report.config if base_report is not None else None) or head_report.config
    commit: dict[str, Any] | None = None  # a plain directory has no commit: identity rules do not apply
    if not isinstance(source, DirectorySource):
        try:
            commit = commit_for_policy(source, head, trust, touched)
        except (SourceError, ValueError, KeyError, AttributeError):
            commit = None
    files = policy_files(source, head, head_report)
    if cache is None:
        outcome = head_verdicts(base_report, head_report, policy_files=files, commit=commit, touched_paths=touched,
                                backend=backend)
    else:
        outcome = _cached_verdicts(cache, base_report, head_report, files=files, commit=commit, touched=touched,
                                   backend=backend)
    return outcome, touched


def _cached_verdicts(cache: ValidationCache, base: Report | None, head: Report, *, files: Mapping[str, str],
                     commit: Mapping[str, Any] | None, touched: Sequence[str], backend: str | None) -> PolicyOutcome:
    """`gitopsq.policy.revision.head_verdicts` with the policies and object documents taken from ``cache``."""
    try:
        policies = cache.load_policies(files, backend)
    except PolicyError as err:
        return PolicyOutcome((), (findings.error("policy-load", err.reason, location=err.location),))
    broken = frozenset(f.obj for f in head.errors if f.obj)
    old = [o for o in cache.sourced_objects(base) if str(o.key) not in broken]
    new = cache.sourced_objects(head)
    policy_input = build_policy_input(old, new, raw_config(head), raw_config(base), commit=commit,
                                      touched_paths=touched, first_revision=base is None)
    return PolicyOutcome(evaluate(policies, policy_input, backend))


def verdict_finding(verdict: Verdict) -> Finding:
    """A deny or warn verdict as a finding, so every caller prints and counts it like any other."""
    location = Location(verdict.path, verdict.line) if verdict.path else None
    make = findings.error if verdict.denies else findings.warning
    return make(f"policy/{verdict.policy}", f"policy {verdict.policy}: {verdict.message}", location=location,
                obj=verdict.obj)


def validate_revision(source: Any, commit: str, *, base: str | bool | None = True,
                      cache: MutableMapping[str, Any] | None = None, backend: str | None = None) -> Validation:
    """Check ``commit`` and judge it against ``base``.

    ``base=True`` (the default) judges the change the commit itself brings (against its first parent; a root
    commit is judged whole); a sha judges everything since that revision (a PR's base, the last applied revision);
    ``None`` judges the revision whole, as a first revision. A `ValidationCache` as ``cache`` also keeps reports
    by commit, compiled policies and object documents between calls (a parse cache mapping keeps parsed files).
    """
    cached = cache if isinstance(cache, ValidationCache) else None

    def report(sha: str) -> Report:
        return cached.report(source, sha) if cached is not None else check_revision(source, sha, cache=cache)

    base_sha = first_parent(source, commit) if base is True else (base or None)
    base_report = None
    if isinstance(base_sha, str) and base_sha != commit:
        try:  # the base first: with a ValidationCache the head then becomes the most recent report kept
            base_report = report(base_sha)
        except SourceError:
            base_sha, base_report = None, None
    else:
        base_sha = None
    head_report = report(commit)
    if not head_report.ok:
        # A revision that does not even load is rejected on its findings; policies would only add noise.
        return Validation(head_report, base_sha, base_report, PolicyOutcome(()), touched_paths(source, base_sha,
                                                                                                commit))
    outcome, touched = judge(source, commit, head_report, base=base_sha, base_report=base_report, backend=backend,
                             cache=cached)
    extra = list(outcome.findings) + [verdict_finding(v) for v in outcome.verdicts if not v.allowed]
    return Validation(head_report.with_findings(extra), base_sha, base_report, outcome, touched)
