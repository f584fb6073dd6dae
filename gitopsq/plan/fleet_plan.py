"""A pull request's plan across the clusters of gitopsq.yaml (docs/fleet.md): one `PrPlan` per cluster judged.

A cluster is *changed* when the pull request changes one of its objects or its revision is rejected (an error
or a denying policy); the others are *left alone* and named as such. A repository without ``clusters:`` has one
implicit cluster, named ``""``, and its plan renders exactly as a single `PrPlan`.
"""

from __future__ import annotations

from dataclasses import dataclass

from gitopsq.plan.pr_plan import PrPlan


@dataclass(frozen=True, slots=True)
class ClusterPlan:
    cluster: str  # "" for the implicit cluster of a repository without clusters
    plan: PrPlan

    @property
    def changed(self) -> bool:
        return bool(self.plan.objects) or self.plan.rejected


@dataclass(frozen=True, slots=True)
class FleetPlan:
    plans: tuple[ClusterPlan, ...]
    removed: tuple[str, ...] = ()  # clusters the base declares and the head no longer does
    warnings: tuple[str, ...] = ()  # for stderr (a deprecated option form, …)

    @property
    def implicit(self) -> bool:
        """One implicit cluster: render as a plain `PrPlan`."""
        return len(self.plans) == 1 and not self.plans[0].cluster

    @property
    def changed(self) -> tuple[ClusterPlan, ...]:
        return tuple(p for p in self.plans if p.changed)

    @property
    def unchanged(self) -> tuple[str, ...]:
        return tuple(p.cluster for p in self.plans if not p.changed)

    @property
    def rejected(self) -> bool:
        return any(p.plan.rejected for p in self.plans)

    @property
    def exit_code(self) -> int:
        return 1 if self.rejected else 0

    @property
    def first(self) -> PrPlan:
        return self.plans[0].plan
