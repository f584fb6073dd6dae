"""Which ref a revision name means, decided the same way for a local repository and for a remote's advertisement.

A name means one ref or nothing (docs/source.md "Revisions"):
- a full 40-hex commit id is always that commit, never a branch that happens to be named like one;
- ``refs/...`` is exactly that ref;
- any other name is looked up as a branch, a tag and (locally) a remote-tracking branch; when more than one of
  them exists the name is refused, naming each, instead of silently preferring one: whoever may push a tag must
  not be able to steer what a branch name resolves to.
"""

from __future__ import annotations

import re
from collections.abc import Collection

FULL_COMMIT_ID = re.compile(r"^[0-9a-fA-F]{40}$")
HEADS = "refs/heads/"


class AmbiguousRefError(ValueError):
    """A short name that matches several refs; ``refs`` names them all."""

    def __init__(self, name: str, refs: tuple[str, ...]) -> None:
        self.name, self.refs = name, refs
        super().__init__(f"it names {' and '.join(refs)}: give the full ref name ({' or '.join(refs)}) or a "
                         "commit id")


def is_full_commit_id(rev: str) -> bool:
    return FULL_COMMIT_ID.match(rev) is not None


def candidates(rev: str, *, remote: bool) -> tuple[str, ...]:
    """The refs a short name may mean: on a remote's advertisement ``origin/X`` is its branch X; in a local
    repository ``origin/X`` is the remote-tracking branch ``refs/remotes/origin/X``."""
    if rev.startswith("refs/"):
        return (rev,)
    names = [HEADS + rev, f"refs/tags/{rev}"]
    if remote:
        if rev.startswith("origin/"):
            names.append(HEADS + rev.removeprefix("origin/"))
    else:
        names.append(f"refs/remotes/{rev}")
    return tuple(names)


def pick_ref(rev: str, present: Collection[str], *, remote: bool) -> str | None:
    """The one ref ``rev`` names among ``present`` (None: none); raises AmbiguousRefError when it names several.
    A full commit id names no ref at all."""
    if is_full_commit_id(rev):
        return None
    found = tuple(name for name in candidates(rev, remote=remote) if name in present)
    if len(found) > 1:
        raise AmbiguousRefError(rev, found)
    return found[0] if found else None


def branch_ref(branch: str) -> str:
    """The full ref a followed branch name means: ``main`` and ``refs/heads/main`` are ``refs/heads/main``; a
    tag of the same name is never followed."""
    return branch if branch.startswith(HEADS) else HEADS + branch
