"""The one validation path: a revision read through a `Source`, checked, then judged by the CEL policies.

`gitopsq check`, `gitopsq plan`, `gitopsq render`, the sync loop and the demo all call `validate_revision` (or its
parts), so a revision that one of them accepts the others accept too. The pure work happens in
`gitopsq.manifests.check_revision` (files → objects and findings) and `gitopsq.policy.revision.head_verdicts`
(changes → verdicts); this module does the reading around them: which commit is the base, which paths the change
touched, and, from `gitopsq.trust`, what judges it: the base's trust model (unreadable fails closed), every commit
of the change with its own paths and verified signature, and the repository's own policy files at the base.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterator, Mapping, MutableMapping, Sequence
from dataclasses import dataclass
from typing import Any

from gitopsq.api import findings
from gitopsq.api.findings import Finding
from gitopsq.errors import Location, PolicyError, SourceError
from gitopsq.kustomize import default_renderer
from gitopsq.manifests import ParseCache, check_revision
from gitopsq.manifests.check_report import Report
from gitopsq.policy import SourcedObject, Verdict, build_policy_input, evaluate, load_policies
from gitopsq.policy.placement import cluster_scoped_findings
from gitopsq.policy.revision import PolicyOutcome, head_verdicts, raw_config, sourced_objects
from gitopsq.source import DirectorySource
from gitopsq.source.tree_rules import tree_refusal
from gitopsq.trust import BaseTrust, ForgeApprovals, base_trust, commits_for_policy, descent_finding
from gitopsq.trust import policy_files as trusted_policy_files


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

    def report(self, source: Any, commit: str, cluster: str | None = None) -> Report:
        key = f"{commit}@{cluster}" if cluster else commit
        found = self.reports.get(key)
        if found is None:
            found = self.reports[key] = check_revision(source, commit, cache=self.files, cluster=cluster,
                                                       renderer=default_renderer())
            while len(self.reports) > self.max_reports:
                self.reports.popitem(last=False)
        else:
            self.reports.move_to_end(key)
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


def judge(source: Any, head: str, head_report: Report, *, base: str | None, base_report: Report | None,
          backend: str | None = None, cache: ValidationCache | None = None,
          trust: BaseTrust | None = None, forge_approvals: ForgeApprovals | None = None,
          review_approvals: Sequence[Mapping[str, Any]] | None = None,
          touched: tuple[str, ...] | None = None) -> tuple[PolicyOutcome, tuple[str, ...]]:
    """Run the policies on the change ``base`` → ``head``; returns the outcome and the touched paths (``touched``
    narrows them: a plan judges each cluster on the files it reads, docs/fleet.md).

    Everything that judges comes from the trusted base (docs/policy.md "Trust"): the maintainers and their keys,
    path ownership for the placement rule, and the repository's own policy files. Only a first revision (no
    base) or a base without gitopsq.yaml is judged by the head's configuration. Every commit of the change is
    handed to the policies with the paths it touched itself."""
    touched = touched_paths(source, base, head) if touched is None else touched
    trust = trust if trust is not None else base_trust(base, base_report, None)
    if trust.problem is not None:
        return PolicyOutcome((), (trust.problem,)), touched
    config = trust.config or head_report.config
    problems: list[Finding] = []
    commit: dict[str, Any] | None = None  # a plain directory has no commit: identity rules do not apply
    commits: list[dict[str, Any]] = []
    if not isinstance(source, DirectorySource):
        commits, problem = commits_for_policy(source, base, head, config, forge_approvals,
                                              review_approvals=review_approvals)
        if problem is not None:
            problems.append(problem)
        head_commit = next((c for c in commits if c["sha"] == head), None)
        if head_commit is not None:
            commit = {**head_commit, "changedPaths": list(touched)}
    trusted_at = base if trust.config is not None and base else head
    files, refused = trusted_policy_files(source, trusted_at, config)
    problems.extend(refused)
    if trusted_at != head:
        problems.extend(_head_policies_load(source, head, head_report, trusted=files, backend=backend,
                                                   cache=cache))
    if config is not None:
        problems.extend(cluster_scoped_findings(head_report, config, None if base is None else touched))
    if cache is None:
        outcome = head_verdicts(base_report, head_report, policy_files=files, commit=commit, commits=commits,
                                touched_paths=touched, backend=backend)
    else:
        outcome = _cached_verdicts(cache, base_report, head_report, files=files, commit=commit, commits=commits,
                                   touched=touched, backend=backend)
    return PolicyOutcome(outcome.verdicts, (*problems, *outcome.findings)), touched


def _head_policies_load(source: Any, head: str, head_report: Report, *, trusted: Mapping[str, str],
                        backend: str | None, cache: ValidationCache | None) -> list[Finding]:
    """The head's own policy files do not judge it, but a change that breaks one is refused here (it would judge
    every change after it): loading them reports what does not load."""
    files, refused = trusted_policy_files(source, head, head_report.config)
    if refused or files == dict(trusted):
        return list(refused)
    try:
        if cache is not None:
            cache.load_policies(files, backend)
        else:
            load_policies(builtin=True, repo_files=files, backend=backend)
    except PolicyError as err:
        return [findings.error("policy-load", err.reason, location=err.location)]
    return []


def _cached_verdicts(cache: ValidationCache, base: Report | None, head: Report, *, files: Mapping[str, str],
                     commit: Mapping[str, Any] | None, commits: Sequence[Mapping[str, Any]],
                     touched: Sequence[str], backend: str | None) -> PolicyOutcome:
    """`gitopsq.policy.revision.head_verdicts` with the policies and object documents taken from ``cache``."""
    try:
        policies = cache.load_policies(files, backend)
    except PolicyError as err:
        return PolicyOutcome((), (findings.error("policy-load", err.reason, location=err.location),))
    broken = frozenset(f.obj for f in head.errors if f.obj)
    old = [o for o in cache.sourced_objects(base) if str(o.key) not in broken]
    new = cache.sourced_objects(head)
    policy_input = build_policy_input(old, new, raw_config(head), raw_config(base), commit=commit, commits=commits,
                                      touched_paths=touched, first_revision=base is None)
    return PolicyOutcome(evaluate(policies, policy_input, backend))


def refused_trees(source: Any, commit: str) -> list[Finding]:
    """An error finding (code ``tree-refused``) for each tree entry of ``commit`` that git fsck refuses
    (gitopsq.source.tree_rules); a source without trees (a plain directory) has none."""
    checker = getattr(source, "tree_problems", None)
    if checker is None:
        return []
    return [findings.error("tree-refused", tree_refusal(commit, p), location=Location(p.path or p.tree or "/", None))
            for p in checker(commit)]


def verdict_finding(verdict: Verdict) -> Finding:
    """A deny or warn verdict as a finding, so every caller prints and counts it like any other."""
    location = Location(verdict.path, verdict.line) if verdict.path else None
    make = findings.error if verdict.denies else findings.warning
    return make(f"policy/{verdict.policy}", f"policy {verdict.policy}: {verdict.message}", location=location,
                obj=verdict.obj)


def validate_revision(source: Any, commit: str, *, base: str | bool | None = True,
                      cache: MutableMapping[str, Any] | None = None, backend: str | None = None,
                      forge_approvals: ForgeApprovals | None = None, cluster: str | None = None,
                      review_approvals: Sequence[Mapping[str, Any]] | None = None) -> Validation:
    """Check ``commit`` and judge it against ``base`` (as cluster ``cluster`` of gitopsq.yaml sees both, when
    given: docs/fleet.md).

    ``base=True`` (the default) judges the change the commit itself brings (against its first parent; a root
    commit is judged whole); a sha judges everything since that revision (a PR's base, the last applied revision);
    ``None`` judges the revision whole, as a first revision. A `ValidationCache` as ``cache`` also keeps reports
    by commit, compiled policies and object documents between calls (a parse cache mapping keeps parsed files).
    ``review_approvals``: the pull request's approvals at ``commit`` (see gitopsq.trust.commits_for_policy).
    """
    cached = cache if isinstance(cache, ValidationCache) else None

    def report(sha: str) -> Report:
        if cached is not None:
            return cached.report(source, sha, cluster)
        return check_revision(source, sha, cache=cache, cluster=cluster, renderer=default_renderer())

    refused = refused_trees(source, commit)
    if refused:  # nothing of a tree Git would refuse is read, let alone judged
        return Validation(Report(commit, None, (), tuple(refused)), None, None, PolicyOutcome(()), ())
    base_sha = first_parent(source, commit) if base is True else (base or None)
    base_report, base_error = None, None
    if isinstance(base_sha, str) and base_sha != commit:
        try:  # the base first: with a ValidationCache the head then becomes the most recent report kept
            base_report = report(base_sha)
        except SourceError as err:  # unreadable is not absent: the trust decision fails closed below
            base_error = str(err)
    else:
        base_sha = None
    # an explicit base must be an ancestor; an unreadable one is refused below (untrusted-base)
    if isinstance(base_sha, str) and base_report is not None and base is not True:
        backwards = descent_finding(source, base_sha, commit)
        if backwards is not None:
            return Validation(Report(commit, None, (), (backwards,)), base_sha, base_report, PolicyOutcome(()), ())
    trust = base_trust(base_sha, base_report, base_error)
    head_report = report(commit)
    if trust.problem is not None:
        return Validation(head_report.with_findings([trust.problem]), base_sha, base_report, PolicyOutcome(()),
                          touched_paths(source, base_sha, commit))
    if not head_report.ok:
        # A revision that does not even load is rejected on its findings; policies would only add noise.
        return Validation(head_report, base_sha, base_report, PolicyOutcome(()), touched_paths(source, base_sha,
                                                                                                commit))
    outcome, touched = judge(source, commit, head_report, base=base_sha, base_report=base_report, backend=backend,
                             cache=cached, trust=trust, forge_approvals=forge_approvals,
                             review_approvals=review_approvals)
    extra = list(outcome.findings) + [verdict_finding(v) for v in outcome.verdicts if not v.allowed]
    return Validation(head_report.with_findings(extra), base_sha, base_report, outcome, touched)
