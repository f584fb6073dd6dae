"""The order objects are applied in, and the reverse order they are pruned in.

Apply order (a total order; each rank sorted by group, kind, namespace, name):
1. Namespace (LocalQueues live in them);
2. PriorityClass;
3. ResourceFlavor (ClusterQueues name them);
4. Cohort (ClusterQueues join them);
5. ClusterQueue;
6. LocalQueue (points at a ClusterQueue);
7. everything else (WorkloadPriorityClass, AdmissionCheck, ...).
Pruning walks the same order backwards, so a LocalQueue goes before its ClusterQueue and a Namespace last.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

from gitopsq.api.model import ObjectKey

KIND_RANK: Final = {"Namespace": 0, "PriorityClass": 1, "ResourceFlavor": 2, "Cohort": 3, "ClusterQueue": 4,
                    "LocalQueue": 5}
OTHER_RANK: Final = len(KIND_RANK)


def apply_rank(key: ObjectKey) -> tuple[int, str, str, str, str]:
    """The sort key of the apply order: kind rank, then identity as the unique tie-break."""
    return (KIND_RANK.get(key.kind, OTHER_RANK), *key.sort_key())


def apply_order(keys: Iterable[ObjectKey]) -> tuple[ObjectKey, ...]:
    return tuple(sorted(keys, key=apply_rank))


def prune_order(keys: Iterable[ObjectKey]) -> tuple[ObjectKey, ...]:
    return tuple(sorted(keys, key=apply_rank, reverse=True))
