"""TAS placement (gitopsq.admission.tas_placement) against Kueue v0.19.2's expectations.

Each test names its source of truth: a case of ``TestFindTopologyAssignments`` in Kueue's
pkg/cache/scheduler/tas_cache_test.go, with the same nodes, request and expected assignment or reason (default
feature gates: TASProfileMixed on, balanced placement and preferred node affinity off).
"""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from gitopsq.admission.tas_domains import BoundPod, DomainTree, TasCluster, TasNode, TasTopology, non_tas_usage
from gitopsq.admission.tas_filter import PodConstraints
from gitopsq.admission.tas_fit import usage_of
from gitopsq.admission.tas_placement import PlacementResult, place
from gitopsq.admission.tas_requests import TopologyRequest
from gitopsq.api import model as m
from gitopsq.api.frozenmap import FrozenMap

BLOCK, RACK, HOST = "cloud.com/topology-block", "cloud.com/topology-rack", "kubernetes.io/hostname"
THREE = (BLOCK, RACK, HOST)
TWO = (BLOCK, RACK)
GI = 1024 ** 3 * 1000


def node(name: str, *, cpu: float = 0, mem_gi: float = 0, pods: int = 0, labels: Mapping[str, str] | None = None,
         taints: tuple[m.Taint, ...] = (), ready: bool = True, unschedulable: bool = False,
         non_tas: Mapping[str, int] | None = None, extra: Mapping[str, int] | None = None) -> TasNode:
    alloc = {"cpu": int(cpu * 1000), "pods": pods * 1000}
    if mem_gi:
        alloc["memory"] = int(mem_gi * GI)
    alloc.update(extra or {})
    return TasNode(name, labels or {}, alloc, taints=taints, ready=ready, unschedulable=unschedulable,
                   non_tas_usage=non_tas)


def bnode(block: str, rack: str, host: str, cpu: float, *, mem_gi: float = 0, pods: int = 10) -> TasNode:
    return node(f"{block}-{rack}-{host}", cpu=cpu, mem_gi=mem_gi, pods=pods,
                labels={BLOCK: block, RACK: rack, HOST: host})


# Kueue's defaultNodes: b1/r1/x3, b1/r2/{x5,x1,x6}, b2/r1/x2, b2/r2/x4 (the last one bigger).
DEFAULT = (bnode("b1", "r1", "x3", 1, mem_gi=1), bnode("b1", "r2", "x5", 1, mem_gi=1),
           bnode("b1", "r2", "x1", 1, mem_gi=1), bnode("b1", "r2", "x6", 1, mem_gi=1),
           bnode("b2", "r1", "x2", 1, mem_gi=1), bnode("b2", "r2", "x4", 2, mem_gi=4, pods=40))
# Kueue's scatteredNodes.
SCATTERED = (bnode("b1", "r1", "x3", 4, mem_gi=1), bnode("b1", "r1", "x5", 1, mem_gi=1),
             bnode("b1", "r1", "x1", 1, mem_gi=1), bnode("b2", "r1", "x6", 2, mem_gi=1),
             bnode("b2", "r1", "x2", 1, mem_gi=1))


def tree_of(nodes: tuple[TasNode, ...], levels: tuple[str, ...], node_labels: Mapping[str, str] | None = None
            ) -> DomainTree:
    cluster = TasCluster([TasTopology("default", levels)], nodes)
    flavor = m.ResourceFlavor(meta=m.ObjectMeta(name="tas"), topology_name="default",
                              node_labels=FrozenMap(node_labels or {}))
    tree = cluster.tree(flavor)
    assert tree is not None
    return tree


def run(nodes: tuple[TasNode, ...], levels: tuple[str, ...], request: TopologyRequest | None, count: int,
        cpu_milli: int = 1000, *, implied: bool = False, selector: Mapping[str, str] | None = None,
        tolerations: tuple[m.Toleration, ...] = (), node_labels: Mapping[str, str] | None = None,
        per_pod: Mapping[str, int] | None = None) -> PlacementResult:
    return place(tree_of(nodes, levels, node_labels), request, implied=implied, count=count,
                 per_pod=per_pod if per_pod is not None else {"cpu": cpu_milli},
                 pod=PodConstraints(selector or {}, (), tolerations), used={}, assumed={})


def domains(result: PlacementResult) -> list[tuple[tuple[str, ...], int]]:
    assert result.placement is not None, result.reason
    return list(result.placement.domains)


def required(level: str, **kw: object) -> TopologyRequest:
    return TopologyRequest(required=level, **kw)  # type: ignore[arg-type]


def test_required_block_minimises_racks_before_nodes() -> None:
    """Kueue: "minimize the number of used racks before optimizing the number of nodes; BestFit"."""
    nodes = (bnode("b1", "r1", "x3", 2), bnode("b1", "r2", "x5", 2, pods=20), bnode("b1", "r3", "x1", 1),
             bnode("b1", "r3", "x6", 1), bnode("b1", "r3", "x2", 1), bnode("b1", "r3", "x4", 1))
    r = run(nodes, THREE, required(BLOCK), 4)
    assert r.placement is not None and r.placement.levels == (HOST,)
    assert domains(r) == [(("x1",), 1), (("x2",), 1), (("x4",), 1), (("x6",), 1)]


def test_best_fit_takes_the_node_that_holds_all_pods() -> None:
    """Kueue: "choose the node that can accommodate all Pods"."""
    nodes = (bnode("b1", "r1", "x3", 2), bnode("b1", "r1", "x5", 1), bnode("b1", "r1", "x1", 1))
    assert domains(run(nodes, THREE, required(BLOCK), 2)) == [(("x3",), 2)]


@pytest.mark.parametrize("implied", [True, False])
def test_unconstrained_fills_least_free_hosts_across_the_datacenter(implied: bool) -> None:
    """Kueue: "no annotation; implied default to unconstrained; 6 pods fit into hosts scattered across the whole
    datacenter even they could fit into single rack; BestFit" and its "unconstrained; ..." twin."""
    request = None if implied else TopologyRequest(unconstrained=True)
    r = run(SCATTERED, THREE, request, 6, implied=implied)
    assert domains(r) == [(("x1",), 1), (("x3",), 1), (("x5",), 1), (("x2",), 1), (("x6",), 2)]


def test_unconstrained_single_pod_goes_to_the_first_least_free_host() -> None:
    """Kueue: "unconstrained; a single pod fits into each host; LeastFreeCapacity; TASProfileMixed"."""
    assert domains(run(DEFAULT, THREE, TopologyRequest(unconstrained=True), 1)) == [(("x3",), 1)]


def test_host_required_and_preferred_single_pod() -> None:
    """Kueue: "host required; single Pod fits in the host; BestFit" (and the TASProfileMixed variants)."""
    assert domains(run(DEFAULT, THREE, required(HOST), 1)) == [(("x3",), 1)]
    assert domains(run(DEFAULT, THREE, TopologyRequest(preferred=HOST), 1)) == [(("x3",), 1)]


@pytest.mark.parametrize(("count", "want"), [
    (1, [(("b1", "r1"), 1)]),  # "rack required; single Pod fits in a rack; BestFit"
    (3, [(("b1", "r2"), 3)]),  # "rack required; multiple Pods fit in a rack; BestFit"
    (2, [(("b2", "r2"), 2)]),  # "rack required; multiple Pods fit in some racks; BestFit"
])
def test_rack_required_best_fit(count: int, want: list[tuple[tuple[str, ...], int]]) -> None:
    """Kueue: the "rack required; ...; BestFit" cases on two levels (leaves are racks: all levels are named)."""
    r = run(DEFAULT, TWO, required(RACK), count)
    assert r.placement is not None and r.placement.levels == TWO
    assert domains(r) == want


def test_rack_required_too_many_pods() -> None:
    """Kueue: "rack required; too many pods to fit in any rack; BestFit"."""
    r = run(DEFAULT, TWO, required(RACK), 4)
    assert r.placement is None
    assert r.reason == 'topology "default" allows to fit only 3 out of 4 pod(s)'


def test_block_required() -> None:
    """Kueue: "block required; single Pod fits in a block and a single rack", "... Pods fit in a block spread
    across two racks", "... single Pod which cannot be split", "... too many Pods to fit requested"."""
    assert domains(run(DEFAULT, TWO, required(BLOCK), 1)) == [(("b2", "r1"), 1)]
    assert domains(run(DEFAULT, TWO, required(BLOCK), 4)) == [(("b1", "r1"), 1), (("b1", "r2"), 3)]
    big = run(DEFAULT, TWO, required(BLOCK), 1, cpu_milli=4000)
    assert big.reason == ('topology "default" doesn\'t allow to fit any of 1 pod(s). Total nodes: 4; excluded: '
                          'resource "cpu": 4')
    assert run(DEFAULT, TWO, required(BLOCK), 5).reason == 'topology "default" allows to fit only 4 out of 5 pod(s)'


def test_rack_required_memory() -> None:
    """Kueue: "rack required; single Pod requiring memory; BestFit" (1 KiB each, 4 pods in the first rack)."""
    r = run(DEFAULT, TWO, required(RACK), 4, per_pod={"memory": 1024 * 1000})
    assert domains(r) == [(("b1", "r1"), 4)]


def test_preferred_climbs_levels_then_spreads() -> None:
    """Kueue: "rack preferred; but only block can accommodate the workload", "rack preferred; but only multiple
    blocks can accommodate the workload", "block preferred; but only multiple blocks ...", "block preferred; but
    the workload cannot be accommodate in entire topology" (all BestFit)."""
    assert domains(run(DEFAULT, TWO, TopologyRequest(preferred=RACK), 4)) == [(("b1", "r1"), 1), (("b1", "r2"), 3)]
    spread = [(("b1", "r1"), 1), (("b1", "r2"), 3), (("b2", "r2"), 2)]
    assert domains(run(DEFAULT, TWO, TopologyRequest(preferred=RACK), 6)) == spread
    assert domains(run(DEFAULT, TWO, TopologyRequest(preferred=BLOCK), 6)) == spread
    assert run(DEFAULT, TWO, TopologyRequest(preferred=BLOCK), 10).reason == (
        'topology "default" allows to fit only 7 out of 10 pod(s)')


def test_block_preferred_spreads_over_fewest_blocks() -> None:
    """Kueue: "block preferred; Pods fit in 2 blocks; BestFit"."""
    nodes = (node("b1", cpu=2, pods=20, labels={BLOCK: "b1"}), node("b2", cpu=1, pods=10, labels={BLOCK: "b2"}),
             node("b3", cpu=4, pods=40, labels={BLOCK: "b3"}))
    assert domains(run(nodes, (BLOCK,), TopologyRequest(preferred=BLOCK), 5)) == [(("b2",), 1), (("b3",), 4)]


@pytest.mark.parametrize(("labels", "ready", "unschedulable", "flavor_labels"), [
    ({"zone": "zone-a", HOST: "x3"}, True, False, {"zone": "zone-b"}),  # "...no matching node; BestFit"
    ({"zone": "zone-a", HOST: "x3"}, False, False, {"zone": "zone-a"}),  # "no assignment as node is not ready"
    ({"zone": "zone-a", HOST: "x3"}, True, True, {"zone": "zone-a"}),  # "no assignment as node is unschedulable"
])
def test_nodes_the_flavor_cannot_use(labels: dict[str, str], ready: bool, unschedulable: bool,
                                     flavor_labels: dict[str, str]) -> None:
    """Kueue: "only nodes with matching labels are considered; no matching node", "no assignment as node is not
    ready", "no assignment as node is unschedulable" (all BestFit)."""
    n = node("b1-r1-x3", cpu=1, mem_gi=1, pods=10, labels=labels, ready=ready, unschedulable=unschedulable)
    r = run((n,), (HOST,), required(HOST), 1, node_labels=flavor_labels)
    assert r.reason == "no topology domains at level: kubernetes.io/hostname"


def test_node_without_a_level_label_is_left_out() -> None:
    """Kueue: "only nodes with matching levels are considered; no host label on node; BestFit"."""
    n = node("b1-r1-x3", cpu=1, pods=10, labels={BLOCK: "b1", RACK: "r1"})
    assert run((n,), THREE, required(RACK), 1).reason == "no topology domains at level: cloud.com/topology-rack"
    ok = node("b1-r1-x3", cpu=1, pods=10, labels={"zone": "zone-a", HOST: "x3"})
    assert domains(run((ok,), (HOST,), required(HOST), 1, node_labels={"zone": "zone-a"})) == [(("x3",), 1)]


def test_non_tas_usage_counts() -> None:
    """Kueue: "include usage from running non-TAS pods, blocked assignment", "include usage from non-TAS pods;
    pod usage", "include usage from running non-TAS pods, found free capacity on another node" (BestFit)."""
    x3 = node("x3", cpu=1, mem_gi=1, pods=10, labels={HOST: "x3"}, non_tas={"cpu": 600, "pods": 1000})
    blocked = run((x3,), (HOST,), required(HOST), 1, cpu_milli=600)
    assert blocked.reason == ('topology "default" doesn\'t allow to fit any of 1 pod(s). Total nodes: 1; excluded: '
                              'resource "cpu": 1')
    x5 = node("x5", cpu=1, mem_gi=1, pods=10, labels={HOST: "x5"})
    assert domains(run((x3, x5), (HOST,), required(HOST), 1, cpu_milli=600)) == [(("x5",), 1)]
    two_pods = node("x3", pods=10, labels={HOST: "x3"}, non_tas={"pods": 2000})
    assert run((two_pods,), (HOST,), required(HOST), 9, per_pod={"cpu": 0}).reason == (
        'topology "default" allows to fit only 8 out of 9 pod(s)')


def test_allocatable_pods_limit() -> None:
    """Kueue: "no assignment as node does not have enough allocatable pods (.status.allocatable['pods'])"."""
    n = node("b1-r1-x3", cpu=1, pods=1, labels={"zone": "zone-a", HOST: "x3"}, non_tas={"cpu": 300, "pods": 1000})
    r = run((n,), (HOST,), required(HOST), 1, cpu_milli=300, node_labels={"zone": "zone-a"})
    assert r.reason == ('topology "default" doesn\'t allow to fit any of 1 pod(s). Total nodes: 1; excluded: '
                        'resource "pods": 1')


def test_taints() -> None:
    """Kueue: "skip node which has untolerated taint; BestFit", "allow to schedule on node with tolerated taint"."""
    gpu = m.Taint(key="example.com/gpu", value="present", effect="NoSchedule")
    n = node("x3", cpu=1, mem_gi=1, pods=10, labels={"zone": "zone-a", HOST: "x3"}, taints=(gpu,))
    r = run((n,), (HOST,), required(HOST), 1, node_labels={"zone": "zone-a"})
    assert r.reason == ('topology "default" doesn\'t allow to fit any of 1 pod(s). Total nodes: 1; excluded: '
                        'taint "example.com/gpu=present:NoSchedule": 1')
    tolerated = (m.Toleration(key="example.com/gpu", value="present", operator="Equal"),)
    assert domains(run((n,), (HOST,), required(HOST), 1, tolerations=tolerated)) == [(("x3",), 1)]


def test_exclusion_stats_in_the_message() -> None:
    """Kueue: "detailed failure message with exclusion stats" and "resource exclusion picks most restrictive
    resource"."""
    nodes = (node("x1", cpu=1, pods=10, labels={HOST: "x1"}, taints=(m.Taint(key="key", value="value",
                                                                              effect="NoSchedule"),)),
             node("x2", cpu=1, pods=10, labels={HOST: "x2", "zone": "zone-b"}),
             node("x3", cpu=2, pods=10, labels={HOST: "x3", "zone": "zone-b"}),
             node("x4", cpu=0.1, pods=10, labels={HOST: "x4", "zone": "zone-a"}))
    r = run(nodes, (HOST,), required(HOST), 1, selector={"zone": "zone-a"})
    assert r.reason == ('topology "default" doesn\'t allow to fit any of 1 pod(s). Total nodes: 4; excluded: '
                        'nodeSelector: 2, resource "cpu": 1, taint "key=value:NoSchedule": 1')
    dual = node("dual-shortage", cpu=0.5, pods=10, labels={HOST: "dual-shortage"}, extra={"example.com/gpu": 0})
    r = run((dual,), (HOST,), required(HOST), 1, per_pod={"cpu": 1000, "example.com/gpu": 1000})
    assert r.reason.endswith('excluded: resource "cpu": 1')


def test_node_selector() -> None:
    """Kueue: "skip node which doesn't match node selector, missing label", "..., label exists, value doesn't
    match", "allow to schedule on node which matches node" (BestFit)."""
    x3 = node("b1-r1-x3", cpu=1, mem_gi=1, pods=10, labels={"zone": "zone-a", HOST: "x3", "custom-label-1": "value-1"})
    x5 = node("b1-r1-x5", cpu=1, mem_gi=1, pods=10, labels={"zone": "zone-a", HOST: "x5", "custom-label-1": "value-2"})
    for selector in ({"custom-label-1": "custom-value-1"}, {"custom-label-1": "value-2"}):
        r = run((x3,), (HOST,), required(HOST), 1, cpu_milli=300, selector=selector)
        assert r.reason.endswith("excluded: nodeSelector: 1")
    assert domains(run((x3, x5), (HOST,), required(HOST), 1, selector={"custom-label-1": "value-2"})) == [
        (("x5",), 1)]


def test_slices_on_hosts() -> None:
    """Kueue: "block required for podset; host required for slices; BestFit", "...; prioritize more free slice
    capacity first and then tight fit; BestFit", "no topology for podset; host required for slices; BestFit"."""
    three = (bnode("b1", "r1", "x3", 3), bnode("b1", "r1", "x5", 3), bnode("b1", "r1", "x1", 3))
    req = TopologyRequest(required=BLOCK, slice_topology=HOST, slice_size=2)
    assert domains(run(three, THREE, req, 6)) == [(("x1",), 2), (("x3",), 2), (("x5",), 2)]
    only_slices = TopologyRequest(slice_topology=HOST, slice_size=2)
    assert domains(run(three, THREE, only_slices, 6)) == [(("x1",), 2), (("x3",), 2), (("x5",), 2)]
    four = (bnode("b1", "r1", "x3", 6), bnode("b1", "r1", "x5", 5), bnode("b1", "r1", "x1", 4),
            bnode("b1", "r1", "x6", 2))
    assert domains(run(four, THREE, req, 12)) == [(("x1",), 4), (("x3",), 6), (("x6",), 2)]


def test_slices_that_do_not_fit() -> None:
    """Kueue: "block required for podset; rack required for slices; only 1 out of 2 slices fit the topology"."""
    nodes = (bnode("b1", "r1", "x3", 3), bnode("b1", "r2", "x5", 1), bnode("b1", "r3", "x1", 1),
             bnode("b1", "r4", "x6", 1))
    r = run(nodes, THREE, TopologyRequest(required=BLOCK, slice_topology=RACK, slice_size=3), 6)
    assert r.reason == 'topology "default" allows to fit only 1 out of 2 slice(s)'


@pytest.mark.parametrize(("request_", "reason"), [
    (TopologyRequest(required=HOST, slice_topology=BLOCK, slice_size=1),
     "podset slice topology cloud.com/topology-block is above the podset topology kubernetes.io/hostname"),
    (TopologyRequest(required=BLOCK, slice_topology=HOST), "slice topology requested, but slice size not provided"),
    (TopologyRequest(required=BLOCK, slice_topology="not-existing-topology-level", slice_size=1),
     "no requested topology level for slices: not-existing-topology-level"),
])
def test_bad_slice_requests(request_: TopologyRequest, reason: str) -> None:
    """Kueue: "slice required topology level cannot be above the main required topology level", "slice size is
    required when slice topology is requested", "cannot request not existing slice topology"."""
    assert run(DEFAULT, THREE, request_, 1).reason == reason


def test_slices_below_a_block() -> None:
    """Kueue: "block required for podset; host required for slices; select domains with tight fit",
    "... optimize last domain", "block preferred for podset; host required for slices; 2 blocks with unbalanced
    subdomains" (all BestFit)."""
    host_slices = TopologyRequest(required=BLOCK, slice_topology=HOST, slice_size=2)
    tight = (bnode("b1", "r1", "x3", 3), bnode("b1", "r1", "x5", 2), bnode("b1", "r1", "x1", 2))
    assert domains(run(tight, THREE, host_slices, 4)) == [(("x1",), 2), (("x5",), 2)]
    last = (bnode("b1", "r1", "x3", 4), bnode("b1", "r1", "x5", 3), bnode("b1", "r1", "x1", 2))
    assert domains(run(last, THREE, host_slices, 6)) == [(("x1",), 2), (("x3",), 4)]
    unbalanced = (bnode("b1", "r1", "x3", 3), bnode("b1", "r1", "x5", 3), bnode("b1", "r1", "x1", 3),
                  bnode("b2", "r1", "x6", 6))
    preferred = TopologyRequest(preferred=BLOCK, slice_topology=HOST, slice_size=3)
    assert domains(run(unbalanced, THREE, preferred, 12)) == [(("x1",), 3), (("x3",), 3), (("x6",), 6)]


def test_rack_slices() -> None:
    """Kueue: "block required for podset; rack required for slices; BestFit" and "block preferred for podset; rack
    required for slices; BestFit" (pods below the slice level go one by one, fewest first)."""
    nodes = (bnode("b1", "r1", "x3", 1), bnode("b1", "r1", "x5", 1), bnode("b1", "r2", "x1", 1),
             bnode("b1", "r2", "x6", 1), bnode("b1", "r2", "x2", 1), bnode("b2", "r1", "x4", 1),
             bnode("b2", "r1", "x7", 1))
    rack_slices = TopologyRequest(required=BLOCK, slice_topology=RACK, slice_size=2)
    assert domains(run(nodes, THREE, rack_slices, 4)) == [(("x3",), 1), (("x5",), 1), (("x1",), 1), (("x2",), 1)]
    preferred = TopologyRequest(preferred=BLOCK, slice_topology=RACK, slice_size=2)
    assert domains(run(DEFAULT, THREE, preferred, 4)) == [(("x1",), 1), (("x5",), 1), (("x4",), 2)]


def test_later_pod_sets_count_the_earlier_ones() -> None:
    """Kueue: "multiple podsets: block required for one, unconstrained for another; TASProfileMixed" and
    "multiple PodSets account assumed pod usage against allocatable pods; BestFit": a workload's pod sets placed
    earlier in the same topology count against the later ones."""
    multipod = (bnode("b1", "r1", "x3", 10, mem_gi=1), bnode("b1", "r2", "x5", 10, mem_gi=1),
                bnode("b1", "r2", "x1", 10, mem_gi=1), bnode("b1", "r2", "x6", 10, mem_gi=1),
                bnode("b2", "r1", "x2", 10, mem_gi=1), bnode("b2", "r2", "x4", 20, mem_gi=4, pods=40))
    tree = tree_of(multipod, THREE)
    nobody = PodConstraints({}, (), ())
    first = place(tree, required(BLOCK), implied=False, count=8, per_pod={"cpu": 1000}, pod=nobody, used={},
                  assumed={})
    assert domains(first) == [(("x2",), 8)]
    assert first.placement is not None
    taken = usage_of({"cpu": 1000}, first.placement)
    second = place(tree, TopologyRequest(unconstrained=True), implied=False, count=2, per_pod={"cpu": 1000},
                   pod=nobody, used={}, assumed=taken)
    assert domains(second) == [(("x2",), 2)]
    one_slot = tree_of((node("x1", cpu=2, pods=1, labels={HOST: "x1"}),), (HOST,))
    placed = place(one_slot, required(HOST), implied=False, count=1, per_pod={"cpu": 1000}, pod=nobody, used={},
                   assumed={})
    assert placed.placement is not None
    again = place(one_slot, required(HOST), implied=False, count=1, per_pod={"cpu": 1000}, pod=nobody, used={},
                  assumed=usage_of({"cpu": 1000}, placed.placement))
    assert again.reason == ('topology "default" doesn\'t allow to fit any of 1 pod(s). Total nodes: 1; excluded: '
                            'resource "pods": 1')


@pytest.mark.parametrize(("pod", "fits"), [
    (BoundPod("", "Pending", {}, {"cpu": 600}), True),  # "don't consider unscheduled Pods when computing capacity"
    (BoundPod("x3", "Failed", {}, {"cpu": 600}), True),  # "don't consider terminal pods when computing the capacity"
    (BoundPod("x3", "Succeeded", {}, {"cpu": 600}), True),
    (BoundPod("x3", "Pending", {}, {"cpu": 600}), False),  # "include usage from pending scheduled non-TAS pods"
    (BoundPod("x3", "Running", {}, {"cpu": 600}), False),  # "include usage from running non-TAS pods"
    (BoundPod("x3", "Running", {"kueue.x-k8s.io/podset-required-topology": HOST}, {"cpu": 600}), True),
])
def test_usage_of_pods_not_placed_by_tas(pod: BoundPod, fits: bool) -> None:
    """Kueue: the non-TAS pod cases of TestFindTopologyAssignments (a 600m pod beside a 600m request on a 1-CPU
    node); a pod with a topology annotation is counted by its workload's placement instead (Kueue's IsTAS)."""
    usage = non_tas_usage([pod])
    x3 = node("x3", cpu=1, mem_gi=1, pods=10, labels={HOST: "x3"}, non_tas=usage.get("x3"))
    r = run((x3,), (HOST,), required(HOST), 1, cpu_milli=600)
    assert (r.placement is not None) == fits
    if not fits:
        assert usage == {"x3": {"cpu": 600, "pods": 1000}}
        assert r.reason.endswith('excluded: resource "cpu": 1')


def _group(nodes: tuple[TasNode, ...], levels: tuple[str, ...], request: TopologyRequest, workers: int, *,
           worker_pod: dict[str, int], leader_pod: dict[str, int]) -> PlacementResult:
    return place(tree_of(nodes, levels), request, implied=False, count=workers, per_pod=worker_pod,
                 pod=PodConstraints({}, (), ()), used={}, assumed={}, leader=leader_pod)


def blocks(*specs: tuple[str, float, int]) -> tuple[TasNode, ...]:
    return tuple(node(b, cpu=cpu, pods=10, labels={BLOCK: b}, extra={"example.com/gpu": gpu * 1000})
                 for b, cpu, gpu in specs)


GPU_WORKER = {"cpu": 1000, "example.com/gpu": 1000}


def test_group_leader_with_its_workers() -> None:
    """Kueue: "find topology assignment for two podsets with the same group" and "... - optimizes domain for
    both leader and workers": the leader goes in the block the workers take."""
    r = _group(blocks(("b1", 2, 2), ("b2", 5, 4), ("b3", 2, 2)), (BLOCK,), required(BLOCK), 4,
               worker_pod=GPU_WORKER, leader_pod={"cpu": 1000})
    assert domains(r) == [(("b2",), 4)]
    assert r.leader is not None and r.leader.domains == ((("b2",), 1),)
    r = _group(blocks(("b1", 11, 8), ("b2", 4, 4)), (BLOCK,), required(BLOCK), 4,
               worker_pod=GPU_WORKER, leader_pod={"cpu": 1000})
    assert domains(r) == [(("b1",), 4)]
    assert r.leader is not None and r.leader.domains == ((("b1",), 1),)


def test_group_that_does_not_fit() -> None:
    """Kueue: "find topology assignment for two podsets with the same group - no fit" and "... - leader does not
    fit anywhere" (the message counts the workers that fit without the leader)."""
    r = _group(blocks(("b1", 1, 0), ("b2", 4, 4)), (BLOCK,), required(BLOCK), 4,
               worker_pod=GPU_WORKER, leader_pod={"cpu": 1000})
    assert r.reason == ('topology "default" allows to fit only 4 out of 4 pod(s). Total nodes: 2; excluded: '
                        'resource "example.com/gpu": 1')
    r = _group(blocks(("b1", 4, 4), ("b2", 4, 4)), (BLOCK,), required(BLOCK), 4,
               worker_pod=GPU_WORKER, leader_pod={"cpu": 10_000})
    assert r.reason == 'topology "default" allows to fit only 4 out of 4 pod(s)'


def test_group_over_hosts() -> None:
    """Kueue: "find topology assignment for two podsets with the same group - multiple hosts"."""
    def gpu_host(block: str, rack: str, host: str, cpu: int) -> TasNode:
        return node(host, cpu=cpu, pods=10, labels={BLOCK: block, RACK: rack, HOST: host},
                    extra={"example.com/gpu": 1000})
    nodes = (gpu_host("b1", "r1", "x3", 2), gpu_host("b1", "r1", "x5", 2), gpu_host("b1", "r1", "x1", 2),
             gpu_host("b2", "r4", "x6", 1), gpu_host("b2", "r5", "x2", 2), gpu_host("b2", "r6", "x4", 2))
    r = _group(nodes, THREE, required(BLOCK), 2, worker_pod=GPU_WORKER, leader_pod={"cpu": 2000})
    assert domains(r) == [(("x3",), 1), (("x5",), 1)]
    assert r.leader is not None and r.leader.domains == ((("x1",), 1),)


def test_group_keeps_worker_room_and_skips_racks_without_the_leader() -> None:
    """Kueue: "find topology assignment for grouped podsets preserves worker capacity when placing leader",
    "BestFit: podset group workers spread across hosts", "find topology assignment for grouped podsets skips
    domain where only workers fit without leader"."""
    hosts = tuple(node(h, cpu=c, pods=10, labels={RACK: "r1", HOST: h}) for h, c in (("h1", 2), ("h2", 4), ("h3", 3)))
    r = _group(hosts, (RACK, HOST), required(RACK), 4, worker_pod={"cpu": 2000}, leader_pod={"cpu": 1000})
    assert domains(r) == [(("h1",), 1), (("h2",), 2), (("h3",), 1)]
    assert r.leader is not None and r.leader.domains == ((("h3",), 1),)

    gpus = tuple(node(h, cpu=20, pods=10, labels={BLOCK: "b1", RACK: "r1", HOST: h}, extra={"example.com/gpu": g})
                 for h, g in (("x1", 4000), ("x2", 2000), ("x3", 2000), ("x4", 2000)))
    sliced = TopologyRequest(preferred=BLOCK, slice_topology=HOST, slice_size=2)
    r = _group(gpus, THREE, sliced, 6, worker_pod=GPU_WORKER, leader_pod={"cpu": 1000})
    assert domains(r) == [(("x1",), 4), (("x2",), 2)]
    assert r.leader is not None and r.leader.domains == ((("x1",), 1),)

    racks = (node("small-used", cpu=2.8, pods=10, labels={BLOCK: "b1", RACK: "small", HOST: "small-used"},
                  non_tas={"cpu": 2500, "pods": 1000}),
             node("small-free", cpu=2.8, pods=10, labels={BLOCK: "b1", RACK: "small", HOST: "small-free"}),
             node("large-free", cpu=6, pods=10, labels={BLOCK: "b1", RACK: "large", HOST: "large-free"}))
    r = _group(racks, THREE, required(RACK), 1, worker_pod={"cpu": 2500}, leader_pod={"cpu": 2500})
    assert domains(r) == [(("large-free",), 1)]
    assert r.leader is not None and r.leader.domains == ((("large-free",), 1),)
