"""The quota tree: Kueue's resource-node arithmetic (shared/research/kueue.md §1.3)."""

from __future__ import annotations

import pytest

from gitopsq.admission import quota
from gitopsq.admission.quota import Limits, QuotaTree
from gitopsq.errors import NegativeUsageError

from .builders import Sim, cohort, cq, flavor, lq, one, topology

FR = ("default", "cpu")


def _tree(*queues: tuple[str, str | None, Limits], cohorts: dict[str, tuple[str | None, Limits | None]] | None = None,
          ) -> QuotaTree:
    tree = QuotaTree()
    for name, (_, lim) in (cohorts or {}).items():
        tree.add_cohort(name, {FR: lim} if lim else {})
    for name, (parent, _) in (cohorts or {}).items():
        if parent:
            tree.link_cohort(name, parent)
    for name, co, lim in queues:
        if co and co not in tree.cohorts:
            tree.add_cohort(co, {})
        tree.add_queue(name, {FR: lim}, co)
    tree.finish()
    return tree


def test_worked_example_lend_cohort_needs_one_more() -> None:
    """The research worked example: lend-a (3, L=2) + lend-b (2, L=2), 2 used in lend-b → 2 available."""
    tree = _tree(("lend-a", "lend", Limits(3000, lending=2000)), ("lend-b", "lend", Limits(2000, lending=2000)))
    quota.add_usage(tree.queues["lend-b"], FR, 2000)
    assert tree.queues["lend-a"].local[FR] == 1000
    assert tree.cohorts["lend"].subtree[FR] == 4000
    assert tree.cohorts["lend"].usage[FR] == 2000
    assert quota.available(tree.queues["lend-b"], FR) == 2000


def test_worked_example_message_through_the_engine() -> None:
    """A 3-cpu workload to lend-b waits with Kueue's exact message: 1 more needed."""
    sim = Sim(flavor("default"),
              cq("lend-a", cohort="lend", quotas={"default": {"cpu": ("3", None, "2")}}),
              cq("lend-b", cohort="lend", quotas={"default": {"cpu": ("2", None, "2")}}),
              lq("ns", "q", "lend-b"))
    sim.running("ns/first", "q", one("2"), cq="lend-b")
    sim.submit("ns/big", "q", one("3"))
    sim.schedule()
    assert sim.why("ns/big") == ("WaitingForQuota", "couldn't assign flavors to pod set main: insufficient unused "
                                 "quota for cpu in flavor default, 1 more needed")


@pytest.mark.parametrize(("borrowing", "usage_b", "expected"), [
    pytest.param(None, 0, 20_000, id="no-borrowing-limit-sees-the-whole-cohort"),
    pytest.param(2000, 0, 12_000, id="borrowing-limit-caps-what-comes-from-the-cohort"),
    pytest.param(2000, 9000, 11_000, id="others-usage-below-the-cap-leaves-the-cap"),
    pytest.param(None, 15_000, 5000, id="others-borrowing-shrinks-what-is-left"),
])
def test_available_honours_borrowing_limit(borrowing: int | None, usage_b: int, expected: int) -> None:
    """available() = local headroom + parent's available capped by the borrowing limit."""
    tree = _tree(("a", "co", Limits(10_000, borrowing=borrowing)), ("b", "co", Limits(10_000)))
    quota.add_usage(tree.queues["b"], FR, usage_b)
    assert quota.available(tree.queues["a"], FR) == expected


def test_lending_limit_keeps_capacity_local() -> None:
    """A lending limit keeps nominal − L out of the cohort: others can borrow only what is lent."""
    tree = _tree(("a", "co", Limits(10_000, lending=4000)), ("b", "co", Limits(0)))
    assert tree.cohorts["co"].subtree[FR] == 4000
    assert quota.available(tree.queues["b"], FR) == 4000
    assert quota.potential_available(tree.queues["a"], FR) == 10_000


def test_usage_propagates_only_beyond_local_quota_and_removal_restores() -> None:
    """Usage within the local quota stays local; adding then removing leaves every node as before."""
    tree = _tree(("a", "co", Limits(10_000, lending=4000)), ("b", "co", Limits(2000)))
    a = tree.queues["a"]
    quota.add_usage(a, FR, 5000)
    assert tree.cohorts["co"].usage.get(FR, 0) == 0
    quota.add_usage(a, FR, 3000)
    assert tree.cohorts["co"].usage[FR] == 2000
    quota.remove_usage(a, FR, 3000)
    quota.remove_usage(a, FR, 5000)
    assert a.usage[FR] == 0 and tree.cohorts["co"].usage[FR] == 0


def test_hierarchical_cohort_quota_and_borrowing_limit() -> None:
    """A Cohort's own quota joins the subtree; its borrowing limit caps what its subtree takes from the parent."""
    tree = _tree(("a", "team", Limits(1000)), ("b", "other", Limits(5000)),
                 cohorts={"root": (None, None), "team": ("root", Limits(2000, borrowing=1000)),
                          "other": ("root", None)})
    assert tree.cohorts["team"].subtree[FR] == 3000
    assert tree.cohorts["root"].subtree[FR] == 8000
    assert quota.potential_available(tree.queues["a"], FR) == 4000
    assert quota.available(tree.queues["a"], FR) == 4000


@pytest.mark.parametrize(("val", "level"), [
    pytest.param(1000, 0, id="within-own-quota-is-level-0"),
    pytest.param(3000, 1, id="fits-in-the-team-cohort-is-level-1"),
    pytest.param(6000, 2, id="needs-the-root-is-level-2"),
])
def test_borrowing_level_is_height_of_lowest_subtree_that_fits(val: int, level: int) -> None:
    """Kueue's FindHeightOfLowestSubtreeThatFits over a two-level tree."""
    tree = _tree(("a", "team", Limits(1000)), ("a2", "team", Limits(2000)), ("b", "other", Limits(5000)),
                 cohorts={"root": (None, None), "team": ("root", None), "other": ("root", None)})
    assert quota.borrowing_level(tree.queues["a"], FR, val)[0] == level


def test_cohort_cycle_makes_members_inactive() -> None:
    """Cohorts whose parents form a cycle disable their ClusterQueues with a CohortHasCycle reason."""
    topo = topology(flavor("default"), cohort("x", parent="y"), cohort("y", parent="x"),
                    cq("a", cohort="x", quotas={"default": {"cpu": "1"}}))
    assert topo.queues["a"].inactive_reason == "CohortHasCycle"
    assert not topo.queues["a"].active


def test_removing_more_than_a_node_uses_raises_and_leaves_it_unchanged() -> None:
    """Usage never goes negative unnoticed: removing more than a queue holds raises NegativeUsageError first."""
    tree = _tree(("a", "co", Limits(2000)), ("b", "co", Limits(2000)))
    quota.add_usage(tree.queues["a"], FR, 1000)
    with pytest.raises(NegativeUsageError, match="removing 1500 of cpu"):
        quota.remove_usage(tree.queues["a"], FR, 1500)
    assert tree.queues["a"].usage[FR] == 1000 and tree.cohorts["co"].usage[FR] == 1000


def test_without_restores_usage_even_when_the_measurement_raises() -> None:
    """`preemption.without` puts the victims' usage back when the block inside it fails."""
    from gitopsq.admission.preemption import without

    sim = Sim(flavor("default"), cq("a", quotas={"default": {"cpu": "4"}}), lq("ns", "q", "a"))
    sim.running("ns/v", "q", one("3"), cq="a")
    node = sim.engine.state.tree.queues["a"]
    victim = sim.engine.state.workloads["ns/v"]
    with pytest.raises(RuntimeError), without(sim.engine.state.tree, [victim]):
        assert node.usage[FR] == 0
        raise RuntimeError("measurement failed")
    assert node.usage[FR] == 3000
