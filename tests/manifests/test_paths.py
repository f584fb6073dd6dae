"""Path patterns: every documented form selects exactly the paths docs/config.md says (one matcher, shared by the
checker and the Git source's tree listing)."""

from __future__ import annotations

import pytest

from gitopsq.manifests import paths
from gitopsq.source import globs

PATHS = ["platform/a.yaml", "platform/sub/b.yaml", "platformer/a.yaml", "teams/a/queues.yaml",
         "teams/a/b/queues.yaml", "flavors.yaml", "x/y/flavors.yaml", "teams/x.yml", "teams/a/b/x.yml",
         "teams/a.yaml", "teems/a.yaml", "tooms/a.yaml", "gitopsq.yaml", "README.md"]
TEAMS_ALL = ["teams/a/queues.yaml", "teams/a/b/queues.yaml", "teams/x.yml", "teams/a/b/x.yml", "teams/a.yaml"]


@pytest.mark.parametrize(("pattern", "selected"), [
    ("platform/", ["platform/a.yaml", "platform/sub/b.yaml"]),
    ("platform", ["platform/a.yaml", "platform/sub/b.yaml"]),
    ("teams/**", TEAMS_ALL),
    ("teams/*/queues.yaml", ["teams/a/queues.yaml"]),
    ("**/flavors.yaml", ["flavors.yaml", "x/y/flavors.yaml"]),
    ("teams/**/x.yml", ["teams/x.yml", "teams/a/b/x.yml"]),
    ("./teams/", TEAMS_ALL),
    ("/platform/", ["platform/a.yaml", "platform/sub/b.yaml"]),
    ("team?/a.yaml", ["teams/a.yaml"]),
    ("t[ae]ams/a.yaml", ["teams/a.yaml"]),
    ("t[!a]ams/a.yaml", ["teams/a.yaml"]),
    ("gitopsq.yaml", ["gitopsq.yaml"]),
    ("*", ["flavors.yaml", "gitopsq.yaml", "README.md"]),
], ids=["dir", "literal-dir", "doublestar", "star-segment", "leading-doublestar", "inner-doublestar", "dot-slash",
        "leading-slash", "question-mark", "class", "negated-class", "literal-file", "root-star"])
def test_each_pattern_form_selects_the_documented_paths(pattern: str, selected: list[str]) -> None:
    """Each pattern form of docs/config.md selects exactly these paths, through the core and the source alike."""
    assert [p for p in PATHS if paths.matches(p, pattern)] == selected
    assert [p for p in PATHS if globs.PathFilter.of([pattern], suffixes=None).selects(p)] == selected


@pytest.mark.parametrize(("pattern", "path", "expected"), [
    ("platform/", "platform/a/b.yaml", True),
    ("platform/", "platformer/a.yaml", False),
    ("teams/*/q.yaml", "teams/a/b/q.yaml", False),
    ("**/q.yaml", "q.yaml", True),
    ("teams/**", "teams", False),
], ids=["dir-recursive", "dir-not-prefix", "star-one-segment", "doublestar-zero-segments",
        "trailing-doublestar-not-dir-itself"])
def test_documented_semantics(pattern: str, path: str, expected: bool) -> None:
    """The rules of docs/config.md: '/' entries are directories, '*' stays in a segment, '**' spans segments."""
    assert paths.matches(path, pattern) is expected


def test_specificity_prefers_longer_literal_prefix_then_fewer_wildcards() -> None:
    """teams/a/** beats teams/**; a literal file beats any glob that matches it."""
    assert paths.specificity("teams/a/**") > paths.specificity("teams/**")
    assert paths.specificity("teams/a/q.yaml") > paths.specificity("teams/a/*.yaml")
    assert paths.specificity("teams/a/*") > paths.specificity("teams/a/**")


@pytest.mark.parametrize(("pattern", "problem"), [("", "empty"), ("a\\b", "backslash"), ("../x", "'..'"),
                                                  ("teams/", None)],
                         ids=["empty", "backslash", "dotdot", "fine"])
def test_pattern_problems(pattern: str, problem: str | None) -> None:
    """Unusable patterns are explained; good ones pass."""
    found = paths.pattern_problem(pattern)
    assert (found is None) if problem is None else (problem in (found or ""))
