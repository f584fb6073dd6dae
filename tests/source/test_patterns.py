"""Include / exclude patterns (docs/config.md) and their use when listing a commit's files."""

from __future__ import annotations

import pytest

from gitopsq.source import PathFilter, matches, open_source
from gitopsq.source.globs import literal_prefix

from .conftest import GitRepo

MATCHES = [
    pytest.param("platform/", "platform/flavors.yaml", True, id="directory-entry-covers-its-files"),
    pytest.param("platform/", "platform/deep/er/x.yaml", True, id="directory-entry-is-recursive"),
    pytest.param("platform/", "platformer/x.yaml", False, id="directory-entry-is-not-a-prefix-match"),
    pytest.param("platform", "platform/x.yaml", True, id="literal-directory-name-acts-as-directory"),
    pytest.param("gitopsq.yaml", "gitopsq.yaml", True, id="literal-file"),
    pytest.param("gitopsq.yaml", "sub/gitopsq.yaml", False, id="literal-file-is-rooted"),
    pytest.param("teams/*/queues.yaml", "teams/a/queues.yaml", True, id="star-within-a-segment"),
    pytest.param("teams/*/queues.yaml", "teams/a/b/queues.yaml", False, id="star-never-crosses-a-slash"),
    pytest.param("teams/**/queues.yaml", "teams/queues.yaml", True, id="double-star-matches-zero-segments"),
    pytest.param("teams/**/queues.yaml", "teams/a/b/queues.yaml", True, id="double-star-spans-segments"),
    pytest.param("**/README*", "README.md", True, id="leading-double-star-matches-root"),
    pytest.param("**/README*", "teams/a/README.yaml", True, id="leading-double-star-matches-deep"),
    pytest.param("teams/**", "teams/a/x.yaml", True, id="trailing-double-star-covers-below"),
    pytest.param("teams/**", "teams", False, id="trailing-double-star-not-the-directory-itself"),
    pytest.param("teams/a?/x.yaml", "teams/ab/x.yaml", True, id="question-mark-is-one-char"),
    pytest.param("teams/[ab]/x.yaml", "teams/c/x.yaml", False, id="character-class"),
    pytest.param("teams/[!ab]/x.yaml", "teams/c/x.yaml", True, id="negated-character-class"),
    pytest.param("./platform/", "platform/x.yaml", True, id="leading-dot-slash-ignored"),
    pytest.param("Platform/", "platform/x.yaml", False, id="case-sensitive"),
    pytest.param("a.b/", "axb/x.yaml", False, id="dots-are-literal"),
]


@pytest.mark.parametrize(("pattern", "path", "expected"), MATCHES)
def test_pattern_matching(pattern: str, path: str, expected: bool) -> None:
    """A pattern covers exactly the paths docs/config.md says it does."""
    assert matches(path, pattern) is expected


@pytest.mark.parametrize(("pattern", "prefix"), [
    ("teams/*/q.yaml", "teams"), ("platform/", "platform"), ("gitopsq.yaml", "gitopsq.yaml"), ("**/x", ""),
    ("a/b/c.yaml", "a/b/c.yaml"), ("./teams/a/", "teams/a"),
], ids=["glob-stops-at-wildcard", "directory", "root-file-is-its-own-root", "double-star-at-root",
        "nested-literal", "dot-slash-directory"])
def test_literal_prefix_bounds_the_walk(pattern: str, prefix: str) -> None:
    """The directory a tree walk starts from holds no wildcard and contains every possible match."""
    assert literal_prefix(pattern) == prefix


def test_filter_roots_drop_nested_directories() -> None:
    """Roots covering a nested include are not walked twice."""
    assert PathFilter.of(["teams/", "teams/a/", "platform/*.yaml"]).roots() == ("platform", "teams")
    assert PathFilter.of(["gitopsq.yaml", "teams/"]).roots() == ("gitopsq.yaml", "teams")
    assert PathFilter.of(["**/*.yaml", "teams/"]).roots() == ("",)


@pytest.fixture
def layout(repo: GitRepo) -> str:
    return repo.commit("layout", {
        "gitopsq.yaml": "kind: RepositoryConfig\n",
        "platform/flavors.yaml": "a\n",
        "platform/README.md": "docs\n",
        "platform/old/legacy.yml": "b\n",
        "teams/a/queues.yaml": "c\n",
        "teams/a/README.yaml": "d\n",
        "teams/b/queues.yaml": "e\n",
        "teams/b/notes.txt": "f\n",
        "elsewhere/x.yaml": "g\n",
    })


LISTINGS = [
    pytest.param(["platform/", "teams/"], [], None,
                 ["platform/flavors.yaml", "platform/old/legacy.yml", "teams/a/README.yaml", "teams/a/queues.yaml",
                  "teams/b/queues.yaml"], id="directories-yaml-only"),
    pytest.param(["platform/", "teams/"], ["**/README*", "platform/old/"], None,
                 ["platform/flavors.yaml", "teams/a/queues.yaml", "teams/b/queues.yaml"], id="excludes-remove"),
    pytest.param(["teams/*/queues.yaml"], [], None, ["teams/a/queues.yaml", "teams/b/queues.yaml"],
                 id="glob-include"),
    pytest.param(["gitopsq.yaml"], [], None, ["gitopsq.yaml"], id="single-root-file"),
    pytest.param(["teams/b/"], [], [".txt"], ["teams/b/notes.txt"], id="other-suffixes"),
    pytest.param(["missing/"], [], None, [], id="missing-directory-lists-nothing"),
    pytest.param(["**/*.yml"], [], None, ["platform/old/legacy.yml"], id="whole-tree-glob"),
]


@pytest.mark.parametrize(("include", "exclude", "suffixes", "expected"), LISTINGS)
def test_list_files_applies_include_exclude_and_suffix(repo: GitRepo, layout: str, *, include: list[str],
                                                       exclude: list[str], suffixes: list[str] | None,
                                                       expected: list[str]) -> None:
    """list_files returns the files the patterns select (YAML by default), sorted by path."""
    source = open_source(str(repo.path))
    kwargs = {} if suffixes is None else {"suffixes": suffixes}
    assert [e.path for e in source.list_files(layout, include, exclude, **kwargs)] == expected
