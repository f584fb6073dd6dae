"""Desired vs live vs inventory → a Plan: what one sync must apply, prune, leave alone and report.

Pure: the shell reads the live objects and the inventory, this module decides, a dumb executor carries the
Plan out. Pairing (gitops-engine style) for every key in desired ∪ inventory:

1. desired, not live                      → apply (create)
2. desired, live tracked by Argo CD/Flux   → conflict: neither taken over nor pruned, reported
3. desired, live differs on a field we set or own (see below) → apply (``changed``, or ``drift`` when the desired
   object is the one the previous revision applied, i.e. someone edited the cluster)
4. desired, live not in our inventory and never applied by gitopsq → apply (``adopt``), without forcing: a
   conflict with another field manager is reported, not overridden
5. desired, live equal                     → unchanged
6. inventory only, live gone               → dropped from the inventory
7. inventory only, live tracked by another tool → conflict (not pruned), dropped from the inventory
8. inventory only, live annotated ``gitopsq.dev/prune: disabled`` → orphaned: left in place, dropped
9. inventory only, ``prune`` off           → kept in the inventory, reported as pending
10. inventory only, the revision is empty and ``allow_empty`` off → not pruned (refusing to empty the cluster
    is Argo CD's ``allowEmpty`` safety), kept, reported
11. inventory only                         → prune
"Differs" compares the desired document with the normalised live object: a field present in desired and absent
or different live counts; a field present only live counts only when gitopsq owns it (managedFields), because
then applying will remove it. Fields other managers or CRD defaults set are not drift.
Applies go out in `ordering.apply_order`, prunes in reverse. ``force`` is set only for objects in our inventory,
whose fields we own: the executor never forces on an object someone else created.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final, Literal, cast

from gitopsq.api.model import KINDS, ObjectKey
from gitopsq.api.raw_objects import JsonMapping, JsonObject, annotations_of
from gitopsq.reconcile.field_diff import FieldChange, diff
from gitopsq.reconcile.inventory import Inventory, InventoryEntry, version_of
from gitopsq.reconcile.normalize import (
    drift_managers,
    foreign_manager,
    normalize_live,
    owned_fields,
    quantity_equal,
    strip_foreign_markers,
)
from gitopsq.reconcile.ordering import apply_rank

PRUNE_ANNOTATION: Final = "gitopsq.dev/prune"
ApplyReason = Literal["create", "changed", "drift", "adopt"]


@dataclass(frozen=True, slots=True)
class ApplyAction:
    """Server-side apply ``body`` (field manager gitopsq); ``force`` only when the object is ours."""

    key: ObjectKey
    api_version: str
    reason: ApplyReason
    body: JsonMapping = field(compare=False)
    changes: tuple[FieldChange, ...] = ()
    force: bool = False
    dropped_markers: tuple[str, ...] = ()
    managers: tuple[str, ...] = ()  # drift: the field managers that made it (gitopsq.sync.culprit)


@dataclass(frozen=True, slots=True)
class PruneAction:
    key: ObjectKey
    api_version: str


@dataclass(frozen=True, slots=True)
class Conflict:
    """An object another tool manages: gitopsq neither applies nor prunes it."""

    key: ObjectKey
    manager: str
    wanted: Literal["apply", "prune"]


@dataclass(frozen=True, slots=True)
class Plan:
    """The value a sync executes. Sequences are in execution order (applies) or reverse order (prunes)."""

    revision: str
    applies: tuple[ApplyAction, ...] = ()
    prunes: tuple[PruneAction, ...] = ()
    unchanged: tuple[ObjectKey, ...] = ()
    conflicts: tuple[Conflict, ...] = ()
    orphaned: tuple[ObjectKey, ...] = ()  # rule 8: prune disabled on the object
    pending_prune: tuple[ObjectKey, ...] = ()  # rules 9 and 10: left in place and in the inventory
    gone: tuple[ObjectKey, ...] = ()  # rule 6
    empty_guard: bool = False  # rule 10 applied
    desired_inventory: Inventory = field(default_factory=Inventory)
    previous_inventory: Inventory = field(default_factory=Inventory)

    @property
    def is_noop(self) -> bool:
        return not self.applies and not self.prunes and self.desired_inventory == self.previous_inventory

    @property
    def drifted(self) -> tuple[ObjectKey, ...]:
        return tuple(a.key for a in self.applies if a.reason == "drift")


def api_version_of(doc: JsonMapping) -> str:
    return str(doc.get("apiVersion", ""))


def key_of_document(doc: JsonMapping) -> ObjectKey:
    """The identity of a wire document (group from apiVersion; namespace dropped for cluster-scoped kinds)."""
    api_version = api_version_of(doc)
    group = api_version.rsplit("/", 1)[0] if "/" in api_version else ""
    kind = str(doc.get("kind", ""))
    meta = cast(JsonMapping, doc.get("metadata") or {})
    namespaced = KINDS.get(kind, (group, True))[1]
    namespace = str(meta.get("namespace") or "") if namespaced else ""
    return ObjectKey(group=group, kind=kind, namespace=namespace, name=str(meta.get("name", "")))


def build_plan(
    revision: str,
    desired: Sequence[JsonMapping],
    live: Mapping[ObjectKey, JsonMapping | None],
    inventory: Inventory,
    *,
    prune: bool = True,
    allow_empty: bool = False,
    previous: Mapping[ObjectKey, JsonMapping] | None = None,
    assume_unchanged: frozenset[ObjectKey] = frozenset(),
    labels: Mapping[str, str] | None = None,
) -> Plan:
    """Pair desired, live and inventory (module docstring) into a Plan. ``live`` maps a key to the object the
    API returned, or to None / nothing when it does not exist. Raises ValueError on duplicate desired keys
    (validation rejects those before a plan is built).

    ``assume_unchanged`` names keys the caller vouches for (it saw them equal to the same desired document at
    the same resourceVersion, or they did not change in Git since it last did): when live, they are unchanged
    without a diff, which keeps a no-change reconcile of thousands of objects cheap. For such a key, absence
    from ``live`` means "not read" (the caller skipped the GET), while a None value still means "gone".

    ``labels`` are added to every applied object (gitopsq's source label, which lets the shell LIST only the
    objects of one source); they count in the diff, so an object missing them is updated once."""
    wanted: dict[ObjectKey, JsonMapping] = {}
    for doc in desired:
        key = key_of_document(doc)
        if key in wanted:
            raise ValueError(f"{key} appears twice in revision {revision}")
        wanted[key] = doc
    in_inventory = inventory.by_key()

    applies: list[ApplyAction] = []
    unchanged: list[ObjectKey] = []
    conflicts: list[Conflict] = []
    for key, doc in wanted.items():
        current = live.get(key)
        if current is not None and (manager := foreign_manager(current)) is not None:
            conflicts.append(Conflict(key, manager, "apply"))
            continue
        if key in assume_unchanged and key in in_inventory and (current is not None or key not in live):
            unchanged.append(key)
            continue
        clean, dropped = strip_foreign_markers(doc)
        body = _with_labels(clean, labels)
        action = _apply_action(key, body, dropped, current=current, in_inventory=in_inventory,
                               was_applied=previous is not None and key in previous
                               and strip_foreign_markers(previous[key])[0] == clean)
        if action is None:
            unchanged.append(key)
        else:
            applies.append(action)

    prunes: list[PruneAction] = []
    orphaned: list[ObjectKey] = []
    pending: list[ObjectKey] = []
    gone: list[ObjectKey] = []
    leaving = [e for e in inventory.entries if e.key not in wanted]
    empty_guard = bool(leaving) and not wanted and not allow_empty and prune
    for entry in leaving:
        current = live.get(entry.key)
        if current is None:
            gone.append(entry.key)
        elif (manager := foreign_manager(current)) is not None:
            conflicts.append(Conflict(entry.key, manager, "prune"))
        elif annotations_of(current).get(PRUNE_ANNOTATION) == "disabled":
            orphaned.append(entry.key)
        elif not prune or empty_guard:
            pending.append(entry.key)
        else:
            prunes.append(PruneAction(entry.key, entry.api_version))

    conflict_keys = {c.key for c in conflicts}
    target = [InventoryEntry(k, version_of(api_version_of(d))) for k, d in wanted.items() if k not in conflict_keys]
    target += [in_inventory[k] for k in pending]
    return Plan(
        revision=revision,
        applies=tuple(sorted(applies, key=lambda a: apply_rank(a.key))),
        prunes=tuple(sorted(prunes, key=lambda p: apply_rank(p.key), reverse=True)),
        unchanged=tuple(sorted(unchanged, key=apply_rank)),
        conflicts=tuple(sorted(conflicts, key=lambda c: apply_rank(c.key))),
        orphaned=tuple(sorted(orphaned, key=apply_rank)),
        pending_prune=tuple(sorted(pending, key=apply_rank)),
        gone=tuple(sorted(gone, key=apply_rank)),
        empty_guard=empty_guard,
        desired_inventory=Inventory.of(target),
        previous_inventory=inventory,
    )


def _apply_action(key: ObjectKey, body: JsonMapping, dropped: tuple[str, ...], *,
                  current: JsonMapping | None, in_inventory: Mapping[ObjectKey, InventoryEntry],
                  was_applied: bool) -> ApplyAction | None:
    api_version = api_version_of(body)
    if current is None:
        return ApplyAction(key, api_version, "create", body, diff(None, body), False, dropped)
    owned = owned_fields(current)
    changes = tuple(c for c in diff(normalize_live(current), body, equal=quantity_equal)
                    if c.op != "removed" or owned.owns(c.path))
    ours = key in in_inventory
    if changes:
        reason: ApplyReason = "drift" if was_applied and ours else "changed"
        managers = drift_managers(current, changes) if reason == "drift" else ()
        return ApplyAction(key, api_version, reason, body, changes, ours, dropped, managers)
    if not owned.applied and not ours:
        return ApplyAction(key, api_version, "adopt", body, (), False, dropped)
    return None


def _with_labels(doc: JsonObject, labels: Mapping[str, str] | None) -> JsonObject:
    if not labels:
        return doc
    meta = dict(cast(JsonMapping, doc.get("metadata") or {}))
    meta["labels"] = {**cast(JsonMapping, meta.get("labels") or {}), **labels}
    return {**doc, "metadata": meta}


def inventory_after(plan: Plan, applied: set[ObjectKey], pruned: set[ObjectKey]) -> Inventory:
    """The inventory to record after a (possibly partial) execution: what was there before, plus what was
    applied, minus what was pruned or is gone, minus objects another tool now tracks. An object whose apply
    failed stays out unless it was already ours; a prune that failed keeps its entry, so it is retried."""
    target = plan.desired_inventory.by_key()
    before = plan.previous_inventory.by_key()
    dropped = set(plan.gone) | set(plan.orphaned) | {c.key for c in plan.conflicts} | pruned
    keep: dict[ObjectKey, InventoryEntry] = {k: e for k, e in before.items() if k not in dropped}
    for key in applied | set(plan.unchanged):
        if key in target:
            keep[key] = target[key]
    return Inventory.of(keep.values())
