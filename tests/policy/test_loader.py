"""Policy files: shape errors and CEL syntax errors name the file, line and column; bad policies are not loaded."""

from __future__ import annotations

import pytest

from gitopsq.errors import PolicyError
from gitopsq.policy import load_policies, parse_policies
from gitopsq.policy.language import Operation, Scope, Severity

from .helpers import BACKENDS

HEAD = "apiVersion: gitopsq.dev/v1alpha1\nkind: Policy\nmetadata: {name: p}\nspec:\n"


def _policy(spec: str) -> str:
    return HEAD + spec


GOOD = _policy(
    "  severity: Warn\n"
    "  match: {kinds: [ClusterQueue], paths: ['teams/**'], operations: [CREATE]}\n"
    "  variables:\n"
    "    - {name: n, expression: \"object.metadata.name\"}\n"
    "  validations:\n"
    "    - expression: \"variables.n.startsWith('team-')\"\n"
    "      messageExpression: \"'bad name ' + variables.n\"\n"
    "      reason: Invalid\n"
)


@pytest.mark.parametrize("backend", BACKENDS)
def test_well_formed_policy_loads(backend: str) -> None:
    """Every field of a well-formed policy is read into the model."""
    (policy,) = parse_policies("policies/p.yaml", GOOD, backend)
    assert (policy.name, policy.severity, policy.scope) == ("p", Severity.WARN, Scope.OBJECT)
    assert policy.match.kinds == ("ClusterQueue",) and policy.match.operations == (Operation.CREATE,)
    assert policy.variables[0].name == "n" and policy.validations[0].reason == "Invalid"
    assert policy.validations[0].line == 10


BAD = {
    "syntax error in a plain scalar": (
        _policy("  validations:\n    - expression: object.spec.x == (1\n"), "policies/p.yaml:6:", "CEL syntax error"),
    "syntax error in a folded block scalar, second line": (
        _policy("  validations:\n    - expression: >-\n        object.spec.x == 1 &&\n        a +* b\n"),
        "policies/p.yaml:8:12:", "CEL syntax error"),
    "syntax error in a literal block scalar": (
        _policy("  validations:\n    - expression: |\n        true &&\n        a +* b\n"),
        "policies/p.yaml:8:12:", "CEL syntax error"),
    "syntax error in a double-quoted scalar": (
        _policy('  validations:\n    - expression: "a +* b"\n'), "policies/p.yaml:6:23:", "CEL syntax error"),
    "undeclared variable": (
        _policy("  validations:\n    - expression: objct.spec == 1\n"), "policies/p.yaml:6:", "undeclared reference"),
    "quantities ordered with <": (
        _policy("  validations:\n    - expression: quantity('1') < quantity('2')\n"), "policies/p.yaml:6:",
        "compare quantities with compareTo"),
    "unknown spec field": (_policy("  validation: []\n"), "policies/p.yaml:5:3", "unknown field 'validation'"),
    "no validations": (_policy("  severity: Deny\n"), "policies/p.yaml", "needs at least one validation"),
    "bad severity": (_policy("  severity: Block\n  validations: [{expression: 'true'}]\n"), "policies/p.yaml:5:",
                     "Deny or Warn"),
    "bad operation": (_policy("  match: {operations: [PATCH]}\n  validations: [{expression: 'true'}]\n"),
                      "policies/p.yaml:5:", "unknown operation 'PATCH'"),
    "wrong apiVersion": ("apiVersion: v1\nkind: Policy\nmetadata: {name: p}\n"
                         "spec: {validations: [{expression: 'true'}]}\n",
                         "policies/p.yaml:1:", "apiVersion must be gitopsq.dev/v1alpha1"),
    "invalid YAML": ("apiVersion: [\n", "policies/p.yaml:2:", "invalid YAML"),
    "test with a bad expectation": (
        _policy("  validations: [{expression: 'true'}]\n  tests: [{name: t, expect: maybe, object: {}}]\n"),
        "policies/p.yaml:6:", "expect must be allow or deny"),
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(("text", "where", "what"), BAD.values(), ids=list(BAD))
def test_bad_policy_is_refused_with_its_location(backend: str, text: str, where: str, what: str) -> None:
    """A malformed policy raises PolicyError whose text starts with file:line[:column] and says what is wrong."""
    with pytest.raises(PolicyError) as caught:
        parse_policies("policies/p.yaml", text, backend)
    assert str(caught.value).startswith(where), str(caught.value)
    assert what in str(caught.value)


def test_repository_policy_cannot_reuse_a_builtin_name() -> None:
    """A repository policy named like a built-in one is refused: it could otherwise shadow it."""
    text = GOOD.replace("{name: p}", "{name: team-owns-path}")
    with pytest.raises(PolicyError, match=r"already used by policies/team-owns-path\.yaml"):
        load_policies(builtin=True, repo_files={"policies/mine.yaml": text})


def test_repository_policies_follow_the_builtins() -> None:
    """load_policies returns the built-in library, then the repository's policies in path order."""
    second = GOOD.replace("{name: p}", "{name: q}")
    policies = load_policies(builtin=True, repo_files={"policies/z.yaml": GOOD, "policies/a.yaml": second})
    assert [p.name for p in policies][-2:] == ["q", "p"]
    assert all(p.builtin for p in policies[:-2]) and not policies[-1].builtin


def test_multi_document_file_holds_several_policies() -> None:
    """A file may hold several policies separated by ``---``."""
    text = GOOD + "---\n" + GOOD.replace("{name: p}", "{name: q}")
    assert [p.name for p in parse_policies("x.yaml", text)] == ["p", "q"]
