"""Include / exclude path patterns of gitopsq.yaml (docs/config.md), for listing trees.

Matching itself is the core's (`gitopsq.manifests.paths`), so the files the source lists and the files the
checker selects are decided by one implementation. This module adds what tree walks need: literal prefixes
to prune the walk, and `PathFilter`.

1. An entry ending with ``/`` is a directory: it covers every path below it, at any depth.
2. Any other entry is a glob over ``/``-separated paths: ``*`` and ``?`` stay inside one segment, ``[abc]`` is a
   character class, and a segment that is exactly ``**`` spans zero or more whole segments (``**/x`` also
   matches ``x`` at the root; a trailing ``/**`` matches everything below, not the directory itself).
3. An entry without any wildcard also covers the paths below it when it names a directory (``platform``
   behaves as ``platform/``), as in .gitignore.
4. Patterns are relative to the repository root; a leading ``./`` or ``/`` is ignored. Matching is
   case-sensitive, as Git paths are.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from gitopsq.manifests.paths import matches, normalise

__all__ = ["PathFilter", "has_wildcard", "is_directory_pattern", "literal_prefix", "matches", "normalise"]

_WILDCARDS = frozenset("*?[")


def is_directory_pattern(pattern: str) -> bool:
    return normalise(pattern).endswith("/")


def has_wildcard(pattern: str) -> bool:
    return any(ch in _WILDCARDS for ch in pattern)


def literal_prefix(pattern: str) -> str:
    """The longest path every match of ``pattern`` starts with ('' for the root), used to prune tree walks.

    ``teams/*/queues.yaml`` → ``teams``; ``platform/`` → ``platform``; ``gitopsq.yaml`` → ``gitopsq.yaml``
    (a literal names the file or directory itself); ``**/x`` → ''.
    """
    normalised = normalise(pattern)
    if not has_wildcard(normalised):
        return normalised.rstrip("/")
    literal: list[str] = []
    for segment in normalised.split("/"):
        if has_wildcard(segment):
            break
        literal.append(segment)
    return "/".join(literal)


@dataclass(frozen=True, slots=True)
class PathFilter:
    """Which files of a tree to list: covered by an include, by no exclude, and ending with a suffix.

    ``suffixes`` None keeps every file name; the default keeps the YAML files docs/config.md asks for.
    """

    include: tuple[str, ...]
    exclude: tuple[str, ...] = ()
    suffixes: tuple[str, ...] | None = (".yaml", ".yml")

    @classmethod
    def of(
        cls,
        include: Sequence[str],
        exclude: Sequence[str] = (),
        suffixes: Sequence[str] | None = (".yaml", ".yml"),
    ) -> PathFilter:
        return cls(tuple(include), tuple(exclude), None if suffixes is None else tuple(suffixes))

    def selects(self, path: str) -> bool:
        if self.suffixes is not None and not path.endswith(self.suffixes):
            return False
        if not any(matches(path, p) for p in self.include):
            return False
        return not any(matches(path, p) for p in self.exclude)

    def roots(self) -> tuple[str, ...]:
        """The smallest set of directories whose subtrees hold every file an include can match."""
        prefixes = sorted({literal_prefix(p) for p in self.include})
        kept: list[str] = []
        for prefix in prefixes:
            if not any(prefix == k or prefix.startswith(k + "/") or k == "" for k in kept):
                kept.append(prefix)
        return tuple(kept)
