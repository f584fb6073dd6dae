"""Builders for hand-made simulation results, so report and chart tests do not depend on the engine."""

from __future__ import annotations

from collections.abc import Mapping

from gitopsq.admission.state import Event
from gitopsq.api.frozenmap import FrozenMap
from gitopsq.simulate.result import QueueFinal, Result, WorkloadFinal


def flavors(**per_pod_set: Mapping[str, str]) -> tuple[tuple[str, FrozenMap[str, str]], ...]:
    return tuple((ps, FrozenMap(dict(res))) for ps, res in per_pod_set.items())


def event(time: float, workload: str, type_: str, *, cq: str = "cq-a", reason: str = "", flavor: str = "") -> Event:
    return Event(time=time, workload=workload, type=type_, cluster_queue=cq,
                 flavors=flavors(main={"cpu": flavor}) if flavor else (), reason=reason)


def result(*, events: tuple[Event, ...] = (), workloads: Mapping[str, WorkloadFinal] | None = None,
           queues: Mapping[str, QueueFinal] | None = None, waits: Mapping[str, tuple[float, ...]] | None = None,
           utilisation: Mapping[str, float] | None = None, end: float = 100.0,
           timeline: tuple[tuple[float, Mapping[str, Mapping[tuple[str, str], int]]], ...] = (),
           name: str = "hand-made") -> Result:
    return Result(scenario=name, events=events, workloads=workloads or {}, queues=queues or {},
                  waits=waits or {}, utilisation=utilisation or {}, end=end, timeline=timeline)
