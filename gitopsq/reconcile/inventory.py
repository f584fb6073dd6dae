"""The inventory: which objects gitopsq applied, kept in the cluster so that pruning survives restarts.

It lives in the GitSource's ``status.inventory.entries`` (our CRD), one entry per object, in Flux's id format
``<namespace>_<name>_<group>_<kind>`` (namespace and group empty for cluster-scoped and core objects) plus
``v``, the API version the object was applied with. Kubernetes names, namespaces, groups and kinds never
contain ``_``, so the id splits back unambiguously.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from gitopsq.api.git_source import InventoryField
from gitopsq.api.model import ObjectKey


@dataclass(frozen=True, slots=True, order=True)
class InventoryEntry:
    """One object gitopsq applied: its identity and the API version it was applied with."""

    key: ObjectKey
    version: str

    @property
    def id(self) -> str:
        return format_id(self.key)

    @property
    def api_version(self) -> str:
        return f"{self.key.group}/{self.version}" if self.key.group else self.version


class InventoryFormatError(ValueError):
    """An inventory entry in the cluster cannot be read (someone edited the status by hand)."""


def format_id(key: ObjectKey) -> str:
    return f"{key.namespace}_{key.name}_{key.group}_{key.kind}"


def parse_id(text: str) -> ObjectKey:
    parts = text.split("_")
    if len(parts) != 4 or not parts[1] or not parts[3]:
        raise InventoryFormatError(f"inventory id {text!r} is not <namespace>_<name>_<group>_<kind>")
    namespace, name, group, kind = parts
    return ObjectKey(group=group, kind=kind, namespace=namespace, name=name)


def version_of(api_version: str) -> str:
    """``kueue.x-k8s.io/v1beta2`` → ``v1beta2``; ``v1`` → ``v1``."""
    return api_version.rsplit("/", 1)[-1]


@dataclass(frozen=True, slots=True)
class Inventory:
    """A set of entries, always sorted by key (a total order), at most one entry per key."""

    entries: tuple[InventoryEntry, ...] = ()

    @staticmethod
    def of(entries: Iterable[InventoryEntry]) -> Inventory:
        by_key = {e.key: e for e in entries}
        return Inventory(tuple(sorted(by_key.values())))

    def key_set(self) -> frozenset[ObjectKey]:
        return frozenset(e.key for e in self.entries)

    def by_key(self) -> dict[ObjectKey, InventoryEntry]:
        """The entries by key (build once; lookups in a loop stay O(1))."""
        return {e.key: e for e in self.entries}

    def __len__(self) -> int:
        return len(self.entries)

    def to_status(self) -> InventoryField:
        """The ``status.inventory`` value of the GitSource."""
        return {"entries": [{"id": e.id, "v": e.version} for e in self.entries]}

    @staticmethod
    def from_status(value: Mapping[str, object] | None) -> Inventory:
        """Read ``status.inventory`` (as found: it may have been edited by hand); a missing inventory is an empty
        one. Raises InventoryFormatError."""
        if not value:
            return Inventory()
        entries = value.get("entries") or []
        if not isinstance(entries, list):
            raise InventoryFormatError("status.inventory.entries is not a list")
        out = []
        for raw in entries:
            if not isinstance(raw, Mapping) or not isinstance(raw.get("id"), str) or not isinstance(raw.get("v"), str):
                raise InventoryFormatError(f"inventory entry {raw!r} needs string fields id and v")
            out.append(InventoryEntry(parse_id(raw["id"]), raw["v"]))
        return Inventory.of(out)
