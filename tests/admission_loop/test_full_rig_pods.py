"""Plain Pods and pod groups on the live loop and the full rig (scheduler, KWOK nodes): a queued Pod gated by
gitopsq's pod webhook and released onto its flavor's nodes; a group admitted only once complete, one pod set per
role, all or nothing under waitForPodsReady; a preempted group's pods deleted and, recreated by the user's
controller, admitted again; pods created before the integration ran picked up when it starts."""

from __future__ import annotations

import dataclasses
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cluster_rig import cond, get, holds, rest, wait_for, workloads
from envtest_rig import EXIT_CODE, RUN_FOR, FullCluster, NodePools
from gpu_rig import SPOT_TAINT, gpu_pools, gpu_queue_yaml, running, setup
from pod_objects import (
    create,
    gated,
    get_pod,
    group,
    pod,
    pods_in,
    recreate,
    release,
    workload_named,
    workload_of_pod,
)
from running_loop import FAST, RunningLoop, running_on_clean

from gitopsq.admission_loop.integrations import select, webhook_kinds
from gitopsq.admission_loop.options import RequeuingStrategy, WaitForPodsReady
from gitopsq.intake.jobs import JobWebhook, JobWebhookOptions
from gitopsq.manifests.pod_marks import FINALIZER, MANAGED_LABEL, ROLE_HASH
from gitopsq.metrics import KueueMetrics
from gitopsq.webhook.certs import ensure_certificates, webhook_configurations
from gitopsq.webhook.server import WebhookServer

pytestmark = pytest.mark.envtest

WITH_PODS = dataclasses.replace(FAST, integrations=("batch/job", "pod"))


@pytest.fixture
def pod_loop(full_kueue: FullCluster) -> Iterator[RunningLoop]:
    """The admission loop with the batch/job and pod integrations on the full rig."""
    with running_on_clean(full_kueue, WITH_PODS) as running_loop:
        yield running_loop


@pytest.fixture
def fresh_ns(full_kueue: FullCluster) -> Iterator[str]:
    """A namespace whose pods lose gitopsq's finalizer after the test, so that it can be deleted."""
    ns = full_kueue.new_namespace("pods")
    try:
        yield ns
    finally:
        release(full_kueue, ns)
        full_kueue.kubectl("delete", "namespace", ns, "--wait=false", check=False)


def _nodes(pods: list[dict[str, Any]] | list[Any]) -> set[str]:
    return {p["spec"]["nodeName"] for p in pods}


def _events(cluster: FullCluster, ns: str, reason: str) -> list[dict[str, Any]]:
    return [e for e in get(cluster, f"/api/v1/namespaces/{ns}/events")["items"] if e.get("reason") == reason]


def _metric(metrics: KueueMetrics, name: str, **labels: str) -> float:
    """The sum of ``name``'s samples whose labels include ``labels``."""
    return sum(s.value for family in metrics.registry.collect() for s in family.samples
               if s.name == name and set(labels.items()) <= set(s.labels.items()))


def _live(pods: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [p for p in pods if not p["metadata"].get("deletionTimestamp")]


@pytest.fixture
def pod_webhook(full_kueue: FullCluster, tmp_path: Path, fresh_ns: str) -> Iterator[str]:
    """gitopsq's webhook registered for the pod integration, selecting ``fresh_ns`` only (by a label)."""
    marker = uuid.uuid4().hex[:8]
    full_kueue.kubectl("label", "namespace", fresh_ns, f"gitopsq-webhook-test={marker}")
    certs = ensure_certificates(tmp_path / "certs", ["127.0.0.1"])
    server = WebhookServer("127.0.0.1:0", JobWebhook(JobWebhookOptions()), certs.cert_file, certs.key_file)
    server.start()
    api, paths = rest(full_kueue), []
    for config in webhook_configurations(certs.ca_pem, url=f"https://127.0.0.1:{server.port}", name=f"gq-{marker}",
                                         namespace_selector={"matchLabels": {"gitopsq-webhook-test": marker}},
                                         kinds=webhook_kinds(select(["batch/job", "pod"]))):
        path = f"/apis/admissionregistration.k8s.io/v1/{config['kind'].lower()}s"
        api.request("POST", path, body=config)
        paths.append(f"{path}/{config['metadata']['name']}")
    try:
        yield fresh_ns
    finally:
        for path in paths:
            api.request("DELETE", path)
        server.close()


def _create_through_webhook(cluster: FullCluster, manifest: dict[str, Any]) -> dict[str, Any]:
    """New webhook configurations take about a second to reach the API server: retry until the pod is stored
    gated (a pod created ungated meanwhile is deleted and made again)."""
    ns, name = manifest["metadata"]["namespace"], manifest["metadata"]["name"]
    deadline = time.monotonic() + 15
    while True:
        (created,) = create(cluster, manifest)
        if gated(created) or time.monotonic() > deadline:
            return created
        rest(cluster).request("DELETE", f"/api/v1/namespaces/{ns}/pods/{name}", query=[("gracePeriodSeconds", "0")])
        wait_for("the ungated pod gone", lambda: get_pod(cluster, ns, name) is None)


def test_webhook_gates_a_queued_pod_and_admission_places_it_on_its_flavor(pod_loop: RunningLoop,
                                                                         node_pools: NodePools,
                                                                         pod_webhook: str) -> None:
    """A Pod created with a queue label is stored gated, labelled managed, with Kueue's finalizer and a role hash;
    its Workload ``pod-<name>-<hash>`` is admitted on the spot flavor (the only one with room for 4 GPUs), the
    gate comes off with the flavor's node label and toleration added, and the scheduler binds it to a spot node.
    An unlabelled pod in the same namespace is not touched, and the loop's cache never holds it (the informer
    watches managed pods only)."""
    cluster: FullCluster = node_pools.cluster
    ns = pod_webhook
    pools = gpu_pools(node_pools, {"on-demand": (1, 4), "spot": (1, 4)})
    setup(cluster, gpu_queue_yaml(ns, f"cq-{ns}", [(pools["on-demand"], 2), (pools["spot"], 4)]))
    created = _create_through_webhook(cluster, pod(ns, "solo", gpus=4))
    assert gated(created), "the webhook did not gate the queued pod"
    assert created["metadata"]["labels"][MANAGED_LABEL] == "true"
    assert FINALIZER in created["metadata"]["finalizers"] and ROLE_HASH in created["metadata"]["annotations"]
    (plain,) = create(cluster, {**pod(ns, "plain", gpus=0), "metadata": {"name": "plain", "namespace": ns}})
    assert not gated(plain) and MANAGED_LABEL not in (plain["metadata"].get("labels") or {})
    wl = wait_for("the pod's Workload admitted", lambda: holds(workload_of_pod(cluster, ns, "solo"), "Admitted")
                  and workload_of_pod(cluster, ns, "solo"), timeout=30)
    assert wl["metadata"]["name"].startswith("pod-solo-")
    assert [(p["name"], p["count"]) for p in wl["spec"]["podSets"]] == [("main", 1)]
    assert set(wl["status"]["admission"]["podSetAssignments"][0]["flavors"].values()) == {pools["spot"].flavor}
    solo = wait_for("the pod running", lambda: running([get_pod(cluster, ns, "solo") or {"status": {}}]),
                    timeout=60)[0]
    assert _nodes([solo]) <= pools["spot"].nodes
    assert solo["spec"]["nodeSelector"] == {"pool": pools["spot"].label}
    assert {"key": SPOT_TAINT["key"], "operator": "Equal", "value": "true", "effect": "NoSchedule"} in \
        solo["spec"]["tolerations"]
    assert _events(cluster, ns, "Started"), "no Started event on the pod"
    assert len(workloads(cluster, ns)) == 1, "the unlabelled pod got a Workload"
    wait_for("the plain pod running", lambda: running([get_pod(cluster, ns, "plain") or {"status": {}}]), timeout=60)
    cached = {p["metadata"]["name"] for p in pod_loop.loop.cache.items("pods")}
    assert "solo" in cached and "plain" not in cached, cached


def test_group_waits_until_complete_then_is_admitted_whole_one_pod_set_per_role(pod_loop: RunningLoop,
                                                                                 node_pools: NodePools,
                                                                                 fresh_ns: str) -> None:
    """A group of three (a 1-GPU driver and two 4-GPU workers) with two members created gets no Workload and a
    Warning ErrWorkloadCompose, its pods stay gated; once the third exists, one Workload named after the group
    has a pod set per role (counts 1 and 2), the driver's on the on-demand flavor and the workers' on spot, and
    every member runs on its role's nodes."""
    cluster: FullCluster = node_pools.cluster
    ns = fresh_ns
    pools = gpu_pools(node_pools, {"on-demand": (1, 4), "spot": (2, 4)})
    setup(cluster, gpu_queue_yaml(ns, f"cq-{ns}", [(pools["on-demand"], 4), (pools["spot"], 8)]))
    driver = group(ns, "train", 1, gpus=1, total=3, prefix="driver-", managed=True)
    workers = group(ns, "train", 2, gpus=4, total=3, prefix="worker-", managed=True)
    create(cluster, driver[0], workers[0])
    wait_for("the incomplete group reported", lambda: _events(cluster, ns, "ErrWorkloadCompose"), timeout=20)
    time.sleep(1.0)
    assert workload_named(cluster, ns, "train") is None, "an incomplete group got a Workload"
    assert all(gated(p) for p in pods_in(cluster, ns, "train"))
    create(cluster, workers[1])
    wl = wait_for("the group admitted", lambda: holds(workload_named(cluster, ns, "train"), "Admitted")
                  and workload_named(cluster, ns, "train"), timeout=30)
    counts = sorted(p["count"] for p in wl["spec"]["podSets"])
    assert counts == [1, 2] and all(len(p["name"]) == 8 for p in wl["spec"]["podSets"])
    assert len(wl["metadata"]["ownerReferences"]) == 3
    by_count = {p["count"]: p["name"] for p in wl["spec"]["podSets"]}
    flavors = {a["name"]: set(a["flavors"].values()) for a in wl["status"]["admission"]["podSetAssignments"]}
    assert flavors == {by_count[1]: {pools["on-demand"].flavor}, by_count[2]: {pools["spot"].flavor}}
    members = wait_for("all three running", lambda: len(running(pods_in(cluster, ns, "train"))) == 3
                       and running(pods_in(cluster, ns, "train")), timeout=60)
    on = {p["metadata"]["name"]: p["spec"]["nodeName"] for p in members}
    assert on["train-driver-0"] in pools["on-demand"].nodes
    assert {on["train-worker-0"], on["train-worker-1"]} <= pools["spot"].nodes


def test_deleting_a_groups_workload_deletes_its_pods(pod_loop: RunningLoop, node_pools: NodePools,
                                                     fresh_ns: str) -> None:
    """Deleting the Workload of a running group (one member running, as Kueue does with finished and gated ones
    too) deletes every member; the Workload goes once none is left, and no new one is made."""
    cluster: FullCluster = node_pools.cluster
    ns = fresh_ns
    pool = gpu_pools(node_pools, {"on-demand": (1, 4)})["on-demand"]
    setup(cluster, gpu_queue_yaml(ns, f"cq-{ns}", [(pool, 4)]))
    create(cluster, *group(ns, "solo", 1, gpus=2, managed=True))
    wait_for("the member running", lambda: running(pods_in(cluster, ns, "solo")), timeout=60)
    rest(cluster).request("DELETE", f"/apis/kueue.x-k8s.io/v1beta2/namespaces/{ns}/workloads/solo")
    wait_for("the member deleted", lambda: not pods_in(cluster, ns, "solo"), timeout=30)
    wait_for("the Workload gone", lambda: workload_named(cluster, ns, "solo") is None, timeout=30)
    time.sleep(1.0)
    assert not workloads(cluster, ns), "a Workload was made again for a deleted group"


def test_surplus_members_of_a_group_are_deleted_newest_first(pod_loop: RunningLoop, node_pools: NodePools,
                                                             fresh_ns: str) -> None:
    """Three members of a group whose total count is two: the newest is deleted (``ExcessPodDeleted``) and the
    Workload counts two pods, both of which run."""
    cluster: FullCluster = node_pools.cluster
    ns = fresh_ns
    pool = gpu_pools(node_pools, {"on-demand": (2, 4)})["on-demand"]
    setup(cluster, gpu_queue_yaml(ns, f"cq-{ns}", [(pool, 8)]))
    first, second, third = group(ns, "pair", 3, gpus=4, total=2, managed=True)
    create(cluster, first, second)
    time.sleep(0.1)
    create(cluster, third)
    wl = wait_for("the pair admitted", lambda: holds(workload_named(cluster, ns, "pair"), "Admitted")
                  and workload_named(cluster, ns, "pair"), timeout=30)
    assert [p["count"] for p in wl["spec"]["podSets"]] == [2]
    wait_for("the surplus pod gone", lambda: get_pod(cluster, ns, "pair-2") is None, timeout=30)
    assert _events(cluster, ns, "ExcessPodDeleted")
    wait_for("both members running", lambda: len(running(pods_in(cluster, ns, "pair"))) == 2, timeout=60)


def test_a_failed_member_waits_for_its_replacement_which_is_started(pod_loop: RunningLoop, node_pools: NodePools,
                                                                   fresh_ns: str) -> None:
    """A member of a running group fails: the Workload stays admitted with ``WaitingForReplacementPods=True``
    (``PodsFailed``, "Some Failed pods need replacement") and the failed pod loses gitopsq's finalizer; the
    replacement the user's controller creates becomes an owner of the Workload, is started on the admitted
    flavor's nodes and the condition turns False (``PodsReady``, "No pods need replacement")."""
    cluster: FullCluster = node_pools.cluster
    ns = fresh_ns
    pool = gpu_pools(node_pools, {"on-demand": (2, 4)})["on-demand"]
    setup(cluster, gpu_queue_yaml(ns, f"cq-{ns}", [(pool, 8)]))
    steady = group(ns, "duo", 1, gpus=4, total=2, managed=True)
    flaky = group(ns, "duo", 1, gpus=4, total=2, prefix="flaky-", managed=True,
                  annotations={RUN_FOR: "2s", EXIT_CODE: "1"})
    create(cluster, steady[0], flaky[0])
    waiting = wait_for("the group waiting for a replacement", lambda: holds(workload_named(cluster, ns, "duo"),
                                                                             "WaitingForReplacementPods"), timeout=60)
    assert (waiting["reason"], waiting["message"]) == ("PodsFailed", "Some Failed pods need replacement")
    assert holds(workload_named(cluster, ns, "duo"), "Admitted"), "the group lost its admission"
    wait_for("the failed pod released", lambda: FINALIZER not in
             ((get_pod(cluster, ns, "duo-flaky-0") or {"metadata": {}})["metadata"].get("finalizers") or ()))
    (replacement,) = group(ns, "duo", 1, gpus=4, total=2, prefix="again-", managed=True)
    create(cluster, replacement)
    again = wait_for("the replacement running", lambda: running([get_pod(cluster, ns, "duo-again-0")
                                                                 or {"status": {}}]), timeout=60)
    assert _nodes(list(again)) <= pool.nodes
    done = wait_for("no pod missing", lambda: (c := cond(workload_named(cluster, ns, "duo"),
                                                         "WaitingForReplacementPods")) and c["status"] == "False"
                    and c, timeout=30)
    assert (done["reason"], done["message"]) == ("PodsReady", "No pods need replacement")
    owners = {r["name"] for r in (workload_named(cluster, ns, "duo") or {})["metadata"]["ownerReferences"]}
    assert "duo-again-0" in owners


def test_group_the_nodes_cannot_hold_is_evicted_whole_by_pods_ready(full_kueue: FullCluster,
                                                                    node_pools: NodePools, fresh_ns: str) -> None:
    """With waitForPodsReady, a group of two that the nodes hold gets ``PodsReady=True`` (reason ``Started``) and
    finishes; then quota admits a group of three 4-GPU pods but the pool's two nodes hold only two: the Workload is
    evicted (PodsReadyTimeout) and every member is deleted — none keeps running alone. Kueue's metrics count both
    admissions, the one ready wait and the eviction."""
    cluster: FullCluster = node_pools.cluster
    gang = WaitForPodsReady(enable=True, timeout=3.0, requeuing_strategy=RequeuingStrategy(
        backoff_limit_count=1, backoff_base_seconds=30, backoff_max_seconds=60))
    pool = gpu_pools(node_pools, {"on-demand": (2, 4)})["on-demand"]
    ns = fresh_ns
    full_kueue.delete_all()
    try:
        metrics = KueueMetrics()
        with RunningLoop(full_kueue, dataclasses.replace(WITH_PODS, wait_for_pods_ready=gang), metrics=metrics):
            setup(cluster, gpu_queue_yaml(ns, f"cq-{ns}", [(pool, 12)]))
            create(cluster, *group(ns, "fits", 2, gpus=4, managed=True, annotations={RUN_FOR: "3s"}))
            ready = wait_for("the fitting group ready", lambda: holds(workload_named(cluster, ns, "fits"),
                                                                       "PodsReady"), timeout=60)
            assert ready["reason"] == "Started"
            wait_for("the fitting group finished", lambda: holds(workload_named(cluster, ns, "fits"), "Finished"),
                     timeout=60)
            create(cluster, *group(ns, "gang", 3, gpus=4, managed=True))
            wait_for("two of three running", lambda: len(running(pods_in(cluster, ns, "gang"))) == 2, timeout=60)
            evicted = wait_for("evicted by the timeout", lambda: holds(workload_named(cluster, ns, "gang"),
                                                                       "Evicted"), timeout=30)
            assert evicted["reason"] == "PodsReadyTimeout"
            wait_for("every member deleted", lambda: not _live(pods_in(cluster, ns, "gang")), timeout=60)
            assert _events(cluster, ns, "Stopped"), "no Stopped event for the deleted members"
            cq = f"cq-{ns}"
            assert _metric(metrics, "kueue_admitted_workloads_total", cluster_queue=cq) == 2
            assert _metric(metrics, "kueue_ready_wait_time_seconds_count", cluster_queue=cq) == 1
            assert _metric(metrics, "kueue_evicted_workloads_total", cluster_queue=cq, reason="PodsReadyTimeout") == 1
    finally:
        full_kueue.delete_all()


def test_preempted_group_is_deleted_and_comes_back_when_recreated(pod_loop: RunningLoop, node_pools: NodePools,
                                                                  fresh_ns: str) -> None:
    """A running low-priority group holding all 8 GPUs is preempted by a high-priority group: its pods are deleted
    (Kueue never recreates them) and its quota goes to the high group, whose pods run; the test recreates the low
    group's pods as the user's controller would, and once the high group finishes the low one is admitted again
    and runs on the nodes."""
    cluster: FullCluster = node_pools.cluster
    spot = gpu_pools(node_pools, {"spot": (2, 4)})["spot"]
    ns = fresh_ns
    setup(cluster, gpu_queue_yaml(ns, f"cq-{ns}", [(spot, 8)], preemption="LowerPriority",
                                  priorities={f"low-{ns}": 10, f"high-{ns}": 100}))
    low = group(ns, "low", 2, gpus=4, priority=f"low-{ns}", managed=True)
    create(cluster, *low)
    wait_for("low running", lambda: len(running(pods_in(cluster, ns, "low"))) == 2, timeout=60)
    create(cluster, *group(ns, "high", 2, gpus=4, priority=f"high-{ns}", managed=True,
                           annotations={RUN_FOR: "4s"}))
    evicted = wait_for("low evicted", lambda: holds(workload_named(cluster, ns, "low"), "Evicted"), timeout=30)
    assert evicted["reason"] == "Preempted"
    wait_for("low's pods deleted", lambda: not pods_in(cluster, ns, "low"), timeout=60)
    high = wait_for("high running", lambda: len(running(pods_in(cluster, ns, "high"))) == 2
                    and running(pods_in(cluster, ns, "high")), timeout=60)
    assert _nodes(list(high)) <= spot.nodes
    recreate(cluster, low)
    wait_for("high finished", lambda: holds(workload_named(cluster, ns, "high"), "Finished"), timeout=60)
    wait_for("low admitted again", lambda: holds(workload_named(cluster, ns, "low"), "Admitted"), timeout=30)
    again = wait_for("low running again", lambda: len(running(pods_in(cluster, ns, "low"))) == 2
                     and running(pods_in(cluster, ns, "low")), timeout=60)
    assert _nodes(list(again)) <= spot.nodes
    wait_for("the finished group's pods released", lambda: all(
        FINALIZER not in (p["metadata"].get("finalizers") or ()) for p in pods_in(cluster, ns, "high")), timeout=30)


def test_pods_gated_before_the_integration_runs_are_admitted_when_it_starts(full_kueue: FullCluster,
                                                                           node_pools: NodePools,
                                                                           fresh_ns: str) -> None:
    """Gated, managed pods created while the loop runs without the pod integration get no Workload and stay
    gated; a loop started with ``pod`` among its integrations picks them up, admits the pod and runs it."""
    cluster: FullCluster = node_pools.cluster
    pool = gpu_pools(node_pools, {"on-demand": (1, 4)})["on-demand"]
    ns = fresh_ns
    full_kueue.delete_all()
    try:
        setup(cluster, gpu_queue_yaml(ns, f"cq-{ns}", [(pool, 4)]))
        with RunningLoop(full_kueue, FAST):
            create(cluster, pod(ns, "early", gpus=2, managed=True))
            time.sleep(2.0)
            assert workload_of_pod(cluster, ns, "early") is None, "batch/job alone made a Workload for a pod"
            assert gated(get_pod(cluster, ns, "early") or {})
        with RunningLoop(full_kueue, WITH_PODS):
            wait_for("the early pod admitted", lambda: holds(workload_of_pod(cluster, ns, "early"), "Admitted"),
                     timeout=30)
            ran = wait_for("the early pod running", lambda: running([get_pod(cluster, ns, "early") or {"status": {}}]),
                           timeout=60)
            assert _nodes(list(ran)) <= pool.nodes
    finally:
        full_kueue.delete_all()
