"""Kueue outcomes decided by when a preemption's eviction completes: a race of the job controller with Kueue.

Kueue's scheduler only marks a victim `Evicted`; its cache keeps counting the victim's quota until the job
controller (here the driver, `replay.py`) has cleared the reservation, and the scheduling cycles that run meanwhile
(each snapshots the cache when it starts) see the quota in use (`scheduler.go` `schedule`, `preemption.go`
`IssuePreemptions`, `workload_controller.go` `Update`). The driver polls every 50 ms and completes what it finds in
List order (namespace/name), one status write each, while Kueue's cycles take from a fraction of a millisecond
to about 100 ms (the preemptor's own status write). So how many cycles a victim is seen holding its quota, and
in which order two victims release theirs, is timing, and with two victims it decides flavors and further
preemptions: random 150013 settled four ways in four Kueue runs, and gitopsq's engine reproduces each run
exactly once its victims are released when the driver released them in that run.

gitopsq releases a victim after the cycle following its preemption (docs/admission.md). A Kueue outcome is
accepted, counted apart, when every difference lies in a cohort tree where Kueue preempted something, and gitopsq
reaches Kueue's outcome exactly with one of the release timings the rig shows (`TIMINGS`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from differential.compare import Difference, differences, simulate, workload_trees

Release = Callable[[Any, float, int | None, Callable[..., bool]], bool]


def _in_their_cycle(state: Any, now: float, before: int | None, release: Callable[..., bool]) -> bool:
    """The driver cleared the reservation before Kueue's next cycle took its snapshot (random 150013, run 1)."""
    return release(state, now, before=None if before is None else before + 1)


def _together_when_quiet(state: Any, now: float, before: int | None, release: Callable[..., bool]) -> bool:
    """Victims hold their quota until nothing else moves, then all release it before the next cycle (the
    driver's writes fell between two cycles: random 150013, run 4; gitopsq's model before 37a94d1)."""
    return False if before is not None else release(state, now)


def _when_quiet_in_list_order(gap: int) -> Release:
    """Victims hold their quota until nothing else moves, then are released one at a time in List order, with
    ``gap`` cycles between two releases (the driver's writes interleaved with Kueue's cycles: random 150013,
    runs 2 and 3)."""
    last_release: dict[int, int] = {}  # id(state) -> cycle of the last release, while more victims wait

    def policy(state: Any, now: float, before: int | None, release: Callable[..., bool]) -> bool:
        if not state.evicting:
            return False
        started = last_release.get(id(state))
        if before is not None and (started is None or state.cycle - started < gap):
            return False
        state.evicting.sort(key=lambda held: held[1].key)
        first, rest = state.evicting[:1], state.evicting[1:]
        state.evicting = first
        released: bool = release(state, now)
        state.evicting = rest
        if rest:
            last_release[id(state)] = state.cycle
        else:
            last_release.pop(id(state), None)
        return released

    return policy


TIMINGS: tuple[tuple[str, Callable[[], Release]], ...] = (
    ("victims released in the cycle of their preemption", lambda: _in_their_cycle),
    ("victims released together when quiet", lambda: _together_when_quiet),
    ("victims released when quiet, in List order, one cycle apart", lambda: _when_quiet_in_list_order(1)),
    ("victims released when quiet, in List order, two cycles apart", lambda: _when_quiet_in_list_order(2)),
)


@contextmanager
def released_as(policy: Release) -> Iterator[None]:
    """The engine with ``policy`` deciding when preempted workloads release their quota."""
    from gitopsq.admission.state import State

    original = State.complete_evictions

    def complete_evictions(self: Any, now: float, *, before: int | None = None) -> bool:
        return policy(self, now, before, original)

    State.complete_evictions = complete_evictions  # type: ignore[method-assign]
    try:
        yield
    finally:
        State.complete_evictions = original  # type: ignore[method-assign]


def preemption_trees(kueue: dict[str, Any], scenario: dict[str, Any]) -> set[str]:
    """Cohort trees in which Kueue preempted a workload (at any instant)."""
    tree_of = workload_trees(scenario)
    return {tree_of.get(e["workload"], "") for e in kueue.get("events", []) if e["type"] == "Preempted"}


def other_eviction_timing(kueue: dict[str, Any], scenario: dict[str, Any], diffs: list[Difference], *,
                          messages: bool = True, counts: bool = True) -> str | None:
    """The release timing with which gitopsq settles ``scenario`` exactly as Kueue did, when every difference
    lies in a cohort tree where Kueue preempted something (module docstring); None otherwise."""
    if not diffs:
        return None
    trees, tree_of = preemption_trees(kueue, scenario), workload_trees(scenario)
    if not trees or any(tree_of.get(d.workload, "") not in trees for d in diffs):
        return None
    for name, make in TIMINGS:
        with released_as(make()):
            ours = simulate(scenario)
        if not differences(kueue, ours, messages=messages, scenario=scenario, counts=counts):
            return name
    return None
