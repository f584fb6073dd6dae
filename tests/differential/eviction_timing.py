"""Kueue outcomes decided by when a preemption's eviction completes: a race of the job controller with Kueue.

Kueue's scheduler only marks a victim `Evicted`; its cache keeps counting the victim's quota until the job
controller (here the driver, `replay.py`) has cleared the reservation, and the scheduling cycles that run meanwhile
(each snapshots the cache when it starts) see the quota in use (`scheduler.go` `schedule`, `preemption.go`
`IssuePreemptions`, `workload_controller.go` `Update`). The driver polls every 50 ms and completes what it finds in
List order (namespace/name), one status write each, while Kueue's cycles take from a fraction of a millisecond
to about 100 ms (the preemptor's own status write). So how many cycles a victim is seen holding its quota, and
in which order two victims release theirs, is timing, and with two victims it decides flavors and further
preemptions: random 150013 settled four ways in five Kueue runs.

gitopsq's engine holds a victim until a cycle changes nothing in its cohort tree, then releases every victim of
that tree at once (`State.due_evictions`, docs/admission.md). The other timings the rig shows are that rule
replaced (`TIMINGS`, through `state.release_timing`). A Kueue outcome is accepted, counted apart, when every
difference lies in a cohort tree where Kueue preempted something and gitopsq reaches Kueue's outcome exactly with
one of them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Set
from contextlib import contextmanager
from typing import Any

from differential.compare import Difference, differences, simulate, workload_trees
from gitopsq.admission import state as state_module
from gitopsq.admission.state import Held, State

Due = Callable[[State, Set[str]], list[Held]]  # `State.due_evictions`: held victims due after a pass


def _in_their_cycle(state: State, busy: Set[str]) -> list[Held]:
    """The driver cleared the reservation before Kueue's next cycle took its snapshot (random 150013, run 1)."""
    return list(state.evicting)


def _after_one_more_cycle(state: State, busy: Set[str]) -> list[Held]:
    """One cycle sees the victim holding its quota, the next does not (gitopsq's model of 37a94d1)."""
    return [h for h in state.evicting if h.cycle < state.cycle or not busy]


def _when_quiet_in_list_order(gap: int) -> Due:
    """Victims hold their quota until a cycle changes nothing in their cohort tree, then are released one at a
    time in List order (namespace/name), the next ``gap`` cycles after the one before, or as soon as nothing
    moves anywhere (Kueue runs no cycle then): the driver's writes interleaved with Kueue's cycles (random 150013,
    the batch run and runs 2 and 3)."""
    last_release: dict[tuple[int, str], int] = {}  # (id(state), root) -> cycle of its last release, more waiting

    def due(state: State, busy: Set[str]) -> list[Held]:
        out = []
        for root in sorted({h.root for h in state.evicting}):
            held = sorted((h for h in state.evicting if h.root == root), key=lambda h: h.workload.key)
            started = last_release.get((id(state), root))
            ready = root not in busy if started is None else state.cycle - started >= gap or not busy
            if not ready:
                continue
            out.append(held[0])
            if len(held) > 1:
                last_release[(id(state), root)] = state.cycle
            else:
                last_release.pop((id(state), root), None)
        return out

    return due


TIMINGS: tuple[tuple[str, Callable[[], Due]], ...] = (
    ("victims released in the cycle of their preemption", lambda: _in_their_cycle),
    ("victims released after one more cycle", lambda: _after_one_more_cycle),
    ("victims released when their tree is quiet, in List order, one cycle apart",
     lambda: _when_quiet_in_list_order(1)),
    ("victims released when their tree is quiet, in List order, two cycles apart",
     lambda: _when_quiet_in_list_order(2)),
)


@contextmanager
def released_as(due: Due) -> Iterator[None]:
    """The engine with ``due`` deciding which held victims release their quota after each pass."""
    original = state_module.release_timing
    state_module.release_timing = due
    try:
        yield
    finally:
        state_module.release_timing = original


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
