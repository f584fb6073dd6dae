"""What a sync is asked and what it answers: a leaf every sync module imports and that imports none of them.

`Validated` is a revision judged by the validation pipeline; a `Validator` produces one; `SyncOptions` is what
one pass is asked; `SyncResult` what it did, with its stable JSON form (``gitopsq apply --output json``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from gitopsq.api.raw_objects import JsonMapping
from gitopsq.errors import EXIT_OK, EXIT_REJECTED, EXIT_RUNTIME
from gitopsq.reconcile.pairing import Plan

if TYPE_CHECKING:
    from gitopsq.api.model import ObjectKey
    from gitopsq.cluster.apply import Execution, Failure
    from gitopsq.source.port import Source
    from gitopsq.sync.health import ObjectHealth

SyncOutcome = Literal["applied", "unchanged", "rejected", "refused", "failed", "rolled-back", "health-pending",
                      "unhealthy", "suspended", "stalled", "rewound"]
"""``refused``: the API server's dry run refused an object, nothing was written; ``rolled-back``: a write failed
on every attempt and the last good revision was put back; ``health-pending``: applied, queues not healthy yet,
judged again at the next pass (the controller); ``unhealthy``: applied, but a queue was not healthy within the
health timeout; ``suspended``: the GitSource's ``spec.suspend`` is true, nothing was applied;
``rewound``: the head does not descend from the revision applied last (gitopsq.sync.forward_only), nothing applied;
``stalled``: the GitSource's inventory cannot be read; the pass wrote Stalled and changed nothing."""


@dataclass(frozen=True, slots=True)
class Validated:
    """A validated revision: its objects as v1beta2 wire documents, the findings, and whether it is refused.

    ``reason_code`` is the Ready condition reason for a refusal: ``ValidationFailed`` or ``PolicyDenied``.
    Findings are JSON objects (severity, reason, message, path, line, object) as ``status.lastRejection`` holds.
    """

    documents: tuple[JsonMapping, ...]
    findings: tuple[JsonMapping, ...] = ()
    rejected: bool = False
    reason: str = ""
    reason_code: str = "ValidationFailed"
    locations: Mapping[ObjectKey, tuple[str, int]] = field(default_factory=dict)  # object -> (file, line)
    # object -> the kustomization file of the overlay it was built from (docs/kustomize.md); `spec.paths` selects
    # such an object by its overlay, not by its base file
    overlays: Mapping[ObjectKey, str] = field(default_factory=dict)


Validator = Callable[["Source", str, "str | None"], Validated]
"""(source, commit, last applied commit or None) -> Validated: the same pipeline as `gitopsq check`."""


@dataclass(frozen=True, slots=True)
class SyncOptions:
    rev: str = "HEAD"
    prune: bool = True
    dry_run: bool = False
    allow_empty: bool = False
    drift_check: bool = True  # False: when the revision is the applied one, trust the last check and read no live
    health_timeout: float | None = None  # seconds for the applied queues to become healthy; None: no check
    health_wait: bool = True  # wait in the pass (gitopsq apply); False: judge once per pass (the controller)
    dry_run_first: bool = True  # False only to measure what the dry-run phase costs (benchmarks/sync_bench.py)


@dataclass(frozen=True, slots=True)
class SyncResult:
    """What one sync did; ``exit_code`` is what ``gitopsq apply`` returns: 0 applied or unchanged; 1 rejected,
    refused by the dry run, suspended or rewound (nothing applied); 3 failed, rolled back, unhealthy or stalled."""

    outcome: SyncOutcome
    revision: str | None
    dry_run: bool
    plan: Plan | None = None
    execution: Execution | None = None
    validated: Validated | None = None
    error: str | None = None
    timings: Mapping[str, float] = field(default_factory=dict)
    refusals: tuple[Failure, ...] = ()  # objects the API server's dry run refused
    attempts: int = 0  # apply attempts (a failed write is retried from fresh state)
    rollback: Execution | None = None  # what putting the last good revision back did
    rolled_back_to: str | None = None
    health: tuple[ObjectHealth, ...] | None = None  # None: not checked

    @property
    def exit_code(self) -> int:
        return {"applied": EXIT_OK, "unchanged": EXIT_OK, "rejected": EXIT_REJECTED, "refused": EXIT_REJECTED,
                "suspended": EXIT_REJECTED, "rewound": EXIT_REJECTED}.get(self.outcome, EXIT_RUNTIME)

    def to_json(self) -> dict[str, object]:
        """The stable JSON form of a sync (``gitopsq apply --output json``; docs/sync.md)."""
        plan, execution = self.plan, self.execution
        out: dict[str, object] = {"outcome": self.outcome, "revision": self.revision, "dryRun": self.dry_run,
                               "error": self.error}
        if self.validated is not None:
            out["findings"] = [dict(f) for f in self.validated.findings]
        if plan is not None:
            applied = set(execution.applied) if execution else set()
            out["applied"] = [{"object": str(a.key), "reason": a.reason, "done": a.key in applied,
                               "changes": [c.to_json() for c in a.changes] if a.reason != "create" else [],
                               **({"droppedMarkers": list(a.dropped_markers)} if a.dropped_markers else {})}
                              for a in plan.applies]
            pruned = set(execution.pruned) if execution else set()
            out["pruned"] = [{"object": str(p.key), "done": p.key in pruned} for p in plan.prunes]
            out["unchanged"] = len(plan.unchanged)
            out["conflicts"] = [{"object": str(c.key), "manager": c.manager, "wanted": c.wanted}
                                for c in plan.conflicts]
            out["pendingPrune"] = [str(k) for k in plan.pending_prune]
            out["orphaned"] = [str(k) for k in plan.orphaned]
            out["emptyGuard"] = plan.empty_guard
        if execution is not None:
            out["failed"] = [f.to_json() for f in execution.failed if f not in self.refusals]  # not twice
            out["notAttempted"] = [str(k) for k in execution.not_attempted]
            out["retries"] = execution.retries
            if execution.unverified:
                out["unverified"] = [str(k) for k in execution.unverified]
        locations = self.validated.locations if self.validated is not None else {}
        if self.refusals:
            out["refused"] = [{**f.to_json(), **_where(locations.get(f.key))} for f in self.refusals]
        if self.attempts:
            out["attempts"] = self.attempts
        if self.rollback is not None:
            out["rolledBackTo"] = self.rolled_back_to
            out["rollback"] = {"applied": [str(k) for k in self.rollback.applied],
                               "pruned": [str(k) for k in self.rollback.pruned],
                               "failed": [f.to_json() for f in self.rollback.failed]}
        if self.health is not None:
            out["health"] = [h.to_json() for h in self.health]
        out["timings"] = {k: round(v, 4) for k, v in self.timings.items()}
        return out


def _where(location: tuple[str, int] | None) -> dict[str, str | int]:
    return {"path": location[0], "line": location[1]} if location else {}
