"""The watch cache keeps finished Workloads apart (passes walk the live ones, `views` still sees all), stores
objects without their managedFields, and counts changes of shape (what the topology reads) apart from status."""

from __future__ import annotations

import json
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

from kubernetes import client as k8s_client

from gitopsq.admission_loop.live_workload import FINISHED, read_workload
from gitopsq.admission_loop.rate_limited import Client
from gitopsq.admission_loop.watch_cache import Cache


def workload(name: str, rv: int, *, finished: bool = False) -> dict[str, Any]:
    conditions = [{"type": "Finished", "status": "True", "reason": "Succeeded", "message": "",
                   "lastTransitionTime": "2026-11-21T10:00:00Z"}] if finished else []
    return {"metadata": {"name": name, "namespace": "team", "uid": f"uid-{name}", "generation": 1,
                         "resourceVersion": str(rv), "creationTimestamp": "2026-11-21T09:00:00Z"},
            "spec": {"queueName": "q", "podSets": [{"name": "main", "count": 1, "template": {"spec": {
                "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}}}]},
            "status": {"conditions": conditions}}


def names(views: list[Any]) -> list[str]:
    return sorted(v.name for v in views if v is not None)


def make_cache() -> Cache:
    return Cache(Client(k8s_client.ApiClient()), ("workloads",), views={"workloads": read_workload},
                 retire={"workloads": lambda v: v.state == FINISHED})


def test_a_finished_workload_leaves_the_live_views() -> None:
    """Once its Finished version lands, a Workload is in `views` but no longer in `live_views`."""
    cache = make_cache()
    cache.put("workloads", workload("a", 1))
    cache.put("workloads", workload("b", 2))
    cache.put("workloads", workload("a", 3, finished=True))
    assert names(cache.live_views("workloads", read_workload)) == ["b"]
    assert names(cache.views("workloads", read_workload)) == ["a", "b"]


def test_a_stale_finished_copy_does_not_retire_a_newer_live_one() -> None:
    """An older resourceVersion never replaces a newer one, retired or not."""
    cache = make_cache()
    cache.put("workloads", workload("a", 5))
    cache.put("workloads", workload("a", 4, finished=True))
    assert names(cache.live_views("workloads", read_workload)) == ["a"]


def test_forgetting_a_retired_workload_drops_it_everywhere() -> None:
    """A deleted Workload disappears from both sets."""
    cache = make_cache()
    cache.put("workloads", workload("a", 1, finished=True))
    cache.forget("workloads", "team/a")
    assert cache.views("workloads", read_workload) == []
    assert cache.live_views("workloads", read_workload) == []


def _stream(events: list[dict[str, Any]]) -> Any:
    """A client whose watch answers with one response carrying ``events``, then the end of the stream."""
    body = "".join(json.dumps(e) + "\n" for e in events).encode()

    class Stream:
        def __init__(self) -> None:
            self.response = self

        def stream(self, amt: int | None = None, decode_content: bool = True) -> Iterator[bytes]:
            yield body

        def release_conn(self) -> None:
            pass

    return SimpleNamespace(open_stream=lambda *_: Stream())


def test_the_cache_keeps_no_managed_fields() -> None:
    """Stored objects lose ``metadata.managedFields`` (nothing the loop reads; most of a finished Workload's
    parsed size), whichever way they arrive: our own writes (`put`) or the watch stream."""
    cache = make_cache()
    managed = [{"manager": "runner", "operation": "Update", "fieldsType": "FieldsV1",
                "fieldsV1": {"f:spec": {"f:queueName": {}}}}]
    written = workload("a", 1)
    written["metadata"]["managedFields"] = managed
    cache.put("workloads", written)
    assert "managedFields" not in cache.get("workloads", "team/a")["metadata"]  # type: ignore[index]

    informer = cache.informers["workloads"]
    watched = workload("b", 2)
    watched["metadata"]["managedFields"] = managed
    informer.client = _stream([{"type": "ADDED", "object": watched}])
    informer._watch("1")
    stored = cache.get("workloads", "team/b")
    assert stored is not None and "managedFields" not in stored["metadata"]
    assert stored["spec"]["queueName"] == "q"


def test_shape_moves_with_objects_and_spec_not_with_status() -> None:
    """`Cache.shape` (the topology's key for queues) moves when an object comes or goes or its
    metadata.generation changes; a status write (generation kept, resourceVersion new) moves only `generation`."""
    cache = make_cache()
    cache.put("workloads", workload("a", 1))
    shape, generation = cache.shape(("workloads",)), cache.generation(("workloads",))
    status_only = workload("a", 2)
    status_only["status"]["conditions"] = [{"type": "QuotaReserved", "status": "False", "reason": "Pending"}]
    cache.put("workloads", status_only)
    assert cache.shape(("workloads",)) == shape and cache.generation(("workloads",)) > generation
    new_spec = workload("a", 3)
    new_spec["metadata"]["generation"] = 2
    cache.put("workloads", new_spec)
    assert cache.shape(("workloads",)) > shape
    shape = cache.shape(("workloads",))

    informer = cache.informers["workloads"]
    later = workload("a", 4)
    later["metadata"]["generation"] = 2
    informer.client = _stream([{"type": "MODIFIED", "object": later}])
    informer._watch("3")
    assert cache.shape(("workloads",)) == shape  # a watched status change
    informer.client = _stream([{"type": "ADDED", "object": workload("b", 5)}])
    informer._watch("4")
    assert cache.shape(("workloads",)) == (shape[0] + 1,)
    informer.client = _stream([{"type": "DELETED", "object": workload("b", 6)}])
    informer._watch("5")
    assert cache.shape(("workloads",)) == (shape[0] + 2,)
    cache.forget("workloads", "team/a")
    assert cache.shape(("workloads",)) == (shape[0] + 3,)
