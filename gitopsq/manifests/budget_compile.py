"""Budget → ClusterQueue + LocalQueues (pure; docs/budgets.md has the field-by-field mapping and the reasons).

- ClusterQueue named after the Budget: one resource group covering every resource the Budget names, its flavors
  in the Budget's order of preference; ``nominalQuota`` = committed, ``borrowingLimit`` = burst − committed
  (only with a cohort, as Kueue requires); a resource a flavor does not name gets 0 there. ``namespaceSelector``
  selects exactly the served namespaces; ``cohortName`` = cohort; ``fairSharing.weight`` = fairShareWeight.
- flavorFungibility ``whenCanBorrow: TryNextFlavor``, ``whenCanPreempt: TryNextFlavor``, ``preference:
  BorrowingOverPreemption``: every flavor's committed quota is tried (in order) before borrowing, and borrowing
  before preempting; ties go to the earlier flavor.
- preemption ``reclaimWithinCohort: Any`` with a cohort (committed is a floor: quota lent out is taken back),
  ``withinClusterQueue: LowerPriority`` (the team's own priorities order its own work).
- One LocalQueue per served namespace, named ``queueName`` (default: the Budget's name).

Every compiled object carries the label ``gitopsq.dev/budget: <name>`` (so ``kubectl get cq -l
gitopsq.dev/budget`` lists them) and the annotation ``gitopsq.dev/compiled-from: Budget/<name>``, and
its field lines point at the Budget's lines, so a finding on compiled output names the line a person edits.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from gitopsq.api import model as m
from gitopsq.api.frozenmap import FrozenMap
from gitopsq.api.quantity import Quantity
from gitopsq.api.reader import FieldPath
from gitopsq.manifests.budgets import BUDGET_KIND, Budget, LoadedBudget
from gitopsq.manifests.check_report import LoadedObject

BUDGET_LABEL: Final = "gitopsq.dev/budget"
TEAM_LABEL: Final = "gitopsq.dev/team"
WORKSPACE_LABEL: Final = "gitopsq.dev/workspace"
SOURCE_ANNOTATION: Final = "gitopsq.dev/compiled-from"
PRIORITY_ANNOTATION: Final = "gitopsq.dev/priority-class"
NAME_LABEL: Final = "kubernetes.io/metadata.name"
_ZERO: Final = Quantity(0)
_RG: Final[FieldPath] = ("spec", "resourceGroups", 0)


def compile_budget(loaded: LoadedBudget) -> tuple[LoadedObject, ...]:
    """The ClusterQueue and LocalQueues of one Budget, each located at the Budget's lines."""
    budget = loaded.budget
    cq = compiled_cluster_queue(budget, loaded.path)
    out = [LoadedObject(cq, loaded.path, loaded.line, m.KUEUE_V1BETA2, _queue_lines(loaded))]
    for i, lq in enumerate(compiled_local_queues(budget, loaded.path)):
        out.append(LoadedObject(lq, loaded.path, loaded.line_of(("spec", "namespaces", i)), m.KUEUE_V1BETA2,
                                _local_lines(loaded, i)))
    return tuple(out)


def compiled_cluster_queue(budget: Budget, path: str = "") -> m.ClusterQueue:
    resources = budget.resources()
    flavors = tuple(m.FlavorQuotas(name=f.name, resources=tuple(
        m.ResourceQuota(name=res, nominal_quota=f.committed.get(res, _ZERO),
                        borrowing_limit=None if budget.cohort is None
                        else (f.ceiling(res) or _ZERO) - f.committed.get(res, _ZERO))
        for res in resources)) for f in budget.flavors)
    preemption = m.Preemption(within_cluster_queue="LowerPriority",
                              reclaim_within_cohort="Any" if budget.cohort else "Never")
    return m.ClusterQueue(
        meta=m.ObjectMeta(name=budget.name, labels=_labels(budget), annotations=_annotations(budget, path)),
        cohort_name=budget.cohort,
        resource_groups=(m.ResourceGroup(covered_resources=resources, flavors=flavors),) if resources else (),
        namespace_selector=m.LabelSelector(match_expressions=(
            m.LabelSelectorRequirement(key=NAME_LABEL, operator="In", values=tuple(sorted(budget.namespaces))),)),
        preemption=preemption,
        flavor_fungibility=m.FlavorFungibility(when_can_borrow="TryNextFlavor", when_can_preempt="TryNextFlavor",
                                               preference="BorrowingOverPreemption"),
        fair_sharing=None if budget.fair_share_weight is None else m.FairSharing(weight=budget.fair_share_weight))


def compiled_local_queues(budget: Budget, path: str = "") -> tuple[m.LocalQueue, ...]:
    annotations = dict(_annotations(budget, path))
    if budget.priority_class:
        annotations[PRIORITY_ANNOTATION] = budget.priority_class
    return tuple(m.LocalQueue(meta=m.ObjectMeta(name=budget.local_queue, namespace=ns, labels=_labels(budget),
                                                annotations=FrozenMap(annotations)),
                              cluster_queue=budget.name) for ns in budget.namespaces)


def compile_objects(budget: Budget, path: str = "") -> tuple[m.QueueObject, ...]:
    """The compiled objects alone (for the simulator and tests)."""
    return (compiled_cluster_queue(budget, path), *compiled_local_queues(budget, path))


def _labels(budget: Budget) -> FrozenMap[str, str]:
    labels = {**budget.labels, BUDGET_LABEL: budget.name, TEAM_LABEL: budget.team}
    if budget.workspace:
        labels[WORKSPACE_LABEL] = budget.workspace
    return FrozenMap(labels)


def _annotations(budget: Budget, path: str) -> FrozenMap[str, str]:
    # Not the file: moving a Budget to another file must not change what the cluster holds (findings, the plan
    # and `check --output json` name the file).
    del path
    return FrozenMap({SOURCE_ANNOTATION: f"{BUDGET_KIND}/{budget.name}"})


def _queue_lines(loaded: LoadedBudget) -> Mapping[FieldPath, int]:
    """Compiled ClusterQueue field → the Budget line it comes from."""
    line = loaded.line_of
    budget = loaded.budget
    out: dict[FieldPath, int] = {
        ("metadata",): line(("metadata",)), ("metadata", "name"): line(("metadata", "name")),
        ("spec",): line(("spec",)), ("spec", "cohortName"): line(("spec", "cohort")),
        ("spec", "namespaceSelector"): line(("spec", "namespaces")),
        ("spec", "fairSharing"): line(("spec", "fairShareWeight")),
        ("spec", "resourceGroups"): line(("spec", "flavors")), _RG: line(("spec", "flavors")),
    }
    first_seen: dict[str, FieldPath] = {}
    for j, flavor in enumerate(budget.flavors):
        src: FieldPath = ("spec", "flavors", j)
        out[(*_RG, "flavors", j)] = line(src)
        out[(*_RG, "flavors", j, "name")] = line((*src, "name"))
        for k, res in enumerate(budget.resources()):
            base: FieldPath = (*_RG, "flavors", j, "resources", k)
            committed = (*src, "committed", res) if res in flavor.committed else (*src, "committed")
            burst = (*src, "burst", res) if res in flavor.burst else committed
            out[base] = line(committed)
            out[(*base, "nominalQuota")] = line(committed)
            out[(*base, "borrowingLimit")] = line(burst)
            if res not in first_seen and (res in flavor.committed or res in flavor.burst):
                first_seen[res] = committed if res in flavor.committed else burst
    for k, res in enumerate(budget.resources()):
        out[(*_RG, "coveredResources", k)] = line(first_seen.get(res, ("spec", "flavors")))
    return out


def _local_lines(loaded: LoadedBudget, index: int) -> Mapping[FieldPath, int]:
    ns_line = loaded.line_of(("spec", "namespaces", index))
    return {("metadata",): ns_line, ("metadata", "namespace"): ns_line,
            ("metadata", "name"): loaded.line_of(("spec", "queueName")) if loaded.budget.queue_name else ns_line,
            ("spec",): ns_line, ("spec", "clusterQueue"): loaded.line_of(("metadata", "name"))}
