"""The policy verdicts of a revision judged against the one before it: gitopsq.policy's one evaluation path.

The revision's objects go to the engine as normalised v1beta2 documents (the form `gitopsq render` prints),
with the file and line they came from; ``previous`` is the base revision (the last accepted one, for a PR),
``commit`` the head commit as `gitopsq.policy.build_policy_input` takes it. A policy file that does not load
becomes an error finding (code ``policy-load``) instead of an exception, so the plan still shows everything else.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gitopsq.api import findings
from gitopsq.api.codec import encode
from gitopsq.api.findings import Finding
from gitopsq.errors import PolicyError
from gitopsq.manifests.check_report import Report
from gitopsq.manifests.config_model import ParsedRaw
from gitopsq.policy import SourcedObject, Verdict, build_policy_input, evaluate, load_policies


@dataclass(frozen=True, slots=True)
class PolicyOutcome:
    verdicts: tuple[Verdict, ...]
    findings: tuple[Finding, ...] = ()

    @property
    def denied(self) -> tuple[Verdict, ...]:
        return tuple(v for v in self.verdicts if v.denies)

    @property
    def warned(self) -> tuple[Verdict, ...]:
        return tuple(v for v in self.verdicts if v.warns)


def sourced_objects(report: Report | None, memo: dict[int, SourcedObject] | None = None) -> list[SourcedObject]:
    """A revision's objects as the policy engine reads them. ``memo`` shares the documents of the objects two
    revisions have in common (the parse cache hands both revisions the very same object for an unchanged file)."""
    if report is None:
        return []
    memo = {} if memo is None else memo
    out = []
    for e in report.entries:
        found = memo.get(id(e))
        if found is None:
            found = memo[id(e)] = SourcedObject(e.path, encode(e.obj), e.line)
        out.append(found)
    out.extend(SourcedObject(p.path, dict(p.doc), p.line) for p in report.passthrough)
    # Budgets as written: policies judge the file a team edits; the queues they compile into are entries above.
    out.extend(SourcedObject(b.path, dict(b.doc), b.line) for b in report.budgets)
    return out


def raw_config(report: Report | None) -> Any:
    """The revision's gitopsq.yaml as `build_policy_input` takes it: the raw mapping, or for one cluster's view
    (docs/fleet.md) the `RepoConfig` itself, whose policy form carries that cluster's capacity and zones."""
    if report is None or report.config is None:
        return None
    # the raw mapping (config-change detection) that also gives the parsed view: the keys read from key files and,
    # for one cluster's view (docs/fleet.md), that cluster's capacity and trust zones
    if report.config.raw:
        return ParsedRaw(report.config.raw, report.config)
    return report.config if report.config.cluster else report.config.as_policy_dict()


def head_verdicts(base: Report | None, head: Report, *, policy_files: Mapping[str, str],
                  commit: Mapping[str, Any] | None, touched_paths: Iterable[str],
                  commits: Sequence[Mapping[str, Any]] = (), backend: str | None = None) -> PolicyOutcome:
    """Evaluate the built-in library and the repository's policy files (the caller reads them at the trusted
    base) on the changes from ``base`` to ``head``; ``commits`` is every commit of the change, oldest first."""
    try:
        policies = load_policies(builtin=True, repo_files=policy_files, backend=backend)
    except PolicyError as err:
        finding = findings.error("policy-load", err.reason, location=err.location)
        return PolicyOutcome((), (finding,))
    # An object head defines but cannot read is not a deletion (its finding already rejects the revision).
    broken = frozenset(f.obj for f in head.errors if f.obj)
    memo: dict[int, SourcedObject] = {}
    old = [o for o in sourced_objects(base, memo) if str(o.key) not in broken]
    pi = build_policy_input(old, sourced_objects(head, memo), raw_config(head), raw_config(base),
                            commit=commit, commits=commits, touched_paths=touched_paths,
                            first_revision=base is None)
    return PolicyOutcome(evaluate(policies, pi, backend))
