"""Which live objects a sync reads before planning, and which of them need no diff."""

from __future__ import annotations

from collections.abc import Mapping

from gitopsq.api.model import ObjectKey
from gitopsq.api.raw_objects import JsonMapping, JsonObject, resource_version
from gitopsq.cluster.apply import KubeRest, read_live, read_objects
from gitopsq.reconcile.inventory import Inventory, version_of
from gitopsq.reconcile.pairing import key_of_document

TARGETED_READ_LIMIT = 200  # above this many changed objects, LISTs beat one GET each


def live_for_plan(rest: KubeRest, sha: str, last_applied: str | None, docs: tuple[JsonMapping, ...],
                  inventory: Inventory, *, verified: Mapping[ObjectKey, str] | None,
                  applied: Mapping[ObjectKey, JsonMapping] | None,
                  selector: str) -> tuple[dict[ObjectKey, JsonObject | None], frozenset[ObjectKey]]:
    """Live objects for the plan of ``sha``, and the keys that need no diff. ``verified``: key → resourceVersion
    at which live was seen equal to ``last_applied``; ``applied``: that revision's desired objects (both known
    only to a warm syncer).

    1. Warm, new revision: GET only the objects that changed in Git, are new, or leave; the rest are
       assumed unchanged (drift on them is found by the next no-change reconcile).
    2. Warm, same revision: LIST everything, but skip the diff where the resourceVersion is the one seen
       equal last time.
    3. Cold (first pass of this process): LIST and diff everything.
    """
    versions = {key_of_document(d): version_of(str(d.get("apiVersion"))) for d in docs}
    inventory_keys = inventory.by_key()
    all_keys = set(versions.items()) | {(e.key, e.version) for e in inventory.entries}
    if verified is not None and applied is not None and sha != last_applied:
        changed = {k for k, d in zip(versions, docs, strict=True)
                   if k not in inventory_keys or applied.get(k) != d or k not in verified}
        changed |= set(inventory_keys) - set(versions)
        if len(changed) <= TARGETED_READ_LIMIT:
            live = read_objects(rest, [(k, v) for k, v in all_keys if k in changed])
            return live, frozenset(set(versions) - changed)
    live = read_live(rest, all_keys, selector=selector)
    if verified is None or sha != last_applied:
        return live, frozenset()
    same = {k for k, rv in verified.items() if resource_version(live.get(k) or {}) == rv}
    return live, frozenset(same)
