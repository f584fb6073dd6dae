"""What changed between two revisions, object by object, and which objects are defined twice.

Objects are paired by identity (group, kind, namespace, name; the API version is ignored, since v1beta1 and
v1beta2 name the same object). Rules, in order:

1. An identity only in the new revision is a CREATE; only in the old one, a DELETE.
2. An identity in both, in the same file, is an UPDATE when the content differs (no change otherwise).
3. An identity in both but in another file is a move: a DELETE at the old path (``moved_to`` set) and a CREATE
   at the new path (``old_path`` set), so that each side is judged against the team owning that path.
4. An identity defined more than once in one revision is a `Duplicate`; the pairing uses its first
   definition (by path, then line) and the engine denies the revision.
5. Changes come out sorted by path, line, then identity.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from gitopsq.policy.language import Change, Duplicate, ObjectKey, Operation, SourcedObject


def _place(item: SourcedObject) -> tuple[str, int]:
    return (item.path, item.line or 0)


def _index(objects: Iterable[SourcedObject]) -> dict[ObjectKey, list[SourcedObject]]:
    index: dict[ObjectKey, list[SourcedObject]] = {}
    for item in sorted(objects, key=_place):
        index.setdefault(item.key, []).append(item)
    return index


def find_duplicates(objects: Iterable[SourcedObject]) -> tuple[Duplicate, ...]:
    """Identities defined more than once, with every place they appear."""
    return tuple(
        Duplicate(key, tuple((o.path, o.line) for o in items))
        for key, items in sorted(_index(objects).items())
        if len(items) > 1
    )


def diff_revisions(old_objects: Iterable[SourcedObject], new_objects: Iterable[SourcedObject]) -> list[Change]:
    """The changes that turn the old revision into the new one (see the module rules)."""
    old = {key: items[0] for key, items in _index(old_objects).items()}
    new = {key: items[0] for key, items in _index(new_objects).items()}
    changes: list[Change] = []
    for key, after in new.items():
        before = old.get(key)
        if before is None:
            changes.append(Change(Operation.CREATE, after.path, key, after.object, None, after.line))
        elif before.path != after.path:
            changes.append(Change(Operation.DELETE, before.path, key, None, before.object, before.line,
                                  moved_to=after.path))
            changes.append(Change(Operation.CREATE, after.path, key, after.object, None, after.line,
                                  old_path=before.path))
        elif before.object != after.object:
            changes.append(Change(Operation.UPDATE, after.path, key, after.object, before.object, after.line))
    for key, before in old.items():
        if key not in new:
            changes.append(Change(Operation.DELETE, before.path, key, None, before.object, before.line))
    changes.sort(key=lambda c: (c.path, c.line or 0, c.key, c.operation.value))
    return changes


def desired_by_kind(objects: Iterable[SourcedObject]) -> dict[str, list[Mapping[str, Any]]]:
    """The ``desired`` variable: every object of the new revision grouped by kind, in file order."""
    grouped: dict[str, list[Mapping[str, Any]]] = {}
    for item in sorted(objects, key=_place):
        grouped.setdefault(item.key.kind, []).append(item.object)
    return grouped


def sourced(path: str, objects: Sequence[Mapping[str, Any]]) -> list[SourcedObject]:
    """Helper for callers and tests: every object of one file, without line numbers."""
    return [SourcedObject(path, obj) for obj in objects]
