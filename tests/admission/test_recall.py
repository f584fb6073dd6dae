"""Memos of the admission loop (holders, recall): they forget on every change of what they were computed from."""

from __future__ import annotations

from dataclasses import fields

import pytest

from gitopsq.admission import cycle
from gitopsq.admission.holders import Holders
from gitopsq.admission.preemption import Preemptor
from gitopsq.admission.recall import Recall, tree_state
from gitopsq.admission.workload import WorkloadInfo, shape_of

from .builders import Sim, cohort, cq, flavor, lq, one


def _workload(key: str) -> WorkloadInfo:
    return WorkloadInfo(key=key, namespace="ns", queue="q", priority=0, created=0.0, seq=1, shape=shape_of(one("1")))


@pytest.mark.parametrize("change", [
    pytest.param(lambda h, w: h.__setitem__("ns/b", w), id="a-holder-arrives"),
    pytest.param(lambda h, w: h.pop("ns/a"), id="a-holder-leaves"),
    pytest.param(lambda h, w: h.reordered(), id="a-holder-starts-its-eviction"),
])
def test_holders_forget_what_was_derived_on_every_change(change: object) -> None:
    """Any change of a ClusterQueue's holders empties their memo and moves their version on."""
    holders = Holders()
    holders["ns/a"] = _workload("ns/a")
    holders.derived["candidates"] = ("remembered",)
    version = holders.version
    change(holders, _workload("ns/b"))  # type: ignore[operator]
    assert holders.derived == {} and holders.version > version


def test_recall_answers_only_for_equal_inputs() -> None:
    """A remembered value comes back for inputs equal to those it was computed from, and for no others."""
    recall: Recall[str] = Recall()
    recall.put("ns/a", (1, 2), "outcome")
    assert (recall.get("ns/a", (1, 2)), recall.get("ns/a", (1, 3)), recall.get("ns/b", (1, 2))) == (
        "outcome", None, None)


def test_tree_state_follows_usage_and_holders() -> None:
    """The tree's state is equal while nothing changes, and changes with a reservation in any queue of the tree,
    and again when it is released."""
    sim = Sim(flavor("default"), cohort("co"), cq("a", cohort="co", quotas={"default": {"cpu": "4"}}),
              cq("b", cohort="co", quotas={"default": {"cpu": "4"}}), lq("ns", "q", "a"))
    state = sim.engine.state
    scope = state.scopes[state.root_by_queue["a"]]
    before = tree_state(scope)
    sim.running("ns/w", "q", one("2"), cq="b")
    during = tree_state(scope)
    sim.engine.finish("ns/w", 1.0)
    after = tree_state(scope)
    assert tree_state(scope) == after and during not in (before, after)


def test_entry_copy_carries_every_field_but_the_cycles_flag() -> None:
    """A remembered nomination is handed out as a copy equal to it in every field nomination sets, sharing no
    mutable part, with `preemptor` (set by a cycle on the remembered entry itself) unset as in a fresh one."""
    sim = Sim(flavor("default"), cq("a", quotas={"default": {"cpu": "4"}}), lq("ns", "q", "a"))
    w = sim.engine.submit(key="ns/w", namespace="ns", queue="q", priority=0, created=0.0, pod_sets=one("1"))
    entry = cycle.nominate(sim.engine.state, w, sim.engine.topology.queues["a"])
    entry.reserve = {("default", "cpu"): 1000}
    entry.preemptor = True
    copy = entry.copy()
    assert all(getattr(copy, f.name) == getattr(entry, f.name) for f in fields(entry) if f.name != "preemptor")
    assert copy.preemptor is False
    assert copy.targets is not entry.targets and copy.reserve is not entry.reserve


@pytest.mark.parametrize(("policy", "other_priority", "other_created", "shared"), [
    pytest.param("LowerPriority", 10, 5.0, True, id="same-priority-other-size-shares"),
    pytest.param("LowerPriority", 11, 0.0, False, id="other-priority-does-not-share"),
    pytest.param("LowerOrNewerEqualPriority", 10, 5.0, False, id="creation-compared-other-creation-does-not-share"),
])
def test_candidate_lists_shared_only_for_what_they_read(policy: str, other_priority: int, other_created: float,
                                                        shared: bool) -> None:
    """Two preemptors of one ClusterQueue searching one tree state get one candidate list when they agree on
    everything it reads (priority; creation only when a policy compares it), and separate lists otherwise."""
    sim = Sim(flavor("default"), cq("cq", quotas={"default": {"cpu": "4"}},
                                    preemption={"withinClusterQueue": policy}), lq("ns", "q", "cq"))
    sim.running("ns/victim", "q", one("4"), cq="cq")
    state, spec = sim.engine.state, sim.engine.topology.queues["cq"]
    first = WorkloadInfo(key="ns/a", namespace="ns", queue="q", priority=10, created=0.0, seq=8,
                         shape=shape_of(one("1")))
    other = WorkloadInfo(key="ns/b", namespace="ns", queue="q", priority=other_priority, created=other_created,
                         seq=9, shape=shape_of(one("2")))
    fr = ("default", "cpu")
    key = tree_state(state.scopes[state.root_by_queue["cq"]])
    engine = cycle.preemption_engine(state)
    found = engine.candidates(Preemptor(first, spec, {fr: 1000}, frozenset({fr}), key))
    again = engine.candidates(Preemptor(other, spec, {fr: 2000}, frozenset({fr}), key))
    unkeyed = engine.candidates(Preemptor(first, spec, {fr: 1000}, frozenset({fr})))
    assert [c.workload.key for c in found[2]] == ["ns/victim"]
    # The lists themselves are what is shared (the compiled engine builds a new tuple around them on return).
    assert all(a is f for a, f in zip(again, found, strict=True)) is shared
    assert not any(u is f for u, f in zip(unkeyed, found, strict=True)) and unkeyed == found
