"""One sync of a Git source to the cluster, as a pipeline of named steps (docs/sync.md):

resolve the revision → validate it → read the live objects → plan → execute, then write the GitSource status.

The same `Syncer` serves ``gitopsq apply`` (one pass) and the controller's sync loop (many passes; it keeps
the last validated revision in memory so a no-change reconcile neither re-reads Git nor re-validates).

A revision is validated whole by the same pipeline as ``gitopsq check`` (gitopsq.sync.validate) before the
first write; a rejected revision writes nothing but its status, and the last applied revision stays live. An
accepted one is applied all or nothing (gitopsq.sync.whole): every object is dry-run on the API server first,
a write that fails is retried from fresh state, and one that keeps failing is rolled back to the last good
revision. After the apply, the queues' health is checked when asked (gitopsq.sync.health). A GitSource with
``spec.suspend`` gets a Suspended condition and nothing else; ``spec.paths`` narrows the objects applied. The
status of an executed plan is written in a ``finally``, so a pass that fails half-way never leaves the GitSource
saying it is still applying. An inventory that cannot be read marks the GitSource Stalled: pruning from it
would be a guess, and retrying cannot fix it (a person must).
"""

from __future__ import annotations

import hashlib
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from gitopsq.api.model import ObjectKey
from gitopsq.cluster.apply import Execution, Executor, KubeRest, read_live, read_objects
from gitopsq.cluster.status import SourceRef, SourceState, StatusStore, build_status
from gitopsq.errors import GitopsqError, SourceError
from gitopsq.progress import NullProgress, Progress
from gitopsq.reconcile.inventory import Inventory, InventoryFormatError, version_of
from gitopsq.reconcile.pairing import Plan, build_plan, inventory_after, key_of_document
from gitopsq.source.port import Source
from gitopsq.sync.health import ObjectHealth, checked, summary, wait_healthy
from gitopsq.sync.outcomes import HEALTH_PENDING, OutcomeReports
from gitopsq.sync.report import audit_records
from gitopsq.sync.validate import check_pipeline_validator, within_paths
from gitopsq.sync.values import SyncOptions, SyncOutcome, SyncResult, Validated, Validator
from gitopsq.sync.whole import attempt, keys_of, rollback_plan

TARGETED_READ_LIMIT = 200  # above this many changed objects, LISTs beat one GET each
SOURCE_LABEL = "gitopsq.dev/source"  # on every applied object: <namespace>.<name> of its GitSource
PROGRESS_THRESHOLD = 20  # plans with more writes than this first mark the GitSource Reconciling
DEFAULT_OPTIONS = SyncOptions()

HEALTH_GRACE = 10.0  # seconds the controller's pass waits for a new revision's health before reporting it pending
APPLY_ATTEMPTS = 3  # a failed write is retried from fresh state this many times in all, then rolled back


class Syncer(OutcomeReports):
    """Syncs one source into one cluster, recording status in the GitSource ``ref``."""

    def __init__(self, source: Source, rest: KubeRest, ref: SourceRef, *, url: str,
                 validator: Validator | None = None, audit: Any = None,
                 clock: Callable[[], datetime] | None = None, cluster: str = "") -> None:
        self.source = source
        self.rest = rest
        self.url = url
        self.clock = clock or (lambda: datetime.now(UTC))
        self.store = StatusStore(rest, ref, clock=self.clock, cluster=cluster)  # cluster: docs/fleet.md
        self.label_value = source_label_value(ref)
        self.executor = Executor(rest)
        self.validator = validator or check_pipeline_validator()
        self.audit = audit
        self._validated: tuple[str, Validated] | None = None
        self._applied_docs: tuple[str, Mapping[ObjectKey, Mapping[str, Any]]] | None = None
        # (revision, key -> resourceVersion at which live was seen equal to that revision's desired object)
        self._verified: tuple[str, dict[ObjectKey, str]] | None = None
        self._health_since: tuple[str, float] | None = None  # (revision, monotonic time its health was first asked)
        self.progress: Progress = NullProgress()  # `gitopsq apply` on a terminal sets a progress line
        self.interval: float | None = None  # the GitSource's spec.interval, as read by the last pass

    # -- pipeline --------------------------------------------------------------------------------------------

    def sync(self, options: SyncOptions = DEFAULT_OPTIONS) -> SyncResult:
        """One pass. Raises ClusterError only when even the status cannot be read or written."""
        timings: dict[str, float] = {}
        started = time.perf_counter()
        try:
            sha = self.source.resolve(options.rev)
        except SourceError as err:
            return self._source_failed(err, options)
        timings["fetch"] = time.perf_counter() - started
        state = self._read_status(options)
        self.interval = state.interval
        if state.suspended and not options.dry_run:
            return self._suspended(sha, state)
        validated = within_paths(self._validate(sha, state), state.paths)
        timings["validate"] = time.perf_counter() - started
        if validated.rejected:
            return self._rejected(sha, state, validated, options)
        if self._trusted_unchanged(sha, state, options):
            return SyncResult("unchanged", sha, False, validated=validated, timings=timings)
        try:
            inventory = Inventory.from_status((state.status or {}).get("inventory"))
        except InventoryFormatError as err:
            return self._stalled(sha, state, validated, err, options)
        live, assumed = self._read_live(sha, state, validated.documents, inventory)
        plan = self._plan(sha, state, validated=validated, live=live, assumed=assumed, inventory=inventory,
                          options=options)
        timings["plan"] = time.perf_counter() - started
        if options.dry_run:
            execution = self.executor.execute(plan, dry_run=True)
            return SyncResult("applied" if execution.ok else "refused", sha, True, plan, execution, validated,
                              timings=timings, refusals=execution.failed)
        asked = options.health_timeout is not None and options.health_wait  # `apply --wait-health`: always judge
        if plan.is_noop and not plan.conflicts and state.last_applied == sha and _ready(state) and not asked:
            nothing = Execution(False)
            self._applied_docs = (sha, {key_of_document(d): d for d in validated.documents})
            self._remember_verified(sha, plan, nothing, live)
            return SyncResult("unchanged", sha, False, plan, nothing, validated, timings=timings)
        result = self._execute(sha, state, validated=validated, plan=plan, live=live, inventory=inventory,
                               options=options, timings=timings, started=started)
        timings["status"] = time.perf_counter() - started
        return result

    def _read_status(self, options: SyncOptions) -> SourceState:
        """The GitSource as it is, created first (spec only) on a first real sync, or labelled with the cluster
        of a per-cluster controller it does not name yet."""
        state = self.store.read()
        if not (state.exists and self.store.labelled(state)) and not options.dry_run:
            state = self.store.ensure(url=self.url, ref=options.rev, prune=options.prune)
        return state

    def _trusted_unchanged(self, sha: str, state: SourceState, options: SyncOptions) -> bool:
        """A poll between drift checks, on the revision applied and verified last: nothing to read or write."""
        return not options.drift_check and not options.dry_run and sha == state.last_applied and _ready(state) \
            and self._verified is not None and self._verified[0] == sha

    def _plan(self, sha: str, state: SourceState, *, validated: Validated, live: Mapping[ObjectKey, Any],
              assumed: frozenset[ObjectKey], inventory: Inventory, options: SyncOptions) -> Plan:
        return build_plan(sha, validated.documents, live, inventory, prune=options.prune,
                          allow_empty=options.allow_empty, previous=self._previous(sha, state, validated),
                          assume_unchanged=assumed, labels={SOURCE_LABEL: self.label_value})

    def _execute(self, sha: str, state: SourceState, *, validated: Validated, plan: Plan,
                 live: Mapping[ObjectKey, Any], inventory: Inventory, options: SyncOptions,
                 timings: dict[str, float], started: float) -> SyncResult:
        """Carry the plan out all or nothing (gitopsq.sync.whole) and report; a pass interrupted after it marked
        the GitSource Reconciling records the failure instead of leaving "Applying revision" behind."""
        marked = False
        if len(plan.applies) + len(plan.prunes) > PROGRESS_THRESHOLD:  # long enough for Reconciling to mean much
            self.store.write(state, build_status(state.status, outcome="progressing", now=self.clock(),
                                                 generation=state.generation, attempted=sha,
                                                 message=f"Applying revision {sha}"))
            state, marked = self.store.read(), True
        result: SyncResult | None = None
        interrupted = "interrupted"
        try:
            result = self._apply_whole(sha, state, validated=validated, plan=plan, live=live, inventory=inventory,
                                       options=options, timings=timings, started=started)
            return result
        except GitopsqError as err:
            interrupted = str(err)
            raise
        finally:
            if result is None and marked:
                self._interrupted(state, sha, interrupted)

    def _apply_whole(self, sha: str, state: SourceState, *, validated: Validated, plan: Plan,
                     live: Mapping[ObjectKey, Any], inventory: Inventory, options: SyncOptions,
                     timings: dict[str, float], started: float) -> SyncResult:
        """Dry-run then apply; a failed write is retried from fresh state (live re-read, plan rebuilt) up to
        APPLY_ATTEMPTS times, then the last good revision is put back."""
        created: set[ObjectKey] = set()
        dry_seconds = 0.0
        execution = Execution(False)
        for number in range(1, APPLY_ATTEMPTS + 1):
            tried = attempt(self.executor, plan, dry_run_first=options.dry_run_first, progress=self.progress)
            dry_seconds += tried.dry_run_seconds
            execution = tried.execution
            made = set(execution.applied)
            created |= {a.key for a in plan.applies if a.reason == "create" and a.key in made}
            timings["dryRun"] = dry_seconds
            timings["apply"] = time.perf_counter() - started
            if tried.outcome == "refused" and number == 1:  # later, earlier attempts' writes are rolled back
                return self._refused(sha, state, validated, plan, tried=tried, timings=timings)
            if tried.outcome == "applied":
                outcome: SyncOutcome = "applied" if execution.applied or execution.pruned or \
                    sha != state.last_applied else "unchanged"
                result = SyncResult(outcome, sha, False, plan, execution, validated, timings=timings,
                                    attempts=number)
                return self._succeeded(state, result, options, live)
            if number < APPLY_ATTEMPTS:  # fresh state: what this attempt wrote is now in the inventory
                inventory = inventory_after(plan, made, set(execution.pruned))
                live = read_live(self.rest, keys_of(validated.documents, inventory),
                                 selector=f"{SOURCE_LABEL}={self.label_value}")
                plan = self._plan(sha, state, validated=validated, live=live, assumed=frozenset(),
                                  inventory=inventory, options=options)
        return self._roll_back(sha, state, validated=validated, plan=plan, execution=execution, created=created,
                               timings=timings)

    def _succeeded(self, state: SourceState, result: SyncResult, options: SyncOptions,
                   live: Mapping[ObjectKey, Any]) -> SyncResult:
        """Record a complete apply, with the queues' health when asked."""
        plan, execution, sha = result.plan, result.execution, result.revision
        assert plan is not None and execution is not None and sha is not None and result.validated is not None
        self._applied_docs = (sha, {key_of_document(d): d for d in result.validated.documents})
        self._remember_verified(sha, plan, execution, live)
        inventory = inventory_after(plan, set(execution.applied), set(execution.pruned))
        judged = self._health(state, sha, plan, options)
        if judged is not None:
            health, pending, state = judged
            result = replace(result, health=tuple(health))
            if not all(h.healthy for h in health):
                result = replace(result, outcome="health-pending" if pending else "unhealthy", error=summary(health))
        self._report(state, result, inventory)
        return result

    def _health(self, state: SourceState, sha: str, plan: Plan,
                options: SyncOptions) -> tuple[list[ObjectHealth], bool, SourceState] | None:
        """The applied queues' health, whether a verdict is still pending, and the GitSource as it now is
        (None: not asked).

        ``gitopsq apply`` waits in the pass, up to ``options.health_timeout``. The controller waits up to
        HEALTH_GRACE in the pass that applied the revision, then judges once per pass and reports Reconciling
        (HealthCheckPending) until the timeout, counted from that first pass, has passed; then the revision is
        unhealthy (Stalled)."""
        if options.health_timeout is None:
            return None
        keys = checked(plan.desired_inventory.key_set())
        versions = {e.key: e.version for e in plan.desired_inventory.entries}
        if self._health_since is None or self._health_since[0] != sha:
            self._health_since = (sha, time.monotonic())
            first = True
        else:
            first = False

        def read(wanted: list[ObjectKey]) -> Mapping[ObjectKey, Any]:
            return read_live(self.rest, [(k, versions[k]) for k in wanted],
                             selector=f"{SOURCE_LABEL}={self.label_value}")

        if not options.health_wait:  # a short grace on the pass that applied it: a running Kueue is that quick
            grace = min(HEALTH_GRACE, options.health_timeout / 2) if first else 0.0
            verdicts = wait_healthy(read, keys, timeout=grace)
            return verdicts, time.monotonic() - self._health_since[1] < options.health_timeout, state
        timeout = options.health_timeout if first else 0.0  # a revision already found unhealthy: judged again
        if keys and timeout > 0:
            self.store.write(state, build_status(
                state.status, outcome="progressing", now=self.clock(), generation=state.generation,
                attempted=sha, reason=HEALTH_PENDING,
                message=f"Revision {sha} applied; waiting up to {timeout:g}s for {len(keys)} queues to be healthy"))
            state = self.store.read()  # the final status is written against this one
        return wait_healthy(read, keys, timeout=timeout), False, state

    def _read_live(self, sha: str, state: SourceState, docs: tuple[Mapping[str, Any], ...],
                   inventory: Inventory) -> tuple[dict[ObjectKey, Any], frozenset[ObjectKey]]:
        """Live objects for the plan, and the keys that need no diff.

        1. Warm, new revision: GET only the objects that changed in Git, are new, or leave; the rest are
           assumed unchanged (drift on them is found by the next no-change reconcile).
        2. Warm, same revision: LIST everything, but skip the diff where the resourceVersion is the one seen
           equal last time.
        3. Cold (first pass of this process): LIST and diff everything.
        """
        versions = {key_of_document(d): version_of(str(d.get("apiVersion"))) for d in docs}
        inventory_keys = inventory.by_key()
        all_keys = set(versions.items()) | {(e.key, e.version) for e in inventory.entries}
        verified = self._verified if self._verified is not None and self._verified[0] == state.last_applied \
            else None
        applied = self._applied_docs[1] if self._applied_docs is not None and \
            self._applied_docs[0] == state.last_applied else None
        if verified is not None and applied is not None and sha != state.last_applied:
            changed = {k for k, d in zip(versions, docs, strict=True)
                       if k not in inventory_keys or applied.get(k) != d or k not in verified[1]}
            changed |= set(inventory_keys) - set(versions)
            if len(changed) <= TARGETED_READ_LIMIT:
                live = read_objects(self.rest, [(k, v) for k, v in all_keys if k in changed])
                return live, frozenset(set(versions) - changed)
        live = read_live(self.rest, all_keys, selector=f"{SOURCE_LABEL}={self.label_value}")
        if verified is None or sha != state.last_applied:
            return live, frozenset()
        same = {k for k, rv in verified[1].items()
                if ((live.get(k) or {}).get("metadata") or {}).get("resourceVersion") == rv}
        return live, frozenset(same)

    def _remember_verified(self, sha: str, plan: Plan, execution: Execution, live: Mapping[ObjectKey, Any]) -> None:
        old = self._verified[1] if self._verified is not None else {}
        seen: dict[ObjectKey, str] = {}
        for key in plan.unchanged:
            obj = live.get(key)
            rv = (obj or {}).get("metadata", {}).get("resourceVersion") if obj is not None else old.get(key)
            if rv:
                seen[key] = rv
        for key, obj in execution.live_after.items():
            rv = (obj.get("metadata") or {}).get("resourceVersion")
            if rv:
                seen[key] = rv
        self._verified = (sha, seen)

    def validated_at(self, revision: str) -> Validated | None:
        """The validation of ``revision`` when it is the one this syncer validated last (audit records read its
        policy verdicts), else None."""
        if self._validated is not None and self._validated[0] == revision:
            return self._validated[1]
        return None

    def _validate(self, sha: str, state: SourceState) -> Validated:
        if self._validated is not None and self._validated[0] == sha:
            return self._validated[1]
        validated = self.validator(self.source, sha, state.last_applied)
        self._validated = (sha, validated)
        return validated

    def _previous(self, sha: str, state: SourceState, validated: Validated) -> Mapping[ObjectKey, Any] | None:
        """The desired objects of the revision last applied, when known: they tell drift from change."""
        if state.last_applied == sha:
            return {key_of_document(d): d for d in validated.documents}
        if self._applied_docs is not None and self._applied_docs[0] == state.last_applied:
            return self._applied_docs[1]
        return None

    # -- outcomes ----------------------------------------------------------------------------------------------

    def _roll_back(self, sha: str, state: SourceState, *, validated: Validated, plan: Plan, execution: Execution,
                   created: set[ObjectKey], timings: dict[str, float]) -> SyncResult:
        """Every attempt failed a write: put the last good revision's objects back (re-apply what was changed,
        delete what was created) from fresh live state, and say so in status, an Event and the audit trail."""
        good = state.last_applied
        failed = "; ".join(f"{f.key}: {f.reason}" for f in execution.failed) or "prunes held back"
        undone: Execution | None = None
        try:
            old_docs = self._documents_of(good, state)
            before = Inventory.from_status((state.status or {}).get("inventory"))
            extra = [e for e in plan.desired_inventory.entries if e.key in created and e.key not in before.key_set()]
            tracked = Inventory.of([*before.entries, *extra])
            live = read_live(self.rest, keys_of(old_docs, tracked), selector=f"{SOURCE_LABEL}={self.label_value}")
            back = rollback_plan(build_plan(good or sha, old_docs, live, tracked, prune=True, allow_empty=True,
                                            previous={key_of_document(d): d for d in old_docs},
                                            labels={SOURCE_LABEL: self.label_value}), created)
            undone = self.executor.execute(back)
            inventory = inventory_after(back, set(undone.applied), set(undone.pruned))
            how = (f"{len(undone.applied)} re-applied, {len(undone.pruned)} deleted" if undone.ok else
                   "rollback incomplete: " + "; ".join(f"{f.key}: {f.reason}" for f in undone.failed))
        except GitopsqError as err:
            inventory = inventory_after(plan, set(execution.applied), set(execution.pruned))
            how = f"rollback failed: {err}"
        message = (f"Revision {sha} not applied: {failed} (after {APPLY_ATTEMPTS} attempts); rolled back to "
                   f"revision {good or 'none'} ({how})")
        result = SyncResult("rolled-back", sha, False, plan, execution, validated, error=message, timings=timings,
                            attempts=APPLY_ATTEMPTS, rollback=undone, rolled_back_to=good)
        self._verified = None
        self.store.write(state, build_status(state.status, outcome="rolled-back", now=self.clock(),
                                             generation=state.generation, attempted=sha,
                                             inventory=inventory.to_status(), message=message))
        self.store.event(state, "RolledBack", message, warning=True)
        self._audit(audit_records(result, now=self.clock(), source_url=self.url, previous_revision=good))
        return result

    def _documents_of(self, revision: str | None, state: SourceState) -> tuple[Mapping[str, Any], ...]:
        """The objects of ``revision`` (the last good one): remembered, or read and validated again from Git."""
        if revision is None:
            return ()
        if self._applied_docs is not None and self._applied_docs[0] == revision:
            return tuple(self._applied_docs[1].values())
        return within_paths(self.validator(self.source, revision, None), state.paths).documents

def default_source_name(repo: str) -> str:
    """A GitSource name from the repository's last path component (``…/queues.git`` → ``queues``)."""
    tail = re.split(r"[/:]", repo.rstrip("/"))[-1].removesuffix(".git").lower()
    name = re.sub(r"[^a-z0-9-]+", "-", tail).strip("-")[:63].strip("-")
    return name or "gitopsq"


def source_label_value(ref: SourceRef) -> str:
    """``<namespace>.<name>`` of the GitSource, or a digest of it when longer than a label value may be."""
    value = f"{ref.namespace}.{ref.name}"
    if len(value) <= 63:
        return value
    return "h" + hashlib.sha256(value.encode()).hexdigest()[:40]


def _ready(state: SourceState) -> bool:
    conds = (state.status or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conds) and len(conds) == 1


def _stamp(now: datetime) -> str:
    return now.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
