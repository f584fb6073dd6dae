"""Expression rewriting used for speed: inlined variables and pruned context keep every verdict unchanged."""

from __future__ import annotations

import pytest

from gitopsq.policy.expressions import inline_variables, mentions, referenced_fields


def test_variables_are_inlined_in_order_and_outside_strings() -> None:
    """``variables.x`` becomes the variable's expression (itself expanded); text inside literals is untouched."""
    out = inline_variables("variables.b > 1 && 'variables.b' != ''", [("a", "object.n"), ("b", "variables.a + 1")])
    assert out == "((object.n) + 1) > 1 && 'variables.b' != ''"


def test_unknown_variable_is_left_for_the_compiler() -> None:
    """A reference to an undefined variable stays as written, so the runtime reports it."""
    assert inline_variables("variables.zz == 1", [("a", "1")]) == "variables.zz == 1"


@pytest.mark.parametrize(("expressions", "root", "fields"), [
    (["repo.platformTeam == 'x'", "repo.namespaceOwner[ns] == 'a'"], "repo", {"platformTeam", "namespaceOwner"}),
    (["has(repo.signing) && repo.signing.mode == 'required'"], "repo", {"signing"}),
    (["repo == null"], "repo", None),
    (["'repo.teams' == path"], "repo", set()),
    (["object.repo.x == 1"], "repo", set()),
    (["commit.signature.state == 'good'", "commit == null"], "commit", None),
], ids=["field accesses", "has() counts as access", "bare use keeps everything", "string literal ignored",
        "a field named repo on another object", "null check keeps everything"])
def test_referenced_fields(expressions: list[str], root: str, fields: set[str] | None) -> None:
    """Only fields reached as ``root.field`` are bound; any other use of the root binds it whole."""
    assert referenced_fields(expressions)[root] == fields


def test_mentions_ignores_strings_and_fields() -> None:
    """``desired`` is bound only when an expression names the variable, not a string or a field of that name."""
    assert not mentions(["'desired' == path", "object.desired == 1"], "desired")
    assert mentions(["desired.ClusterQueue.size() > 0"], "desired")
