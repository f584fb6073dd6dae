"""All or nothing per revision (docs/sync.md, "All or nothing"): dry-run every object first, then write.

One attempt (`attempt`):
1. the whole plan is sent with ``dryRun=All`` (applies and prunes): the API server runs its schema, CEL and
   admission checks and persists nothing. An object refused here refuses the revision: nothing is written.
2. Objects in a Namespace the same revision creates cannot be dry-run before it exists (the server answers
   NotFound). As Flux does (namespaces and CRDs first, then the rest), those new Namespaces, already dry-run in
   step 1, are created, and then the objects in them are dry-run; a refusal there refuses the revision with only
   those new, empty Namespaces written (they enter the inventory, so a later revision can prune them).
   CRDs are never part of a queue repository (the Kueue CRDs are installed beforehand), so only Namespaces are
   staged.
3. Only when every dry-run passed is the plan applied for real.

A write that fails in step 3 (a field-manager conflict, a webhook timeout, an API server down past the retry
timeout) is the caller's to retry from fresh state and, if it persists, to roll back (`rollback_plan`).
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Literal

from gitopsq.api.model import ObjectKey
from gitopsq.api.raw_objects import JsonMapping, JsonObject
from gitopsq.cluster.apply import Execution, Executor, Failure
from gitopsq.progress import NullProgress, Progress
from gitopsq.reconcile.inventory import Inventory, version_of
from gitopsq.reconcile.pairing import Plan, key_of_document

AttemptOutcome = Literal["applied", "refused", "failed"]


@dataclass(frozen=True, slots=True)
class Attempt:
    """One attempt: ``refused`` (a dry-run said no; only staged Namespaces written), ``failed`` (a real write
    failed) or ``applied``. ``execution`` is what was written (staged Namespaces included)."""

    outcome: AttemptOutcome
    execution: Execution
    refusals: tuple[Failure, ...] = ()
    dry_run_seconds: float = 0.0


def attempt(executor: Executor, plan: Plan, *, dry_run_first: bool = True,
            progress: Progress | None = None) -> Attempt:
    """Dry-run ``plan`` whole, create the Namespaces the rest needs, dry-run what waited for them, then apply;
    each step shows on ``progress`` (a line on a terminal) as it goes."""
    shown = progress or NullProgress()

    def run(label: str, part: Plan, *, dry_run: bool) -> Execution:
        shown.start(label, len(part.applies) + len(part.prunes))
        try:
            return executor.execute(part, dry_run=dry_run, advance=shown.advance)
        finally:
            shown.done()

    staged: tuple[ObjectKey, ...] = ()
    staged_live: dict[ObjectKey, JsonObject] = {}
    rest = plan
    started = time.perf_counter()
    retries_before = executor.rest.retries  # the dry run's retries count too (an API restart during it)
    if dry_run_first:
        dry = run(f"dry run of {plan.revision[:12]}", plan, dry_run=True)
        if dry.failed:
            return Attempt("refused", Execution(False), dry.failed, time.perf_counter() - started)
        if dry.unverified:
            waiting = {k.namespace for k in dry.unverified}
            first = tuple(a for a in plan.applies if a.key.kind == "Namespace" and a.key.group == ""
                          and a.key.name in waiting)
            made = run("creating namespaces", replace(plan, applies=first, prunes=()), dry_run=False)
            staged, staged_live = made.applied, dict(made.live_after)
            if made.failed:
                return Attempt("failed", _merge(made, Execution(False)), (), time.perf_counter() - started)
            unchecked = set(dry.unverified)
            second = run("dry run in the new namespaces",
                         replace(plan, applies=tuple(a for a in plan.applies if a.key in unchecked), prunes=()),
                         dry_run=True)
            if second.failed:
                return Attempt("refused", made, second.failed, time.perf_counter() - started)
            rest = replace(plan, applies=tuple(a for a in plan.applies if a.key not in set(staged)))
    dry_seconds = time.perf_counter() - started
    done = run(f"applying {plan.revision[:12]}", rest, dry_run=False)
    execution = replace(done, applied=staged + done.applied, live_after={**staged_live, **done.live_after},
                        retries=executor.rest.retries - retries_before)
    return Attempt("applied" if execution.ok else "failed", execution, (), dry_seconds)


def _merge(a: Execution, b: Execution) -> Execution:
    return Execution(False, a.applied + b.applied, a.pruned + b.pruned, a.failed + b.failed,
                     a.not_attempted + b.not_attempted, (), a.retries + b.retries,
                     {**a.live_after, **b.live_after})


def rollback_plan(plan: Plan, created: Iterable[ObjectKey]) -> Plan:
    """The plan that puts the last good revision back: ``plan`` is built from that revision's objects against
    fresh live state (it re-applies what the failed attempt changed); of its prunes only the objects the failed
    attempts created are kept, so nothing the last good revision left in place is deleted by a rollback."""
    made = set(created)
    return replace(plan, prunes=tuple(p for p in plan.prunes if p.key in made))


def keys_of(docs: tuple[JsonMapping, ...], inventory: Inventory) -> set[tuple[ObjectKey, str]]:
    """(key, version) of every object in ``docs`` or ``inventory``."""
    return {(key_of_document(d), version_of(str(d.get("apiVersion")))) for d in docs} | \
        {(e.key, e.version) for e in inventory.entries}
