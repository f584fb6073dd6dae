"""Field-level diff: noise-free comparison of two documents."""

from __future__ import annotations

from typing import Any

import pytest

from gitopsq.reconcile.field_diff import ByName, FieldChange, diff, render_path
from gitopsq.reconcile.normalize import quantity_equal


def _cq(*flavors: tuple[str, str]) -> dict[str, Any]:
    return {"spec": {"resourceGroups": [{"coveredResources": ["cpu"], "flavors": [
        {"name": name, "resources": [{"name": "cpu", "nominalQuota": quota}]} for name, quota in flavors]}]}}


@pytest.mark.parametrize(("old", "new", "expected"), [
    pytest.param({"a": 1, "b": 2}, {"b": 2, "a": 1}, [], id="key-order-is-not-a-change"),
    pytest.param({"a": 1}, {"a": 2}, [("a", "changed", 1, 2)], id="scalar-changed"),
    pytest.param({}, {"a": {"b": 1}}, [("a", "added", None, {"b": 1})], id="subtree-added-once"),
    pytest.param({"a": 1, "z": 3}, {"a": 1}, [("z", "removed", 3, None)], id="field-removed"),
    pytest.param({"l": [1, 2]}, {"l": [2, 1]}, [("l", "changed", [1, 2], [2, 1])], id="plain-list-is-one-value"),
    pytest.param({"a": True}, {"a": 1}, [("a", "changed", True, 1)], id="bool-is-not-an-int"),
    pytest.param({"a": 1}, {"a": 1.0}, [], id="int-equals-float"),
])
def test_diff_table(old: dict[str, Any], new: dict[str, Any], expected: list[tuple[str, str, Any, Any]]) -> None:
    """Each pair of documents yields exactly the listed changes, with rendered paths."""
    got = [(c.where, c.op, c.old, c.new) for c in diff(old, new)]
    assert got == expected


def test_name_keyed_list_is_matched_by_name() -> None:
    """A quota change inside a name-keyed list is reported at the named item's field, not as a list change."""
    changes = diff(_cq(("default", "8"), ("spot", "4")), _cq(("default", "8"), ("spot", "6")))
    assert [c.where for c in changes] == ["spec.resourceGroups[0].flavors[spot].resources[cpu].nominalQuota"]
    assert changes[0].path[-2] == ByName("cpu")


def test_reordering_named_items_is_one_reordered_change() -> None:
    """Swapping two flavors is reported as one reorder of the list, because flavor order is preference."""
    changes = diff(_cq(("a", "1"), ("b", "1")), _cq(("b", "1"), ("a", "1")))
    assert [(c.where, c.op) for c in changes] == [("spec.resourceGroups[0].flavors", "reordered")]


def test_named_item_added_and_removed() -> None:
    """An item appearing and one disappearing in a name-keyed list are an add and a remove by name."""
    changes = diff(_cq(("a", "1")), _cq(("b", "1")))
    assert [(c.where, c.op) for c in changes] == [("spec.resourceGroups[0].flavors[b]", "added"),
                                                  ("spec.resourceGroups[0].flavors[a]", "removed")]


@pytest.mark.parametrize(("old", "new", "same"), [
    pytest.param("1", "1000m", True, id="milli-spelling"),
    pytest.param("1Gi", "1073741824", True, id="binary-suffix"),
    pytest.param(4, "4", True, id="int-or-string"),
    pytest.param("4", "5", False, id="different-value"),
    pytest.param("4", "four", False, id="unparseable"),
])
def test_quantity_equal_on_quota_fields(old: Any, new: Any, same: bool) -> None:
    """Quota fields compare by quantity value, so re-spelling a quota is not a change."""
    changes = diff(_cq(("a", old)), _cq(("a", new)), equal=quantity_equal)
    assert (changes == ()) is same


def test_quantity_equal_only_on_quantity_fields() -> None:
    """Outside quantity fields, "1" and "1000m" differ: the equality is not applied to names or labels."""
    assert diff({"metadata": {"labels": {"x": "1"}}}, {"metadata": {"labels": {"x": "1000m"}}},
                equal=quantity_equal) != ()


def test_to_json_and_render() -> None:
    """JSON form carries path, op, and only the sides that exist."""
    assert FieldChange(("a", 0, ByName("n"), "b"), "added", None, 1).to_json() == {"path": "a[0][n].b", "op": "added",
                                                                                   "new": 1}
    assert render_path(()) == ""
