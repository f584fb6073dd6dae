"""The sync plan: pairing desired, live and inventory into applies, prunes, conflicts and an inventory."""

from __future__ import annotations

from typing import Any

import pytest

from gitopsq.api.model import ObjectKey
from gitopsq.reconcile.inventory import Inventory, InventoryEntry
from gitopsq.reconcile.pairing import Plan, build_plan, inventory_after, key_of_document

KQ = "kueue.x-k8s.io"
V2 = "kueue.x-k8s.io/v1beta2"


def cq(name: str, cpu: str = "8", **meta: Any) -> dict[str, Any]:
    return {"apiVersion": V2, "kind": "ClusterQueue", "metadata": {"name": name, **meta},
            "spec": {"resourceGroups": [{"coveredResources": ["cpu"], "flavors": [
                {"name": "default", "resources": [{"name": "cpu", "nominalQuota": cpu}]}]}]}}


def lq(ns: str, name: str, queue: str) -> dict[str, Any]:
    return {"apiVersion": V2, "kind": "LocalQueue", "metadata": {"name": name, "namespace": ns},
            "spec": {"clusterQueue": queue}}


def ns(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}


def rf(name: str) -> dict[str, Any]:
    return {"apiVersion": V2, "kind": "ResourceFlavor", "metadata": {"name": name}, "spec": {}}


def live_of(doc: dict[str, Any], *, extra_spec: dict[str, Any] | None = None, owned: bool = True,
            **meta: Any) -> dict[str, Any]:
    """What the API server returns after gitopsq applied ``doc``: server metadata, managedFields, status."""
    obj = {**doc, "metadata": {**doc["metadata"], "uid": "u", "resourceVersion": "1", **meta}, "status": {"x": 1}}
    if extra_spec:
        obj["spec"] = {**obj.get("spec", {}), **extra_spec}
    if owned:
        obj["metadata"]["managedFields"] = [{"manager": "gitopsq", "operation": "Apply",
                                             "fieldsV1": {"f:spec": {"f:resourceGroups": {}, "f:clusterQueue": {}}}}]
    return obj


def key(doc: dict[str, Any]) -> ObjectKey:
    return key_of_document(doc)


def inv(*docs: dict[str, Any]) -> Inventory:
    return Inventory.of(InventoryEntry(key(d), d["apiVersion"].rsplit("/", 1)[-1]) for d in docs)


def plan(desired: list[dict[str, Any]], live: list[dict[str, Any]], inventory: Inventory, **kw: Any) -> Plan:
    return build_plan("rev", desired, {key(o): o for o in live}, inventory, **kw)


def test_first_sync_creates_everything_in_kind_order() -> None:
    """An empty cluster gets every object created: Namespaces, flavors, ClusterQueues, then LocalQueues."""
    desired = [lq("team-a", "q", "a"), cq("a"), ns("team-a"), rf("default")]
    p = plan(desired, [], Inventory())
    assert [(a.key.kind, a.reason) for a in p.applies] == [("Namespace", "create"), ("ResourceFlavor", "create"),
                                                           ("ClusterQueue", "create"), ("LocalQueue", "create")]
    assert not any(a.force for a in p.applies)
    assert p.desired_inventory == inv(*desired)


def test_only_the_changed_object_is_applied() -> None:
    """A quota change in one ClusterQueue applies that object alone, with the field-level change."""
    before = [cq("a"), cq("b")]
    after = [cq("a", "16"), cq("b")]
    p = plan(after, [live_of(d) for d in before], inv(*before))
    assert [a.key.name for a in p.applies] == ["a"]
    assert p.applies[0].reason == "changed" and p.applies[0].force
    assert [c.where for c in p.applies[0].changes] == [
        "spec.resourceGroups[0].flavors[default].resources[cpu].nominalQuota"]
    assert [k.name for k in p.unchanged] == ["b"]


def test_fields_set_by_others_or_defaults_are_not_drift() -> None:
    """Live fields gitopsq does not own (CRD defaults, other managers) leave the object unchanged."""
    d = cq("a")
    p = plan([d], [live_of(d, extra_spec={"stopPolicy": "None"}, labels={"x": "y"})], inv(d))
    assert p.applies == () and p.is_noop


def test_drift_is_classified_when_the_revision_is_the_previous_one() -> None:
    """A live edit of an object the same desired revision applied is drift, corrected with force."""
    d = cq("a", "8")
    edited = live_of(cq("a", "99"))
    p = plan([d], [edited], inv(d), previous={key(d): d})
    assert [(a.reason, a.force) for a in p.applies] == [("drift", True)]
    assert p.drifted == (key(d),)


def test_removed_field_we_own_is_a_change() -> None:
    """A field present only live counts when gitopsq owns it, because applying will remove it."""
    d = lq("t", "q", "a")
    live = live_of(d, extra_spec={"stopPolicy": "Hold"})
    live["metadata"]["managedFields"][0]["fieldsV1"]["f:spec"]["f:stopPolicy"] = {}
    p = plan([d], [live], inv(d))
    assert [(c.where, c.op) for c in p.applies[0].changes] == [("spec.stopPolicy", "removed")]


def test_existing_object_never_applied_by_us_is_adopted_without_force() -> None:
    """An equal object nobody applied through gitopsq is adopted (so it can be pruned later), never forced."""
    d = cq("a")
    p = plan([d], [live_of(d, owned=False)], Inventory())
    assert [(a.reason, a.force) for a in p.applies] == [("adopt", False)]


@pytest.mark.parametrize("meta", [
    pytest.param({"annotations": {"argocd.argoproj.io/tracking-id": "apps:kueue.x-k8s.io/ClusterQueue:/a"}},
                 id="argo-annotation"),
    pytest.param({"labels": {"kustomize.toolkit.fluxcd.io/name": "queues"}}, id="flux-label"),
])
def test_object_tracked_by_another_tool_is_reported_not_applied(meta: dict[str, Any]) -> None:
    """An object Argo CD or Flux tracks is a conflict: no apply, not in our inventory."""
    d = cq("a", "16")
    p = plan([d], [live_of(cq("a"), **meta)], Inventory())
    assert p.applies == ()
    assert [(c.key.name, c.wanted) for c in p.conflicts] == [("a", "apply")]
    assert p.desired_inventory == Inventory()


def test_argo_marker_in_git_is_never_applied() -> None:
    """Argo's tracking annotation written in Git is stripped from the body applied, and reported."""
    d = cq("a", annotations={"argocd.argoproj.io/tracking-id": "x", "keep": "me"})
    p = plan([d], [], Inventory())
    assert p.applies[0].body["metadata"]["annotations"] == {"keep": "me"}
    assert p.applies[0].dropped_markers == ("annotation argocd.argoproj.io/tracking-id",)


def test_prune_in_reverse_order_and_inventory_shrinks() -> None:
    """Objects gone from the revision are pruned LocalQueue before ClusterQueue before Namespace."""
    old = [ns("t"), cq("a"), lq("t", "q", "a"), cq("keep")]
    p = plan([cq("keep")], [live_of(d) for d in old], inv(*old))
    assert [k.key.kind for k in p.prunes] == ["LocalQueue", "ClusterQueue", "Namespace"]
    assert p.desired_inventory == inv(cq("keep"))


@pytest.mark.parametrize(("kwargs", "live_meta", "field"), [
    pytest.param({"prune": False}, {}, "pending_prune", id="prune-off-keeps-entry"),
    pytest.param({}, {"annotations": {"gitopsq.dev/prune": "disabled"}}, "orphaned", id="prune-disabled-annotation"),
    pytest.param({}, {"labels": {"app.kubernetes.io/instance": "argo-app"}}, "conflicts", id="argo-took-it-over"),
])
def test_objects_that_must_not_be_pruned(kwargs: dict[str, Any], live_meta: dict[str, Any], field: str) -> None:
    """An object leaving the revision is not pruned when prune is off, disabled on it, or another tool tracks it."""
    gone = cq("gone")
    p = plan([cq("a")], [live_of(cq("a")), live_of(gone, **live_meta)], inv(cq("a"), gone), **kwargs)
    assert p.prunes == ()
    listed = getattr(p, field)
    assert [getattr(x, "key", x).name for x in listed] == ["gone"]
    assert (key(gone) in p.desired_inventory.key_set()) is (field == "pending_prune")


def test_empty_revision_does_not_prune_everything_unless_allowed() -> None:
    """A revision with no objects does not empty the cluster unless allow_empty is set."""
    old = [cq("a")]
    guarded = plan([], [live_of(old[0])], inv(*old))
    assert guarded.empty_guard and guarded.prunes == () and guarded.pending_prune == (key(old[0]),)
    allowed = plan([], [live_of(old[0])], inv(*old), allow_empty=True)
    assert [p.key.name for p in allowed.prunes] == ["a"]


def test_object_already_gone_leaves_inventory() -> None:
    """An inventory entry whose object no longer exists is dropped without a prune call."""
    p = plan([], [], inv(cq("a")), allow_empty=True)
    assert p.gone == (key(cq("a")),) and p.prunes == () and p.desired_inventory == Inventory()


def test_inventory_after_partial_execution() -> None:
    """After a partial run the inventory keeps old entries and failed prunes, and adds only what applied."""
    old = [cq("a"), cq("gone1"), cq("gone2")]
    p = plan([cq("a", "9"), cq("new1"), cq("new2")], [live_of(d) for d in old], inv(*old))
    after = inventory_after(p, applied={key(cq("new1"))}, pruned={key(cq("gone1"))})
    assert sorted(k.name for k in after.key_set()) == ["a", "gone2", "new1"]


def test_duplicate_desired_keys_are_refused() -> None:
    """The same object twice in one revision is a programming error: validation must catch it first."""
    with pytest.raises(ValueError, match="twice"):
        plan([cq("a"), cq("a")], [], Inventory())


def test_cluster_scoped_namespace_field_is_ignored_in_identity() -> None:
    """A namespace written on a cluster-scoped kind does not change its identity."""
    assert key(cq("a", namespace="x")).namespace == ""
    assert key(lq("t", "q", "a")) == ObjectKey(group=KQ, kind="LocalQueue", namespace="t", name="q")


def test_assumed_unchanged_objects_skip_the_diff_but_not_existence_or_ownership() -> None:
    """A vouched-for key is unchanged without a diff (even unread); read as gone it is created; not ours, diffed."""
    d = cq("a", "8")
    drifted = live_of(cq("a", "99"))
    assumed = frozenset({key(d)})
    assert plan([d], [drifted], inv(d), assume_unchanged=assumed).unchanged == (key(d),)
    assert plan([d], [], inv(d), assume_unchanged=assumed).unchanged == (key(d),)  # not read at all
    gone = build_plan("rev", [d], {key(d): None}, inv(d), assume_unchanged=assumed)
    assert [a.reason for a in gone.applies] == ["create"]
    assert [a.reason for a in plan([d], [drifted], Inventory(), assume_unchanged=assumed).applies] == ["changed"]
