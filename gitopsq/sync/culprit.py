"""Who made the drift a sync undoes (pure): the field managers of the live object, other than gitopsq's own
server-side apply, that own a field the sync is about to put back.

Read from ``metadata.managedFields`` *before* the corrective apply: a forced apply takes those fields over, and
the other manager's entry then loses them (or disappears). ``kubectl edit`` shows as ``kubectl-edit``,
``kubectl patch`` as ``kubectl-patch``, a controller under its own name.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from gitopsq.sync.diff import FieldChange
from gitopsq.sync.normalize import FIELD_MANAGER, OwnedFields, _walk_fields


def drift_managers(live: Mapping[str, Any], changes: Iterable[FieldChange]) -> tuple[str, ...]:
    """Managers owning any changed field, most recent first (each once); () when none can be named."""
    paths = [c.path for c in changes]
    found: list[tuple[str, str]] = []
    for entry in (live.get("metadata") or {}).get("managedFields") or ():
        name = str(entry.get("manager") or "")
        if not name or entry.get("subresource") or (name == FIELD_MANAGER and entry.get("operation") == "Apply"):
            continue
        leaves: set[Any] = set()
        every: set[Any] = set()
        _walk_fields((), entry.get("fieldsV1") or {}, leaves, every)
        owned = OwnedFields(frozenset(leaves), frozenset(every))
        if any(owned.owns(p) for p in paths):
            found.append((str(entry.get("time") or ""), name))
    out: list[str] = []
    for _, name in sorted(found, reverse=True):
        if name not in out:
            out.append(name)
    return tuple(out)
