"""Inventory ids and round trips; apply and prune ordering."""

from __future__ import annotations

import pytest

from gitopsq.api.model import ObjectKey
from gitopsq.reconcile.inventory import Inventory, InventoryEntry, InventoryFormatError, format_id, parse_id
from gitopsq.reconcile.ordering import apply_order, prune_order


def k(kind: str, name: str, ns: str = "", group: str = "kueue.x-k8s.io") -> ObjectKey:
    return ObjectKey(group=group, kind=kind, namespace=ns, name=name)


@pytest.mark.parametrize(("key", "text"), [
    pytest.param(k("LocalQueue", "q", "team-a"), "team-a_q_kueue.x-k8s.io_LocalQueue", id="namespaced"),
    pytest.param(k("ClusterQueue", "a"), "_a_kueue.x-k8s.io_ClusterQueue", id="cluster-scoped"),
    pytest.param(k("Namespace", "team-a", group=""), "_team-a__Namespace", id="core-group"),
])
def test_inventory_id_round_trip(key: ObjectKey, text: str) -> None:
    """Ids use Flux's <namespace>_<name>_<group>_<kind> form and parse back to the same key."""
    assert format_id(key) == text
    assert parse_id(text) == key


@pytest.mark.parametrize("bad", ["a_b_c", "_ _x", "ns__grp_Kind", "", "a_b_c_d_e"], ids=str)
def test_inventory_id_rejects_malformed(bad: str) -> None:
    """A hand-edited id that is not four fields with a name and a kind is refused."""
    with pytest.raises(InventoryFormatError):
        parse_id(bad.replace(" ", ""))


def test_inventory_status_round_trip_is_sorted_and_deduplicated() -> None:
    """to_status/from_status keep one entry per key in key order."""
    inv = Inventory.of([InventoryEntry(k("ClusterQueue", "b"), "v1beta2"), InventoryEntry(k("ClusterQueue", "a"),
                                                                                          "v1beta1"),
                        InventoryEntry(k("ClusterQueue", "a"), "v1beta2")])
    status = inv.to_status()
    assert status == {"entries": [{"id": "_a_kueue.x-k8s.io_ClusterQueue", "v": "v1beta2"},
                                  {"id": "_b_kueue.x-k8s.io_ClusterQueue", "v": "v1beta2"}]}
    assert Inventory.from_status(status) == inv
    assert Inventory.from_status(None) == Inventory()
    assert inv.entries[0].api_version == "kueue.x-k8s.io/v1beta2"


def test_inventory_from_status_rejects_garbage() -> None:
    """Entries without string id and v are reported, not silently skipped (that would lose prune targets)."""
    with pytest.raises(InventoryFormatError):
        Inventory.from_status({"entries": [{"id": 3}]})


def test_apply_order_is_total_and_prune_is_its_reverse() -> None:
    """Every kind before the kinds that name it (docs of gitopsq.reconcile.ordering); names break ties."""
    keys = [k("AdmissionCheck", "ac"), k("LocalQueue", "q", "t"), k("ClusterQueue", "b"), k("ClusterQueue", "a"),
            k("Cohort", "c"), k("ResourceFlavor", "f"), k("PriorityClass", "p", group="scheduling.k8s.io"),
            k("Namespace", "t", group=""), k("WorkloadPriorityClass", "w"), k("MultiKueueConfig", "mc"),
            k("Topology", "topo"), k("ProvisioningRequestConfig", "prc"), k("MultiKueueCluster", "mk")]
    ordered = apply_order(keys)
    assert [(x.kind, x.name) for x in ordered] == [("Namespace", "t"), ("PriorityClass", "p"), ("Topology", "topo"),
                                                   ("ResourceFlavor", "f"), ("MultiKueueCluster", "mk"),
                                                   ("MultiKueueConfig", "mc"), ("ProvisioningRequestConfig", "prc"),
                                                   ("AdmissionCheck", "ac"), ("Cohort", "c"), ("ClusterQueue", "a"),
                                                   ("ClusterQueue", "b"), ("LocalQueue", "q"),
                                                   ("WorkloadPriorityClass", "w")]
    assert prune_order(keys) == tuple(reversed(ordered))
