"""Partial admission in the live loop (Kueue's ``PartialAdmission``): the pod counts a Workload was admitted at.

A pod set with ``minCount`` may be admitted with fewer pods than ``count`` (the engine's PodSetReducer). The
Workload's ``spec.podSets`` keep the full count; ``status.admission.podSetAssignments[].count`` says how many
were admitted, and that is what usage, the Job's ``parallelism`` and every later pass must count — never the
full size, or a queue runs more than its quota. No I/O here.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from gitopsq.admission.workload import Shape, reduced, reducible
from gitopsq.api import model as m
from gitopsq.api.workload_object import Admission

MIN_PARALLELISM: str = "kueue.x-k8s.io/job-min-parallelism"

_WITH_COUNTS: dict[tuple[int, tuple[int, ...]], tuple[tuple[m.PodSet, ...], tuple[m.PodSet, ...]]] = {}


def assigned_counts(admission: Admission | None) -> dict[str, int]:
    """Pod set name → admitted count, from ``status.admission`` (empty when there is none)."""
    out: dict[str, int] = {}
    for psa in (admission or {}).get("podSetAssignments") or ():
        if psa.get("count") is not None:
            out[str(psa.get("name", "main"))] = int(psa["count"])
    return out


def with_counts(pod_sets: tuple[m.PodSet, ...], counts: Mapping[str, int]) -> tuple[m.PodSet, ...]:
    """``pod_sets`` with the admitted counts; the same tuple when nothing was reduced. Memoised, so Workloads
    admitted at the same reduced size share one tuple (the engine memoises shapes by tuple identity)."""
    wanted = tuple(counts.get(ps.name, ps.count) for ps in pod_sets)
    if wanted == tuple(ps.count for ps in pod_sets):
        return pod_sets
    key = (id(pod_sets), wanted)
    hit = _WITH_COUNTS.get(key)
    if hit is not None and hit[0] is pod_sets:
        return hit[1]
    out = tuple(dataclasses.replace(ps, count=n) for ps, n in zip(pod_sets, wanted, strict=True))
    if len(_WITH_COUNTS) > 4096:
        _WITH_COUNTS.clear()
    _WITH_COUNTS[key] = (pod_sets, out)
    return out


def admitted_counts(shape: Shape, usage: Mapping[tuple[str, str], int]) -> dict[str, int] | None:
    """The pod counts the engine reserved ``usage`` for: None at full size, else pod set → count.

    The engine reduces a shape by a number of pods spread over its pod sets (`reduced`); the reservation's
    usage, summed per resource, is that reduced shape's total, and it shrinks strictly with every pod dropped,
    so exactly one reduction matches."""
    total = reducible(shape)
    if total == 0:
        return None
    used: dict[str, int] = {}
    for (_, resource), value in usage.items():
        used[resource] = used.get(resource, 0) + value
    for delta in range(total + 1):
        candidate = reduced(shape, delta) if delta else shape
        want: dict[str, int] = {}
        for ps in candidate.pod_sets:
            for resource, value in ps.totals.items():
                want[resource] = want.get(resource, 0) + value
        common = [r for r in want if r in used and want[r]]
        if common and all(want[r] == used[r] for r in common):
            return None if delta == 0 else {ps.name: ps.count for ps in candidate.pod_sets}
    return None


def min_count(annotations: Mapping[str, str], count: int) -> int | None:
    """``kueue.x-k8s.io/job-min-parallelism`` as a pod set's ``minCount``: None when absent or out of range
    (Kueue's webhook accepts 0 < value < min(parallelism, completions) only)."""
    text = annotations.get(MIN_PARALLELISM)
    if text is None:
        return None
    try:
        value = int(text)
    except ValueError:
        return None
    return value if 0 < value < count else None
