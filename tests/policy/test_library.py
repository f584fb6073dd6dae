"""The built-in library: every policy's embedded tests pass on every backend, the backends agree, and each policy
carries enough allowed and denied cases."""

from __future__ import annotations

from pathlib import Path

import pytest

from gitopsq.policy import load_policies
from gitopsq.policy.testing import run_test

from .helpers import BACKENDS

LIBRARY = load_policies(builtin=True)
REQUIRED = {
    "team-owns-path", "localqueue-namespace-owned", "namespace-selector-scoped", "cohort-in-trust-zone",
    "flavor-capacity", "borrowing-lending-sane", "platform-only-global", "clusterqueue-delete-needs-platform",
    "signed-by-maintainer", "budget-capacity", "budget-owned-by-team", "signature-unverified",
}
CASES = [(p, t) for p in LIBRARY for t in p.tests]


def test_library_holds_every_required_policy() -> None:
    """The twelve policies the trust model relies on are shipped, all Deny but the warning about unlisted keys."""
    assert {p.name for p in LIBRARY} == REQUIRED
    assert {p.name for p in LIBRARY if p.severity.value != "Deny"} == {"signature-unverified"}
    assert {p.severity.value for p in LIBRARY} == {"Deny", "Warn"}


@pytest.mark.parametrize("policy", LIBRARY, ids=lambda p: p.name)
def test_policy_has_three_allowed_and_three_denied_cases(policy: object) -> None:
    """Each built-in policy embeds at least three allowed and three denied test cases."""
    tests = policy.tests  # type: ignore[attr-defined]
    assert sum(t.expect_allowed for t in tests) >= 3
    assert sum(not t.expect_allowed for t in tests) >= 3


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(("policy", "case"), CASES, ids=[f"{p.name}: {t.name}" for p, t in CASES])
def test_embedded_case_passes(policy: object, case: object, backend: str) -> None:
    """An embedded policy test gives the expected verdict on this backend."""
    outcome = run_test(policy, case, backend)  # type: ignore[arg-type]
    assert outcome.passed, outcome.detail


@pytest.mark.parametrize(("policy", "case"), CASES, ids=[f"{p.name}: {t.name}" for p, t in CASES])
def test_backends_agree(policy: object, case: object) -> None:
    """Both CEL backends return the same verdicts (object, allowed, reason) for every embedded case."""
    results = {run_test(policy, case, b).fingerprint() for b in BACKENDS}  # type: ignore[arg-type]
    assert len(BACKENDS) == 2 and len(results) == 1


def test_root_policies_dir_is_the_packaged_library() -> None:
    """``policies/`` at the project root and the packaged ``gitopsq/data/policies`` hold the same files."""
    root = Path(__file__).resolve().parents[2]
    shipped = {p.name: p.read_text() for p in (root / "gitopsq/data/policies").glob("*.yaml")}
    linked = {p.name: p.read_text() for p in (root / "policies").glob("*.yaml")}
    assert shipped == linked and len(shipped) == len(REQUIRED)
