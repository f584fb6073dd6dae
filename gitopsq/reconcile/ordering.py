"""The order objects are applied in, and the reverse order they are pruned in.

Apply order (a total order; each rank sorted by group, kind, namespace, name):
1. Namespace (LocalQueues live in them);
2. PriorityClass;
3. Topology (ResourceFlavors name them);
4. ResourceFlavor (ClusterQueues name them);
5. MultiKueueCluster, then MultiKueueConfig and ProvisioningRequestConfig (AdmissionChecks name them);
6. AdmissionCheck (ClusterQueues name them);
7. Cohort (ClusterQueues join them);
8. ClusterQueue;
9. LocalQueue (points at a ClusterQueue);
10. everything else (WorkloadPriorityClass, ...).
Pruning walks the same order backwards, so a LocalQueue goes before its ClusterQueue and a Namespace last.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

from gitopsq.api.model import ObjectKey

KIND_RANK: Final = {kind: rank for rank, kind in enumerate((
    "Namespace", "PriorityClass", "Topology", "ResourceFlavor", "MultiKueueCluster", "MultiKueueConfig",
    "ProvisioningRequestConfig", "AdmissionCheck", "Cohort", "ClusterQueue", "LocalQueue"))}
OTHER_RANK: Final = len(KIND_RANK)


def apply_rank(key: ObjectKey) -> tuple[int, str, str, str, str]:
    """The sort key of the apply order: kind rank, then identity as the unique tie-break."""
    return (KIND_RANK.get(key.kind, OTHER_RANK), *key.sort_key())


def apply_order(keys: Iterable[ObjectKey]) -> tuple[ObjectKey, ...]:
    return tuple(sorted(keys, key=apply_rank))


def prune_order(keys: Iterable[ObjectKey]) -> tuple[ObjectKey, ...]:
    return tuple(sorted(keys, key=apply_rank, reverse=True))
