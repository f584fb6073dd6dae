"""One sync of a Git source to the cluster, as a pipeline of named steps (docs/sync.md):

resolve the revision → validate it → read the live objects → plan → execute, then write the GitSource status.

The same `Syncer` serves ``gitopsq apply`` (one pass) and the controller's sync loop (many passes; it keeps
the last validated revision in memory so a no-change reconcile neither re-reads Git nor re-validates).

A revision is validated whole (gitopsq.sync.revision_validation) before the first write and applied all or
nothing (gitopsq.sync.whole); a head that does not descend from the applied revision is refused
(gitopsq.sync.forward_only); the queues' health is checked when asked (gitopsq.sync.health). docs/sync.md tells
the rest: suspend, paths, and why an unreadable inventory stalls the source.

Every step that ends a pass hands back an `Ending` (gitopsq.sync.outcomes) instead of writing; `Syncer.sync`
writes it once, in a ``finally`` (Flux's deferred status patch), so every path writes its status: a step that
raises after the GitSource was read leaves Ready=False with the error, never a stale "Applying revision".
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from datetime import UTC, datetime
from typing import cast

from gitopsq import logs
from gitopsq.api.model import ObjectKey
from gitopsq.api.raw_objects import JsonMapping, JsonObject, KubeObject
from gitopsq.audit.records import Record
from gitopsq.cluster.apply import Execution, Executor, KubeRest, read_live
from gitopsq.cluster.status import SourceRef, SourceState, StatusStore, build_status
from gitopsq.errors import GitopsqError, SourceError
from gitopsq.progress import NullProgress, Progress
from gitopsq.reconcile.inventory import Inventory, InventoryFormatError
from gitopsq.reconcile.pairing import Plan, build_plan, inventory_after, key_of_document
from gitopsq.source.port import Source
from gitopsq.sync import outcomes
from gitopsq.sync.forward_only import rewind_refusal
from gitopsq.sync.health import ObjectHealth, checked, summary, wait_healthy
from gitopsq.sync.labels import SOURCE_LABEL, source_label_value
from gitopsq.sync.live_reads import live_for_plan
from gitopsq.sync.outcomes import HEALTH_PENDING, Ending
from gitopsq.sync.port import AuditRecorder
from gitopsq.sync.revision_validation import check_pipeline_validator, within_paths
from gitopsq.sync.values import SyncOptions, SyncOutcome, SyncResult, Validated, Validator
from gitopsq.sync.whole import attempt, keys_of, rollback_plan

PROGRESS_THRESHOLD = 20  # plans with more writes than this first mark the GitSource Reconciling
DEFAULT_OPTIONS = SyncOptions()

HEALTH_GRACE = 10.0  # seconds the controller's pass waits for a new revision's health before reporting it pending
APPLY_ATTEMPTS = 3  # a failed write is retried from fresh state this many times in all, then rolled back

_log = logs.get("sync")


class _Run:
    """What one pass has learnt so far: the finaliser writes ``ending``, or an interrupted status over ``state``."""

    __slots__ = ("ending", "sha", "state")

    def __init__(self) -> None:
        self.state: SourceState | None = None
        self.sha: str | None = None
        self.ending: Ending | None = None

    def end(self, ended: tuple[SyncResult, Ending | None]) -> SyncResult:
        self.ending = ended[1]
        return ended[0]


class Syncer:
    """Syncs one source into one cluster, recording status in the GitSource ``ref``."""

    def __init__(self, source: Source, rest: KubeRest, ref: SourceRef, *, url: str,
                 validator: Validator | None = None, audit: AuditRecorder | None = None,
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
        self._applied_docs: tuple[str, Mapping[ObjectKey, JsonMapping]] | None = None
        # (revision, key -> resourceVersion at which live was seen equal to that revision's desired object)
        self._verified: tuple[str, dict[ObjectKey, str]] | None = None
        self._health_since: tuple[str, float] | None = None  # (revision, monotonic time its health was first asked)
        self.progress: Progress = NullProgress()  # `gitopsq apply` on a terminal sets a progress line
        self.interval: float | None = None  # the GitSource's spec.interval, as read by the last pass

    # -- pipeline --------------------------------------------------------------------------------------------

    def sync(self, options: SyncOptions = DEFAULT_OPTIONS) -> SyncResult:
        """One pass; its status is written once, at the end, whichever way it ends. Raises what a step raised (a
        ClusterError also when even the status cannot be read or written)."""
        run = _Run()
        try:
            return self._steps(run, options)
        except Exception as err:
            if run.state is not None and run.sha is not None and not options.dry_run:
                reason = str(err) if isinstance(err, GitopsqError) else "interrupted"
                run.ending = outcomes.interrupted(run.state, run.sha, reason, self.clock())
            raise
        finally:
            self._finish(run.ending)

    def _steps(self, run: _Run, options: SyncOptions) -> SyncResult:
        """resolve → read status → validate → read inventory → read live → plan → execute, each a method."""
        timings: dict[str, float] = {}
        started = time.perf_counter()
        try:
            sha = run.sha = self._resolve(options)
        except SourceError as err:
            state = None if options.dry_run else self.store.read()
            return run.end(outcomes.source_failed(err, options, state, self.clock()))
        timings["fetch"] = time.perf_counter() - started
        state = run.state = self._read_status(options)
        self.interval = state.interval
        if state.suspended and not options.dry_run:
            return run.end(outcomes.suspended(sha, state, self.clock()))
        refusal = rewind_refusal(self.source, sha, state.last_applied)  # before validation: it judges against it
        if refusal is not None:
            return run.end(outcomes.rewound(sha, state, refusal, options, now=self.clock(), url=self.url))
        validated = within_paths(self._validate(sha, state), state.paths)
        timings["validate"] = time.perf_counter() - started
        if validated.rejected:
            return run.end(outcomes.rejected(sha, state, validated, options, now=self.clock(), url=self.url))
        if self._trusted_unchanged(sha, state, options):
            return SyncResult("unchanged", sha, False, validated=validated, timings=timings)
        try:
            inventory = self._inventory(state)
        except InventoryFormatError as err:
            return run.end(outcomes.stalled(sha, state, validated, err, options, now=self.clock(),
                                            ref=self.store.ref))
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
        if len(plan.applies) + len(plan.prunes) > PROGRESS_THRESHOLD:  # long enough for Reconciling to mean much
            run.state = state = self._mark_applying(sha, state)
        result = self._apply_whole(run, sha, state, validated=validated, plan=plan, live=live, inventory=inventory,
                                   options=options, timings=timings, started=started)
        timings["status"] = time.perf_counter() - started
        return result

    def _finish(self, ending: Ending | None) -> None:
        """The finaliser: the pass's one status write, then its Events and audit records."""
        if ending is None:
            return
        if ending.forget_verified:
            self._verified = None
        try:
            written = self.store.write(ending.state, ending.status)
        except GitopsqError as err:
            if not ending.best_effort:
                raise
            _log.warning("status of an interrupted sync not written", error=str(err))
            return
        for notice in ending.notices:
            if written or not notice.if_written:
                self.store.event(ending.state, notice.reason, notice.message, warning=notice.warning)
        if written or not ending.records_if_written:
            self._audit(ending.records)

    def _audit(self, records: tuple[Record, ...]) -> None:
        if self.audit is None:
            return
        for record in records:
            try:
                self.audit.record(record)
            except Exception as err:  # the audit trail has its own WAL and retries; a sync never fails on it
                _log.warning("audit record not written", error=str(err))

    def _resolve(self, options: SyncOptions) -> str:
        return self.source.resolve(options.rev)

    @staticmethod
    def _inventory(state: SourceState) -> Inventory:
        return Inventory.from_status((state.status or {}).get("inventory"))

    def _mark_applying(self, sha: str, state: SourceState) -> SourceState:
        """Reconciling while a long plan is carried out; the GitSource as it then is."""
        self.store.write(state, build_status(state.status, outcome="progressing", now=self.clock(),
                                             generation=state.generation, attempted=sha,
                                             message=f"Applying revision {sha}"))
        return self.store.read()

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

    def _plan(self, sha: str, state: SourceState, *, validated: Validated, live: Mapping[ObjectKey, JsonMapping | None],
              assumed: frozenset[ObjectKey], inventory: Inventory, options: SyncOptions) -> Plan:
        return build_plan(sha, validated.documents, live, inventory, prune=options.prune,
                          allow_empty=options.allow_empty, previous=self._previous(sha, state, validated),
                          assume_unchanged=assumed, labels={SOURCE_LABEL: self.label_value})

    def _apply_whole(self, run: _Run, sha: str, state: SourceState, *, validated: Validated, plan: Plan,
                     live: Mapping[ObjectKey, JsonMapping | None], inventory: Inventory, options: SyncOptions,
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
                return run.end(outcomes.refused(sha, state, validated, plan, tried=tried, timings=timings,
                                                now=self.clock(), url=self.url))
            if tried.outcome == "applied":
                outcome: SyncOutcome = "applied" if execution.applied or execution.pruned or \
                    sha != state.last_applied else "unchanged"
                result = SyncResult(outcome, sha, False, plan, execution, validated, timings=timings,
                                    attempts=number)
                return self._succeeded(run, state, result, options, live)
            if number < APPLY_ATTEMPTS:  # fresh state: what this attempt wrote is now in the inventory
                inventory = inventory_after(plan, made, set(execution.pruned))
                live = read_live(self.rest, keys_of(validated.documents, inventory),
                                 selector=f"{SOURCE_LABEL}={self.label_value}")
                plan = self._plan(sha, state, validated=validated, live=live, assumed=frozenset(),
                                  inventory=inventory, options=options)
        return self._roll_back(run, sha, state, validated=validated, plan=plan, execution=execution,
                               created=created, timings=timings)

    def _succeeded(self, run: _Run, state: SourceState, result: SyncResult, options: SyncOptions,
                   live: Mapping[ObjectKey, JsonMapping | None]) -> SyncResult:
        """Record a complete apply, with the queues' health when asked."""
        plan, execution, sha = result.plan, result.execution, result.revision
        assert plan is not None and execution is not None and sha is not None and result.validated is not None
        self._applied_docs = (sha, {key_of_document(d): d for d in result.validated.documents})
        self._remember_verified(sha, plan, execution, live)
        inventory = inventory_after(plan, set(execution.applied), set(execution.pruned))
        judged = self._health(state, sha, plan, options)
        if judged is not None:
            health, pending, state = judged
            run.state = state
            result = replace(result, health=tuple(health))
            if not all(h.healthy for h in health):
                result = replace(result, outcome="health-pending" if pending else "unhealthy", error=summary(health))
        run.ending = outcomes.applied(state, result, inventory, now=self.clock(), url=self.url)
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

        def read(wanted: list[ObjectKey]) -> Mapping[ObjectKey, JsonMapping | None]:
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

    def _read_live(self, sha: str, state: SourceState, docs: tuple[JsonMapping, ...],
                   inventory: Inventory) -> tuple[dict[ObjectKey, JsonObject | None], frozenset[ObjectKey]]:
        """Live objects for the plan, and the keys that need no diff (gitopsq.sync.live_reads)."""
        verified = self._verified[1] if self._verified is not None and self._verified[0] == state.last_applied \
            else None
        applied = self._applied_docs[1] if self._applied_docs is not None and \
            self._applied_docs[0] == state.last_applied else None
        return live_for_plan(self.rest, sha, state.last_applied, docs, inventory, verified=verified, applied=applied,
                             selector=f"{SOURCE_LABEL}={self.label_value}")

    def _remember_verified(self, sha: str, plan: Plan, execution: Execution,
                           live: Mapping[ObjectKey, JsonMapping | None]) -> None:
        old = self._verified[1] if self._verified is not None else {}
        seen: dict[ObjectKey, str] = {}
        for key in plan.unchanged:
            obj = live.get(key)
            rv = cast(KubeObject, obj or {}).get("metadata", {}).get("resourceVersion") if obj is not None \
                else old.get(key)
            if rv:
                seen[key] = rv
        for key, obj in execution.live_after.items():
            rv = (cast(KubeObject, obj).get("metadata") or {}).get("resourceVersion")
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

    def _previous(self, sha: str, state: SourceState, validated: Validated) -> Mapping[ObjectKey, JsonMapping] | None:
        """The desired objects of the revision last applied, when known: they tell drift from change."""
        if state.last_applied == sha:
            return {key_of_document(d): d for d in validated.documents}
        if self._applied_docs is not None and self._applied_docs[0] == state.last_applied:
            return self._applied_docs[1]
        return None

    # -- rollback --------------------------------------------------------------------------------------------

    def _roll_back(self, run: _Run, sha: str, state: SourceState, *, validated: Validated, plan: Plan,
                   execution: Execution, created: set[ObjectKey], timings: dict[str, float]) -> SyncResult:
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
        run.ending = outcomes.rolled_back(state, result, inventory, now=self.clock(), url=self.url)
        return result

    def _documents_of(self, revision: str | None, state: SourceState) -> tuple[JsonMapping, ...]:
        """The objects of ``revision`` (the last good one): remembered, or read and validated again from Git."""
        if revision is None:
            return ()
        if self._applied_docs is not None and self._applied_docs[0] == revision:
            return tuple(self._applied_docs[1].values())
        return within_paths(self.validator(self.source, revision, None), state.paths).documents

def _ready(state: SourceState) -> bool:
    conds = (state.status or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conds) and len(conds) == 1

