"""Topology-aware scheduling through the whole engine: quota and placement together, pending reasons and
messages word for word, node usage held while admitted and given back on finish.

Sources of truth: Kueue v0.19.2's pkg/scheduler/scheduler_tas_test.go (``TestScheduleForTAS``; each test names
its case) with the fixtures defaultSingleNode (x1: 1 CPU, 1Gi, 10 pods, label tas-node=true), the one-level
topology "tas-single-level" (hostname), the flavor "tas-default" (node label tas-node=true) and the ClusterQueue
"tas-main" (50 CPU, 50Gi in tas-default).
"""

from __future__ import annotations

from collections.abc import Mapping

from gitopsq.admission.engine import Engine
from gitopsq.admission.tas_assignment import v1beta1, v1beta2
from gitopsq.admission.tas_domains import TasCluster, TasNode, TasTopology
from gitopsq.admission.tas_requests import TopologyRequest
from gitopsq.api import model as m

from .builders import cq, flavor, lq, one, pod_sets, tas_flavor, topology

HOST = "kubernetes.io/hostname"
GI = 1024 ** 3 * 1000
ON_HOST = {"main": TopologyRequest(required=HOST)}


def x1(cpu: int = 1000, **labels: str) -> TasNode:
    return TasNode("x1", {"tas-node": "true", HOST: "x1", **labels}, {"cpu": cpu, "memory": GI, "pods": 10_000})


def engine(*objects: m.QueueObject, nodes: tuple[TasNode, ...] = (x1(),)) -> Engine:
    objs = objects or (tas_flavor(), cq("tas-main", quotas={"tas-default": {"cpu": "50", "memory": "50Gi"}}))
    cluster = TasCluster([TasTopology("tas-single-level", (HOST,))], nodes)
    return Engine(topology(*objs, lq("default", "tas-main", "tas-main")), tas=cluster)


def submit(e: Engine, key: str, pods: tuple[m.PodSet, ...],
           requests: Mapping[str, TopologyRequest] | None = ON_HOST, created: float = 0.0) -> None:
    e.submit(key=key, namespace="default", queue="tas-main", priority=0, created=created, pod_sets=pods,
             topology_requests=requests)


def test_required_topology_gets_placed() -> None:
    """Kueue: "workload required TAS gets scheduled" (admitted on x1, one pod)."""
    e = engine()
    submit(e, "default/foo", one("1"))
    e.schedule(0.0)
    assert e.view("default/foo").state == "Admitted"
    (p,) = e.placements("default/foo")
    assert (p.pod_set, p.flavor) == ("main", "tas-default")
    assert v1beta1(p.placement) == {"levels": [HOST], "domains": [{"values": ["x1"], "count": 1}]}
    assert v1beta2(p.placement) == {"levels": [HOST], "slices": [
        {"domainCount": 1, "valuesPerLevel": [{"universal": "x1"}], "podCounts": {"universal": 1}}]}


def test_placement_that_never_fits() -> None:
    """Kueue: "workload does not get scheduled as it does not fit within the node capacity" (reason
    TopologyPlacementFailed, the message of the placement with the current usage)."""
    e = engine()
    submit(e, "default/foo", one("1", count=2))
    e.schedule(0.0)
    v = e.view("default/foo")
    assert (v.state, v.reason) == ("Pending", "TopologyPlacementFailed")
    assert v.message == ('couldn\'t assign flavors to pod set main: topology "tas-single-level" allows to fit only 1 '
                         "out of 2 pod(s)")


def test_node_taken_by_another_tas_workload() -> None:
    """Kueue: "workload does not get scheduled as the node capacity is already used by another TAS workload":
    quota fits, the node does not; it would fit on an empty node, so it waits (Kueue looks for preemption
    victims; the message is the same)."""
    e = engine()
    submit(e, "default/bar", one("1"))
    e.schedule(0.0)
    submit(e, "default/foo", one("1"), created=1.0)
    e.schedule(1.0)
    v = e.view("default/foo")
    assert (v.state, v.reason) == ("Pending", "WaitingForQuota")
    assert v.message == ('couldn\'t assign flavors to pod set main: topology "tas-single-level" doesn\'t allow to fit '
                         'any of 1 pod(s). Total nodes: 1; excluded: resource "cpu": 1')
    e.finish("default/bar", 2.0)
    e.schedule(2.0)
    assert e.view("default/foo").state == "Admitted"  # the node's usage went with the finished workload


def test_two_queues_in_one_cycle_do_not_share_a_node() -> None:
    """Two ClusterQueues' heads nominated in one cycle against the same free node: the one processed second is
    not admitted once the first took the node (Kueue checks the TAS fit again before admitting)."""
    objs = (tas_flavor(), cq("tas-main", quotas={"tas-default": {"cpu": "50"}}),
            cq("tas-other", quotas={"tas-default": {"cpu": "50"}}), lq("default", "other", "tas-other"))
    e = engine(*objs)
    submit(e, "default/a", one("1"))
    e.submit(key="default/b", namespace="default", queue="other", priority=0, created=1.0, pod_sets=one("1"),
             topology_requests=ON_HOST)
    e.step(0.0)  # one cycle: both heads nominated on x1
    states = sorted(e.view(k).state for k in ("default/a", "default/b"))
    assert states == ["Admitted", "Pending"]
    e.schedule(0.0)
    assert sorted(e.view(k).state for k in ("default/a", "default/b")) == ["Admitted", "Pending"]


def test_placed_again_within_the_cycle() -> None:
    """Kueue's TASRecomputeAssignmentWithinSchedulingCycle (on by default): both heads were placed on x1; the one
    processed second is placed again, on x2, and admitted in the same cycle."""
    objs = (tas_flavor(), cq("tas-main", quotas={"tas-default": {"cpu": "50"}}),
            cq("tas-other", quotas={"tas-default": {"cpu": "50"}}), lq("default", "other", "tas-other"))
    x2 = TasNode("x2", {"tas-node": "true", HOST: "x2"}, {"cpu": 1000, "memory": GI, "pods": 10_000})
    e = engine(*objs, nodes=(x1(), x2))
    submit(e, "default/a", one("1"))
    e.submit(key="default/b", namespace="default", queue="other", priority=0, created=1.0, pod_sets=one("1"),
             topology_requests=ON_HOST)
    e.step(0.0)
    assert [e.view(k).state for k in ("default/a", "default/b")] == ["Admitted", "Admitted"]
    hosts = sorted(e.placements(k)[0].placement.domains[0][0][0] for k in ("default/a", "default/b"))
    assert hosts == ["x1", "x2"]


def test_level_missing_from_topology() -> None:
    """Kueue: "workload requests topology level which is not present in topology" (NoMatchingFlavor)."""
    e = engine()
    submit(e, "default/foo", one("1"), {"main": TopologyRequest(required="cloud.com/non-existing")})
    e.schedule(0.0)
    v = e.view("default/foo")
    assert (v.reason, v.message) == ("NoMatchingFlavor", 'couldn\'t assign flavors to pod set main: Flavor '
                                     '"tas-default" does not contain the requested level')


def test_workload_without_tas_skips_the_tas_flavor() -> None:
    """Kueue: "workload which does not need TAS skips the TAS flavor" and "workload with mixed PodSets
    (requiring TAS and not)"."""
    objs = (tas_flavor(), flavor("default"), cq("tas-main", quotas={"tas-default": {"cpu": "50"},
                                                                    "default": {"cpu": "50"}}))
    e = engine(*objs)
    submit(e, "default/foo", one("1"), None)
    mixed = pod_sets(("launcher", 1, {"cpu": "500m"}), ("worker", 1, {"cpu": "500m"}))
    submit(e, "default/mixed", mixed, {"worker": TopologyRequest(required=HOST)}, created=1.0)
    e.schedule(0.0)
    assert e.view("default/foo").flavors == (("main", m.FrozenMap({"cpu": "default"})),)
    assert dict(e.view("default/mixed").flavors) == {"launcher": {"cpu": "default"}, "worker": {"cpu": "tas-default"}}
    assert [p.pod_set for p in e.placements("default/mixed")] == ["worker"]


def test_implied_request_on_a_tas_only_queue() -> None:
    """Kueue's implied TAS: every flavor of the ClusterQueue is a TAS flavor, so a pod set without annotations is
    placed as unconstrained (here: three pods over two nodes)."""
    nodes = (x1(), TasNode("x2", {"tas-node": "true", HOST: "x2"}, {"cpu": 2000, "pods": 10_000}))
    e = engine(nodes=nodes)
    submit(e, "default/foo", one("1", count=3), None)
    e.schedule(0.0)
    (p,) = e.placements("default/foo")
    assert p.placement.domains == ((("x1",), 1), (("x2",), 2))


def test_without_nodes_the_engine_ignores_topologies() -> None:
    """No TAS input: a flavor's topologyName is not read and nothing is placed (the engine as before)."""
    e = Engine(topology(tas_flavor(), cq("tas-main", quotas={"tas-default": {"cpu": "50"}}),
                        lq("default", "tas-main", "tas-main")))
    submit(e, "default/foo", one("1", count=2))
    e.schedule(0.0)
    assert e.view("default/foo").state == "Admitted"
    assert e.placements("default/foo") == ()


def test_tas_flavor_passed_over_for_a_pod_set_without_request() -> None:
    """Kueue's checkPodSetAndFlavorMatchForTAS, as in "workload which does not need TAS skips the TAS flavor": the
    TAS flavor's reason joins the message when no flavor fits; per group the least severe reason wins."""
    objs = (tas_flavor(), flavor("default"), cq("tas-main", quotas={"tas-default": {"cpu": "50"},
                                                                    "default": {"cpu": "500m"}}))
    e = engine(*objs)
    submit(e, "default/foo", one("1"), None)
    e.schedule(0.0)
    v = e.view("default/foo")
    assert v.reason == "ExceedsMaxQuota"
    assert v.message == ('couldn\'t assign flavors to pod set main: Flavor "tas-default" supports only '
                         "TopologyAwareScheduling, insufficient quota for cpu in flavor default, previously considered "
                         "podsets requests (0) + current podset request (1) > maximum capacity (500m)")


def test_plain_flavor_passed_over_for_a_tas_request() -> None:
    """Kueue: "workload requests topology level which is only present in second flavor" — a flavor that cannot
    serve the request is passed over and the next one places the pod set."""
    objs = (flavor("default"), tas_flavor(), cq("tas-main", quotas={"default": {"cpu": "50"},
                                                                    "tas-default": {"cpu": "50"}}))
    e = engine(*objs)
    submit(e, "default/foo", one("1"))
    submit(e, "default/bar", one("1"), created=1.0)
    e.schedule(0.0)
    assert dict(e.view("default/foo").flavors) == {"main": {"cpu": "tas-default"}}
    v = e.view("default/bar")  # the node is taken; the plain flavor cannot serve it
    assert v.state == "Pending"
    assert v.message == ('couldn\'t assign flavors to pod set main: topology "tas-single-level" doesn\'t allow to fit '
                         'any of 1 pod(s). Total nodes: 1; excluded: resource "cpu": 1')


def test_preemption_cannot_make_room_on_the_nodes() -> None:
    """Kueue's flavorassigner: quota would need preemption, and the pods do not fit even on nodes free of TAS
    workloads: NoFit with reason TopologyPlacementFailed, the quota message unchanged (no preemption)."""
    objs = (tas_flavor(), cq("tas-main", quotas={"tas-default": {"cpu": "2"}},
                             preemption={"withinClusterQueue": "LowerPriority"}))
    e = engine(*objs)
    e.submit(key="default/low", namespace="default", queue="tas-main", priority=-1, created=0.0, pod_sets=one("1"))
    e.restore("default/low", cluster_queue="tas-main", flavors={"main": {"cpu": "tas-default"}}, at=0.0)
    submit(e, "default/foo", one("1", count=2), created=1.0)
    e.schedule(1.0)
    v = e.view("default/foo")
    assert (v.state, v.reason) == ("Pending", "TopologyPlacementFailed")
    assert v.message == "couldn't assign flavors to pod set main: insufficient unused quota for cpu in flavor " \
                        "tas-default, 1 more needed"
    assert e.view("default/low").state == "Admitted"  # nothing preempted for a placement that cannot happen


def test_preemption_when_the_pods_would_fit() -> None:
    """Kueue's flavorassigner: quota needs preemption and the pods fit on nodes free of TAS workloads: the
    workload preempts (TestScheduleForTASPreemption's messages end in "Pending the preemption of 1
    workload(s)")."""
    objs = (tas_flavor(), cq("tas-main", quotas={"tas-default": {"cpu": "1"}},
                             preemption={"withinClusterQueue": "LowerPriority"}))
    e = engine(*objs)
    e.submit(key="default/low", namespace="default", queue="tas-main", priority=-1, created=0.0, pod_sets=one("1"))
    e.restore("default/low", cluster_queue="tas-main", flavors={"main": {"cpu": "tas-default"}}, at=0.0)
    submit(e, "default/foo", one("1"), created=1.0)
    e.step(1.0)
    v = e.view("default/foo")
    assert (v.state, v.reason) == ("Pending", "WaitingForPreemptedWorkloads")
    assert v.message.endswith("Pending the preemption of 1 workload(s)")
    e.schedule(1.0)
    assert e.view("default/foo").state == "Admitted"
    assert e.placements("default/foo")[0].placement.domains == ((("x1",), 1),)


def test_pod_set_group_placed_together() -> None:
    """Kueue's pod set groups (``kueue.x-k8s.io/podset-group-name``): the one-pod leader and the workers are
    placed in one step, the leader in the workers' domain; both placements are the workload's."""
    nodes = (x1(cpu=3000), TasNode("x2", {"tas-node": "true", HOST: "x2"}, {"cpu": 2000, "pods": 10_000}))
    e = engine(nodes=nodes)
    group = TopologyRequest(required=HOST, group="lws")
    pods = pod_sets(("leader", 1, {"cpu": "1"}), ("workers", 2, {"cpu": "1"}))
    submit(e, "default/lws", pods, {"leader": group, "workers": group})
    e.schedule(0.0)
    assert e.view("default/lws").state == "Admitted"
    placed = {p.pod_set: p.placement.domains for p in e.placements("default/lws")}
    # Alone, the leader would take x2 (best fit for one pod); with its workers it goes to x1.
    assert placed == {"leader": ((("x1",), 1),), "workers": ((("x1",), 2),)}
