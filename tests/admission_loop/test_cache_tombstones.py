"""A deletion the watch has shown is not undone by the answer of a write made before it: on the real API server,
a managed pod is patched (the answer kept), deleted and seen gone by the watch, then the answer is put into the
cache as the loop's writer does — the pod stays gone. Before, it came back and stayed for good, holding its group's
Workload (whose finalizer waits for the pods to go) for ever."""

from __future__ import annotations

import pytest
from cluster_rig import rest, wait_for
from envtest_rig import Envtest

from gitopsq.admission_loop.integrations.pod import POD_KIND
from gitopsq.admission_loop.rate_limited import Client
from gitopsq.admission_loop.tombstones import Tombstones
from gitopsq.admission_loop.watch_cache import Cache
from gitopsq.manifests.pod_marks import MANAGED_LABEL, MANAGED_VALUE

pytestmark = pytest.mark.envtest


def test_a_write_answered_after_the_deletion_does_not_bring_the_pod_back(envtest: Envtest) -> None:
    ns = envtest.new_namespace("tombstone")
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "member", "labels": {MANAGED_LABEL: MANAGED_VALUE}},
           "spec": {"containers": [{"name": "c", "image": "example.invalid/c:1"}]}}
    api = rest(envtest)
    path = f"/api/v1/namespaces/{ns}/pods"
    api.request("POST", path, body=pod)
    with envtest.api_client() as client:
        cache = Cache(Client(client), ())
        cache.add(POD_KIND)
        cache.start()
        try:
            assert cache.wait_synced(30)
            wait_for("the pod in the cache", lambda: cache.get("pods", f"{ns}/member"))
            answer = api.request("PATCH", f"{path}/member", body={"metadata": {"annotations": {"seen": "yes"}}},
                                 content_type="application/merge-patch+json")
            api.request("DELETE", f"{path}/member", query=[("gracePeriodSeconds", "0")])
            wait_for("the watch to show the deletion", lambda: cache.get("pods", f"{ns}/member") is None)
            cache.put("pods", answer)  # the writer's answer, arriving after the watch's DELETED event
            assert cache.get("pods", f"{ns}/member") is None
            recreated = api.request("POST", path, body=pod)  # a new pod of the same name is a new object
            cache.put("pods", recreated)
            assert cache.get("pods", f"{ns}/member") is not None
        finally:
            cache.stop()


def test_tombstones_are_bounded_and_hide_only_older_versions() -> None:
    stones = Tombstones(limit=2)
    stones.bury(["a"], 10)
    assert stones.hides("a", {"metadata": {"resourceVersion": "9"}})
    assert stones.hides("a", {"metadata": {"resourceVersion": "10"}})
    assert not stones.hides("a", {"metadata": {"resourceVersion": "11"}})
    assert not stones.hides("b", {"metadata": {"resourceVersion": "1"}})
    assert not stones.hides("a", {"metadata": {}})  # no version: nothing to compare, the write counts
    stones.bury(["b", "c"], 20)
    assert len(stones) == 2 and not stones.hides("a", {"metadata": {"resourceVersion": "9"}})
