"""Path patterns: the pipeline's matcher agrees with the Git source's listing on every documented form."""

from __future__ import annotations

import pytest

from gitopsq.manifests import paths
from gitopsq.source import globs

PATTERNS = ["platform/", "platform", "teams/**", "teams/*/queues.yaml", "**/flavors.yaml", "teams/**/x.yml",
            "./teams/", "/platform/", "team?/a.yaml", "t[ae]ams/a.yaml", "t[!a]ams/a.yaml", "gitopsq.yaml", "*"]
PATHS = ["platform/a.yaml", "platform/sub/b.yaml", "platformer/a.yaml", "teams/a/queues.yaml",
         "teams/a/b/queues.yaml", "flavors.yaml", "x/y/flavors.yaml", "teams/x.yml", "teams/a/b/x.yml",
         "teams/a.yaml", "teems/a.yaml", "tooms/a.yaml", "gitopsq.yaml", "README.md"]


@pytest.mark.parametrize("pattern", PATTERNS)
def test_matcher_agrees_with_the_source_listing(pattern: str) -> None:
    """For every pattern form, the core matcher and gitopsq.source.globs select exactly the same paths."""
    assert [p for p in PATHS if paths.matches(p, pattern)] == [p for p in PATHS if globs.matches(p, pattern)]


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
