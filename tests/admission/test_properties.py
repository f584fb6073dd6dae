"""Properties of the engine on generated queue definitions and traces (hypothesis)."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gitopsq.admission import quota
from gitopsq.admission.engine import Engine
from gitopsq.admission.topology import Settings
from gitopsq.api import model as m
from gitopsq.simulate.replay import Simulation
from gitopsq.simulate.scenario import Scenario, TraceWorkload

from .builders import cq, flavor, lq, one

STATES = {"Admitted", "QuotaReserved", "Pending", "Finished"}
POLICIES = ("Never", "LowerPriority", "Any")


@st.composite
def scenarios(draw: Any) -> Scenario:
    flavors = ["f0", "f1"][: draw(st.integers(1, 2))]
    objects: list[m.QueueObject] = [flavor(f) for f in flavors]
    n_cq = draw(st.integers(1, 4))
    for i in range(n_cq):
        quotas = {}
        for f in flavors:
            nominal = str(draw(st.integers(0, 6)))
            cohort = draw(st.sampled_from([None, "c0", "c1"])) if i < 3 else "c0"
            borrowing = draw(st.sampled_from([None, "0", "2"])) if cohort else None
            lending = draw(st.sampled_from([None, "0", "1"])) if cohort else None
            quotas[f] = {"cpu": (nominal, borrowing, lending)}
        reclaim = draw(st.sampled_from(POLICIES))
        pre: dict[str, Any] = {"withinClusterQueue": draw(st.sampled_from(POLICIES[:2])),
                               "reclaimWithinCohort": reclaim}
        if reclaim != "Never" and draw(st.booleans()):
            pre["borrowWithinCohort"] = {"policy": "LowerPriority", "maxPriorityThreshold": draw(st.integers(0, 5))}
        objects.append(cq(f"cq{i}", quotas=quotas, cohort=cohort, preemption=pre,
                          strategy=draw(st.sampled_from(["StrictFIFO", "BestEffortFIFO"]))))
        objects.append(lq("ns", f"q{i}", f"cq{i}"))
    workloads = tuple(
        TraceWorkload(name=f"w{j}", namespace="ns", queue=f"q{draw(st.integers(0, n_cq - 1))}",
                      priority=draw(st.integers(0, 6)), priority_class=None,
                      submit_at=float(draw(st.integers(0, 20))),
                      runtime=draw(st.sampled_from([None, 5.0, 15.0])),
                      pod_sets=one(str(draw(st.integers(1, 4))), draw(st.integers(1, 2))))
        for j in range(draw(st.integers(1, 14))))
    return Scenario(name="generated", file="generated.yaml", objects=tuple(objects), workloads=workloads,
                    settings=Settings(fair_sharing=draw(st.booleans())), horizon=draw(st.sampled_from([None, 40.0])))


def _check_quota(engine: Engine) -> None:
    """No node is over what the tree allows, and the tree holds exactly the admitted workloads' usage."""
    tree = engine.state.tree
    for name, node in tree.queues.items():
        expected: dict[tuple[str, str], int] = {}
        for w in engine.state.admitted[name].values():
            assert w.assignment is not None
            for fr, v in w.assignment.usage.items():
                expected[fr] = expected.get(fr, 0) + v
        assert {fr: v for fr, v in node.usage.items() if v} == expected
        for fr in node.usage:
            assert quota.available(node, fr) >= 0, (name, fr)
            lim = node.limits.get(fr)
            if lim is not None and lim.borrowing is not None:
                assert node.usage[fr] <= lim.nominal + lim.borrowing
    for node in tree.cohorts.values():
        if node.parent is None:
            for fr, v in node.usage.items():
                assert v <= node.subtree.get(fr, 0)


class _QuotaChecked:
    """The simulation's engine, with the quota checked after every instant it settles (a wrapper: the compiled
    engine's methods cannot be replaced, `gitopsq.native`)."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine

    def __getattr__(self, name: str) -> object:
        return getattr(self._engine, name)

    def schedule(self, now: float) -> None:
        self._engine.schedule(now)
        _check_quota(self._engine)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios())
def test_engine_never_raises_and_respects_quota(scenario: Scenario) -> None:
    """On any well-formed scenario: no exception, every instant settles, quota never exceeded, known end states."""
    sim = Simulation(scenario)
    engine = sim.engine
    sim.engine = _QuotaChecked(engine)  # type: ignore[assignment]
    result = sim.run()
    assert engine.state.unsettled == []
    for key, final in result.workloads.items():
        assert final.state in STATES, key
        if final.state == "Pending":
            assert final.reason and final.message, key
