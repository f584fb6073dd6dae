"""Field-level diff of two JSON-like documents, free of formatting and ordering noise.

Generic on purpose: the sync plan (desired vs live) and the PR plan (base vs head revision) both use it.

Rules:
1. Mappings are compared key by key; key order never matters.
2. A list whose items are all mappings with a distinct string ``name`` is compared item by item, matched by
   name (Kubernetes list-type ``map`` with key ``name``); a change of the names' order is one ``reordered``
   change on the list itself, because order carries meaning (a ClusterQueue's flavor order is its preference).
3. Two lists of mappings of the same length (``resourceGroups``) are compared item by item, by index.
4. Any other list is a single value: equal or ``changed`` as a whole.
5. Scalars are equal when ``equal`` (default ``==``, with ``1 == 1.0`` but ``True != 1``) says so; pass a
   quantity-aware ``equal`` to treat ``"1000m"`` and ``"1"`` as the same value.

Changes come out in a total order: the order of the paths in ``new``, then paths only in ``old``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal, TypeAlias, TypeGuard, cast

from gitopsq.api.raw_objects import JsonMapping, JsonValue

ChangeOp = Literal["added", "removed", "changed", "reordered"]


@dataclass(frozen=True, slots=True, order=True)
class ByName:
    """A path step into a name-keyed list: the item whose ``name`` is ``name``."""

    name: str

    def __str__(self) -> str:
        return f"[{self.name}]"


PathStep = str | int | ByName
FieldPath = tuple[PathStep, ...]
# What the diff walks: a document's values, the documents themselves (mappings) and lists or tuples of them.
Value: TypeAlias = JsonValue | JsonMapping | Sequence[JsonValue]
ScalarEqual = Callable[[FieldPath, Value, Value], bool]


@dataclass(frozen=True, slots=True)
class FieldChange:
    """One difference: at ``path``, ``old`` became ``new`` (None on the side where the field is absent)."""

    path: FieldPath
    op: ChangeOp
    old: Value = None
    new: Value = None

    @property
    def where(self) -> str:
        return render_path(self.path)

    def to_json(self) -> dict[str, Value]:
        out: dict[str, Value] = {"path": self.where, "op": self.op}
        if self.op != "added":
            out["old"] = self.old
        if self.op != "removed":
            out["new"] = self.new
        return out


def render_path(path: FieldPath) -> str:
    """``spec.resourceGroups[0].flavors[default].resources[cpu].nominalQuota``."""
    out = ""
    for step in path:
        if isinstance(step, int):
            out += f"[{step}]"
        elif isinstance(step, ByName):
            out += str(step)
        else:
            out += f".{step}" if out else step
    return out


def _default_equal(_: FieldPath, a: Value, b: Value) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    return bool(a == b)


def diff(old: JsonMapping | None, new: JsonMapping | None, *,
         equal: ScalarEqual | None = None) -> tuple[FieldChange, ...]:
    """Every field-level difference between ``old`` and ``new`` (either may be None: all added / removed)."""
    eq = equal or _default_equal
    out: list[FieldChange] = []
    _diff_value((), old if old is not None else {}, new if new is not None else {}, eq, out)
    return tuple(out)


def _named(items: Sequence[Value]) -> dict[str, JsonMapping] | None:
    """The items by name when the list is name-keyed (rule 2), else None."""
    if not items or not all(isinstance(i, Mapping) and isinstance(i.get("name"), str) for i in items):
        return None
    by_name = cast("dict[str, JsonMapping]", {i["name"]: i for i in cast("Sequence[JsonMapping]", items)})
    return by_name if len(by_name) == len(items) else None


def _diff_value(path: FieldPath, old: Value, new: Value, eq: ScalarEqual, out: list[FieldChange]) -> None:
    if isinstance(old, Mapping) and isinstance(new, Mapping):
        for key, value in new.items():
            if key not in old:
                out.append(FieldChange((*path, key), "added", None, value))
            else:
                _diff_value((*path, key), old[key], value, eq, out)
        for key, value in old.items():
            if key not in new:
                out.append(FieldChange((*path, key), "removed", value, None))
        return
    if _is_list(old) and _is_list(new):
        old_named, new_named = _named(old), _named(new)
        if old_named is not None and new_named is not None:
            _diff_named(path, old_named, new_named, eq, out)
            return
        if len(old) == len(new) and all(isinstance(i, Mapping) for i in (*old, *new)):
            for i, (a, b) in enumerate(zip(old, new, strict=True)):
                _diff_value((*path, i), a, b, eq, out)
            return
        if len(old) != len(new) or any(not _deep_equal((*path, i), a, b, eq) for i, (a, b) in
                                       enumerate(zip(old, new, strict=True))):
            out.append(FieldChange(path, "changed", old, new))
        return
    if not _deep_equal(path, old, new, eq):
        out.append(FieldChange(path, "changed", old, new))


def _diff_named(path: FieldPath, old: dict[str, JsonMapping], new: dict[str, JsonMapping],
                eq: ScalarEqual, out: list[FieldChange]) -> None:
    common_old = [n for n in old if n in new]
    common_new = [n for n in new if n in old]
    if common_old != common_new:
        out.append(FieldChange(path, "reordered", list(old), list(new)))
    for name, item in new.items():
        step = (*path, ByName(name))
        if name not in old:
            out.append(FieldChange(step, "added", None, item))
        else:
            _diff_value(step, old[name], item, eq, out)
    for name, item in old.items():
        if name not in new:
            out.append(FieldChange((*path, ByName(name)), "removed", item, None))


def _is_list(value: Value) -> TypeGuard[Sequence[JsonValue]]:
    return isinstance(value, list | tuple)


def _deep_equal(path: FieldPath, a: Value, b: Value, eq: ScalarEqual) -> bool:
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        return a.keys() == b.keys() and all(_deep_equal((*path, k), a[k], b[k], eq) for k in a)
    if _is_list(a) and _is_list(b):
        return len(a) == len(b) and all(_deep_equal((*path, i), x, y, eq) for i, (x, y) in
                                        enumerate(zip(a, b, strict=True)))
    if isinstance(a, Mapping) or isinstance(b, Mapping) or _is_list(a) or _is_list(b):
        return False
    return eq(path, a, b)
