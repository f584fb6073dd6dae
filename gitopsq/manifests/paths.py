"""Path patterns of gitopsq.yaml (include, exclude, team paths), as pure functions.

The same rules as the Git source's listing (docs/config.md, docs/source.md), so that what the source lists and
what the pipeline keeps agree (tests check the two against each other):

1. An entry ending with ``/`` is a directory and covers every path below it.
2. Otherwise it is a glob over ``/``-separated paths: ``*`` and ``?`` stay inside one segment, ``[abc]`` is a
   class, a segment that is exactly ``**`` spans zero or more segments.
3. An entry without wildcards also covers the paths below it (``platform`` behaves as ``platform/``).
4. A leading ``./`` or ``/`` is ignored; matching is case-sensitive.

Specificity (which team owns a path when several patterns match): the longest literal prefix (the text before
the first wildcard) wins; then the pattern with fewer wildcards; then the earlier pattern.
"""

from __future__ import annotations

import re
from functools import lru_cache

_WILDCARDS = "*?["


def normalise(pattern: str) -> str:
    while pattern.startswith(("./", "/")):
        pattern = pattern[2:] if pattern.startswith("./") else pattern[1:]
    return pattern


def literal_prefix(pattern: str) -> str:
    """The text of ``pattern`` before its first wildcard."""
    pattern = normalise(pattern)
    cut = min((i for i in (pattern.find(c) for c in _WILDCARDS) if i >= 0), default=len(pattern))
    return pattern[:cut]


def specificity(pattern: str) -> tuple[int, int]:
    """Bigger is more specific: (literal prefix length, minus the number of wildcards)."""
    pattern = normalise(pattern)
    return (len(literal_prefix(pattern)), -sum(pattern.count(c) for c in _WILDCARDS))


@lru_cache(maxsize=2048)
def _regex(pattern: str) -> re.Pattern[str]:
    pattern = normalise(pattern)
    if pattern.endswith("/"):
        pattern += "**"
    elif not any(c in pattern for c in _WILDCARDS):
        return re.compile(re.escape(pattern) + "(?:/.*)?")
    segments = pattern.split("/")
    out = []
    for index, segment in enumerate(segments):
        last = index == len(segments) - 1
        if segment == "**":
            out.append(".*" if last else "(?:[^/]*/)*")
        else:
            out.append(_segment(segment) + ("" if last else "/"))
    return re.compile("".join(out))


def _segment(segment: str) -> str:
    out = []
    i = 0
    while i < len(segment):
        ch = segment[i]
        if ch == "*":
            while i + 1 < len(segment) and segment[i + 1] == "*":
                i += 1
            out.append("[^/]*")
        elif ch == "?":
            out.append("[^/]")
        elif ch == "[" and (end := segment.find("]", i + 2)) != -1:
            body = segment[i + 1 : end]
            out.append("[" + ("^" + body[1:] if body.startswith("!") else body).replace("\\", "\\\\") + "]")
            i = end
        else:
            out.append(re.escape(ch))
        i += 1
    return "".join(out)


def matches(path: str, pattern: str) -> bool:
    """Whether repository path ``path`` is covered by ``pattern``."""
    return _regex(pattern).fullmatch(path) is not None


def is_yaml(path: str) -> bool:
    return path.endswith((".yaml", ".yml"))


def selected(path: str, include: tuple[str, ...], exclude: tuple[str, ...] = ()) -> bool:
    """A YAML file covered by an include pattern and by no exclude pattern."""
    return (is_yaml(path) and any(matches(path, p) for p in include)
            and not any(matches(path, p) for p in exclude))


def pattern_problem(pattern: str) -> str | None:
    """Why ``pattern`` is not usable, or None."""
    if not pattern.strip():
        return "an empty pattern"
    if "\\" in pattern:
        return "backslashes: paths use '/'"
    if ".." in normalise(pattern).split("/"):
        return "'..' segments: patterns are relative to the repository root"
    return None
