"""The engine's `shape_of` memo: one Shape per shared pod-sets tuple, never a stale one for a new tuple."""

from __future__ import annotations

import gc

import pytest

from gitopsq.admission.workload import shape_of
from gitopsq.api import model as m
from gitopsq.api.frozenmap import FrozenMap
from gitopsq.api.quantity import parse_quantity


def pod_sets(cpu: str, count: int = 1) -> tuple[m.PodSet, ...]:
    return (m.PodSet(name="main", count=count, requests=FrozenMap({"cpu": parse_quantity(cpu)})),)


def test_a_shared_tuple_gives_the_same_shape_object() -> None:
    """Asking twice for one tuple returns the very same interned Shape, with the totals of its pod sets."""
    shared = pod_sets("2", count=3)
    first = shape_of(shared)
    assert shape_of(shared) is first
    assert dict(first.pod_sets[0].totals) == {"cpu": 6000}


def test_equal_tuples_share_one_interned_shape() -> None:
    """Two distinct but equal tuples (two workloads decoded separately) still get one interned Shape."""
    assert shape_of(pod_sets("1500m")) is shape_of(pod_sets("1500m"))


@pytest.mark.parametrize("rounds", [pytest.param(50, id="ids recycled by the allocator"),
                                    pytest.param(5000, id="past the memo's bound")])
def test_a_new_tuple_never_gets_an_old_tuples_shape(rounds: int) -> None:
    """Tuples freed and reallocated (same id) or pushed past the memo's bound each get the shape of their own
    pod sets."""
    for i in range(rounds):
        cpu = f"{i % 7 + 1}"
        tuple_ = pod_sets(cpu, count=i % 3 + 1)
        assert dict(shape_of(tuple_).pod_sets[0].totals) == {"cpu": (i % 7 + 1) * 1000 * (i % 3 + 1)}
        del tuple_
        gc.collect(0)
