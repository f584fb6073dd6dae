"""Issue 19 attack 8 (cost half): a file of expensive policies cannot stall a check, on either CEL backend."""

from __future__ import annotations

import re
import resource
import time

import pytest

from gitopsq.policy import SourcedObject, build_policy_input, evaluate, parse_policies
from gitopsq.policy.evaluate import VALUE_LIMIT, clear_program_cache, cost_limit
from gitopsq.policy.language import Severity
from tests.policy.helpers import BACKENDS, cluster_queue, repo_config

NUMBERS = ",".join(str(i) for i in range(100))
COSTLY = f"[{NUMBERS}].all(x, [{NUMBERS}].exists(y, x + y < 0) || x >= 0)"


def _costly_file(count: int) -> str:
    return "".join(
        f"---\napiVersion: gitopsq.dev/v1alpha1\nkind: Policy\nmetadata: {{name: costly-{i}}}\nspec:\n"
        f"  severity: {'Warn' if i % 2 else 'Deny'}\n"
        f"  validations:\n    - expression: \"{COSTLY}\"\n" for i in range(count))


def _changes(count: int) -> object:
    new = [SourcedObject("teams/a/q.yaml", cluster_queue(f"team-a-{i}"), 1 + 9 * i) for i in range(count)]
    return build_policy_input([], new, repo_config(), repo_config())


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_file_of_expensive_policies_is_denied_within_a_bounded_time(backend: str) -> None:
    """130 policies (over 78 KB) that each run 10,000 iterations, on 7 changes: every verdict denies (Warn ones
    too: fail closed) naming the policy file, line and expression, in seconds instead of minutes."""
    text = _costly_file(130)
    assert len(text) > 78_000
    policies = parse_policies("policies/costly.yaml", text, backend)
    clear_program_cache()  # compilation is part of what the check pays
    started = time.process_time()
    verdicts = evaluate(policies, _changes(7), backend)  # type: ignore[arg-type]
    spent = time.process_time() - started
    assert spent < 5, f"{spent:.1f} s of CPU"  # before: minutes on cel-python
    assert len(verdicts) == 130 * 7
    assert all(v.denies and v.reason == "CostLimitExceeded" and v.severity is Severity.DENY for v in verdicts)
    lines = {int(m[1]) for v in verdicts if (m := re.search(r"\(policies/costly\.yaml:(\d+): \[0,1,2", v.message))}
    assert lines == {8 * (i + 1) for i in range(130)}  # the line of each policy's expression
    assert any(f"the policy cost budget of this check ({cost_limit(7):,} units) is spent" in v.message
               for v in verdicts)


@pytest.mark.parametrize("backend", BACKENDS)
def test_doubling_variables_are_stopped_before_they_eat_memory(backend: str) -> None:
    """Thirty variables that each double a string (2 GB at the end) deny once a value passes `VALUE_LIMIT`, with
    little memory, and are never inlined into an exponentially long expression."""
    variables = "".join(f"    - {{name: v{i}, expression: \"variables.v{i - 1} + variables.v{i - 1}\"}}\n"
                        for i in range(1, 30))
    text = ("apiVersion: gitopsq.dev/v1alpha1\nkind: Policy\nmetadata: {name: doubling}\nspec:\n  variables:\n"
            f"    - {{name: v0, expression: \"'ab'\"}}\n{variables}"
            "  validations:\n    - expression: \"size(variables.v29) > 0\"\n")
    (policy,) = parse_policies("policies/doubling.yaml", text, backend)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    (verdict,) = evaluate([policy], _changes(1), backend)  # type: ignore[arg-type]
    grown_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    assert verdict.denies and verdict.reason == "CostLimitExceeded"
    assert "policies/doubling.yaml:1: variables.v" in verdict.message
    assert f"the limit is {VALUE_LIMIT:,}" in verdict.message or "cost budget of this check" in verdict.message
    assert grown_mb < 200, f"{grown_mb:.0f} MB"
