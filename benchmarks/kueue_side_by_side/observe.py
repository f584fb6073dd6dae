"""What the harness watches during a run: Workload creation, admission and finish times, and the controller's metrics.

Both run in threads of the harness process (not the controller's), on their own client: one watch of every
Workload (the API server sends each event once more, to this watch) and one GET of /metrics a second, as a
Prometheus server scraping the chart's ServiceMonitor would (its default is 30 s; once a second is the issue's
harsher setting).
"""

from __future__ import annotations

import datetime
import threading
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass(slots=True)
class Stamps:
    """When the objects say things happened (creationTimestamp, the ``QuotaReserved`` and ``Finished`` conditions'
    lastTransitionTime): whole seconds, but free of the watch's lag — on a saturated machine the harness's watch
    fell minutes behind the creations (session 13)."""

    created: dict[str, float] = field(default_factory=dict)  # ns/name → seconds since the controller started
    admitted: dict[str, float] = field(default_factory=dict)
    finished: dict[str, float] = field(default_factory=dict)


@dataclass(slots=True)
class WorkloadTimes:
    created: dict[str, float] = field(default_factory=dict)  # ns/name → seconds since the controller started
    admitted: dict[str, float] = field(default_factory=dict)  # ... when the watch first saw it so
    stamps: Stamps = field(default_factory=Stamps)
    watch_restarts: int = 0
    error: str = ""


def _stamp(value: object, zero_wall: float) -> float | None:
    """An RFC 3339 time as seconds since ``zero_wall`` (a time.time reading); None if absent or unreadable."""
    if not isinstance(value, str) or not value:
        return None
    try:
        return datetime.datetime.fromisoformat(value).timestamp() - zero_wall
    except ValueError:
        return None


class WorkloadClock:
    """Watches Workloads (Kueue's v1beta2 first, else v1beta1) from ``zero`` (a time.monotonic reading, taken
    with the time.time reading ``zero_wall``)."""

    def __init__(self, kubeconfig: Path, zero: float, zero_wall: float) -> None:
        self.times = WorkloadTimes()
        self._kubeconfig, self._zero, self._zero_wall = kubeconfig, zero, zero_wall
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="workload-clock", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> WorkloadTimes:
        self._stop.set()
        self._thread.join(timeout=15)
        return self.times

    def _run(self) -> None:
        from kubernetes import client, config, watch

        api_client = config.new_client_from_config(config_file=str(self._kubeconfig))
        api = client.CustomObjectsApi(api_client)
        version = _served_version(api_client)
        resource_version = ""
        while not self._stop.is_set():
            stream = watch.Watch()
            try:
                if not resource_version:  # list, then watch from the list's version (the rig has no watch-list)
                    listed = api.list_cluster_custom_object("kueue.x-k8s.io", version, "workloads")
                    for obj in listed.get("items") or ():
                        self._see(obj)
                    resource_version = listed["metadata"]["resourceVersion"]
                for event in stream.stream(api.list_cluster_custom_object, "kueue.x-k8s.io", version, "workloads",
                                           resource_version=resource_version, timeout_seconds=30,
                                           allow_watch_bookmarks=True):
                    obj = event["object"]
                    if event["type"] != "BOOKMARK":
                        self._see(obj)
                    resource_version = obj.get("metadata", {}).get("resourceVersion", resource_version)
                    if self._stop.is_set():
                        break
            except Exception as err:  # an expired watch restarts from a fresh list
                self.times.watch_restarts += 1
                self.times.error = f"{type(err).__name__}: {err}"[:200]
                resource_version = ""
                time.sleep(0.2)
            finally:
                stream.stop()

    def _see(self, obj: dict[str, Any]) -> None:
        meta = obj.get("metadata") or {}
        if not meta.get("name"):
            return  # a bookmark
        key = f"{meta.get('namespace')}/{meta['name']}"
        now = time.monotonic() - self._zero
        self.times.created.setdefault(key, now)
        status = obj.get("status") or {}
        true = {c.get("type"): c.get("lastTransitionTime") for c in status.get("conditions") or ()
                if c.get("status") == "True"}
        if key not in self.times.admitted and (status.get("admission") or "QuotaReserved" in true):
            self.times.admitted[key] = now
        stamps = self.times.stamps
        for seen, value in ((stamps.created, meta.get("creationTimestamp")),
                            (stamps.admitted, true.get("QuotaReserved")), (stamps.finished, true.get("Finished"))):
            if key not in seen and (at := _stamp(value, self._zero_wall)) is not None:
                seen[key] = at


def _served_version(api_client: Any) -> str:
    from kubernetes import client

    for _ in range(100):  # the CRDs were just installed; discovery may lag a moment
        try:
            groups = client.ApisApi(api_client).get_api_versions().groups
        except Exception:
            groups = []
        for group in groups:
            if group.name == "kueue.x-k8s.io":
                versions = {v.version for v in group.versions}
                return "v1beta2" if "v1beta2" in versions else "v1beta1"
        time.sleep(0.1)
    return "v1beta1"


@dataclass(slots=True)
class ScrapeFigures:
    scrapes: int = 0
    failures: int = 0
    seconds: float = 0.0  # summed time of the scrapes (the controller's work to answer them, plus the network)
    largest_bytes: int = 0


class MetricsScraper:
    """GETs ``url`` once every ``interval`` seconds until stopped."""

    def __init__(self, url: str, interval: float = 1.0) -> None:
        self.url, self.interval = url, interval
        self.figures = ScrapeFigures()
        self.last = b""  # the latest answer (its eviction and preemption counters end the table)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="metrics-scraper", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> ScrapeFigures:
        self._stop.set()
        self._thread.join(timeout=15)
        return self.figures

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            began = time.monotonic()
            try:
                with urllib.request.urlopen(self.url, timeout=10) as answer:
                    body = answer.read()
                size = len(body)
                self.last = body
                self.figures.scrapes += 1
                self.figures.largest_bytes = max(self.figures.largest_bytes, size)
            except OSError:
                self.figures.failures += 1  # not serving yet (start-up) or busy: counted, not fatal
            self.figures.seconds += time.monotonic() - began
