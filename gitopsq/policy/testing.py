"""Run the test cases embedded in policies, on one or several backends, and compare the backends.

A test case describes a pull request in miniature and goes through the same `build_policy_input` and
`evaluate` as a real revision. Fields (each may also come from the policy's ``spec.testDefaults``):

- ``object`` / ``oldObject`` / ``operation`` / ``path`` / ``oldPath``: one change. The operation defaults to
  CREATE (object only), UPDATE (both) or DELETE (oldObject only); ``oldPath`` makes it a move.
- ``changes``: a list of such changes instead of one.
- ``repo`` / ``previousRepo``: raw ``gitopsq.yaml``; the previous one defaults to ``repo``. A change of kind
  ``RepositoryConfig`` sets them instead.
- ``commit``: the head commit (sha, author, committer, signature{state, kind, signer, fingerprint}).
- ``commits``: every commit of the revision, oldest first, each with ``changedPaths``.
- ``desired``: other objects of the revision, unchanged (``{path, object}`` or a bare object).
- ``touchedPaths``: extra files the commit touched.
- ``expect``: ``allow`` (every verdict of this policy allows) or ``deny`` (at least one does not), and
  ``messageContains``: a text one failing verdict's message must contain.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gitopsq.policy.backend import get_backend
from gitopsq.policy.context import build_policy_input
from gitopsq.policy.evaluate import evaluate
from gitopsq.policy.language import Policy, PolicyTest, SourcedObject, Verdict

DEFAULT_PATH = "test.yaml"


@dataclass(frozen=True, slots=True)
class TestOutcome:
    policy: str
    test: str
    backend: str
    passed: bool
    detail: str
    verdicts: tuple[Verdict, ...]

    def fingerprint(self) -> tuple[tuple[str | None, bool, str], ...]:
        """What must agree between backends: each verdict's object, allowed flag and reason."""
        return tuple((v.obj, v.allowed, v.reason) for v in self.verdicts)


def _objects(entries: Sequence[Any]) -> list[SourcedObject]:
    out = []
    for entry in entries or []:
        if isinstance(entry, Mapping) and "object" in entry and "kind" not in entry:
            out.append(SourcedObject(str(entry.get("path") or "desired.yaml"), entry["object"]))
        else:
            out.append(SourcedObject("desired.yaml", entry))
    return out


def case_input(case: Mapping[str, Any]) -> Any:
    """The `PolicyInput` a test case describes."""
    changes = case.get("changes") or [{k: case[k] for k in ("object", "oldObject", "operation", "path", "oldPath")
                                        if k in case}]
    repo = case.get("repo") or {}
    previous = case.get("previousRepo", repo)
    old: list[SourcedObject] = []
    new: list[SourcedObject] = []
    touched: set[str] = set(case.get("touchedPaths") or [])
    for change in changes:
        obj, old_obj = change.get("object"), change.get("oldObject")
        path = str(change.get("path") or case.get("path") or DEFAULT_PATH)
        operation = change.get("operation") or ("UPDATE" if obj and old_obj else "CREATE" if obj else "DELETE")
        if (obj or old_obj or {}).get("kind") == "RepositoryConfig":
            repo, previous = obj or repo, old_obj or previous
            touched.add("gitopsq.yaml")
            continue
        touched.add(path)
        if operation in ("UPDATE", "DELETE") or change.get("oldPath"):
            old_path = str(change.get("oldPath") or path)
            old.append(SourcedObject(old_path, old_obj or obj))
            touched.add(old_path)
        if operation != "DELETE":
            new.append(SourcedObject(path, obj))
    context = _objects(case.get("desired") or [])
    return build_policy_input([*old, *context], [*new, *context], repo, previous, commit=case.get("commit"),
                              commits=case.get("commits") or (), touched_paths=touched)


def run_test(policy: Policy, test: PolicyTest, backend: str) -> TestOutcome:
    case = {**policy.test_defaults, **test.case}
    verdicts = tuple(v for v in evaluate([policy], case_input(case), get_backend(backend))
                     if v.policy == policy.name)
    failing = [v for v in verdicts if not v.allowed]
    if test.expect_allowed:
        passed = not failing
        detail = "" if passed else "expected allow, got: " + "; ".join(v.message for v in failing)
    elif not failing:
        passed, detail = False, "expected deny, but every verdict allowed" if verdicts else \
            "expected deny, but the policy matched no change"
    elif test.message_contains and not any(test.message_contains in v.message for v in failing):
        passed = False
        detail = f"denied, but no message contains {test.message_contains!r}: " + \
            "; ".join(v.message for v in failing)
    else:
        passed, detail = True, ""
    return TestOutcome(policy.name, test.name, backend, passed, detail, verdicts)


@dataclass(frozen=True, slots=True)
class TestReport:
    outcomes: tuple[TestOutcome, ...]
    disagreements: tuple[str, ...]

    @property
    def ok(self) -> bool:
        return all(o.passed for o in self.outcomes) and not self.disagreements


def run_policy_tests(policies: Sequence[Policy], backends: Sequence[str]) -> TestReport:
    """Every embedded test on every backend; a test whose verdicts differ between backends is a failure."""
    outcomes: list[TestOutcome] = []
    disagreements: list[str] = []
    for policy in policies:
        for test in policy.tests:
            results = [run_test(policy, test, b) for b in backends]
            outcomes.extend(results)
            if len({r.fingerprint() for r in results}) > 1:
                shown = "; ".join(f"{r.backend}: {[(v.obj, v.allowed, v.message) for v in r.verdicts]}"
                                  for r in results)
                disagreements.append(f"policy {policy.name}, test {test.name!r}: backends disagree ({shown})")
    return TestReport(tuple(outcomes), tuple(disagreements))
