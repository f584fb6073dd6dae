"""One sync of a Git source to the cluster, as a pipeline of named steps (docs/sync.md):

resolve the revision → validate it → read the live objects → plan → execute, then write the GitSource status.

The same `Syncer` serves ``gitopsq apply`` (one pass) and the controller's sync loop (many passes; it keeps
the last validated revision in memory so a no-change reconcile neither re-reads Git nor re-validates).

A revision is validated whole by the same pipeline as ``gitopsq check`` (gitopsq.sync.validate) before the
first write; a rejected revision writes nothing but its status, and the last applied revision stays live. The
status of an executed plan is written in a ``finally``, so a pass that fails half-way never leaves the GitSource
saying it is still applying. An inventory that cannot be read marks the GitSource Stalled: pruning from it
would be a guess, and retrying cannot fix it (a person must).
"""

from __future__ import annotations

import hashlib
import re
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

from gitopsq import logs
from gitopsq.api.model import ObjectKey
from gitopsq.cluster.apply import Execution, Executor, KubeRest, read_live, read_objects
from gitopsq.cluster.status import SourceRef, SourceState, StatusStore, build_status
from gitopsq.errors import GitopsqError, SourceError
from gitopsq.source.port import Source
from gitopsq.sync.inventory import Inventory, InventoryFormatError, version_of
from gitopsq.sync.model import SyncOptions, SyncOutcome, SyncResult, Validated, Validator
from gitopsq.sync.plan import Plan, build_plan, inventory_after, key_of_document
from gitopsq.sync.report import audit_records
from gitopsq.sync.validate import check_pipeline_validator

_log = logs.get("sync")

TARGETED_READ_LIMIT = 200  # above this many changed objects, LISTs beat one GET each
SOURCE_LABEL = "gitopsq.dev/source"  # on every applied object: <namespace>.<name> of its GitSource
PROGRESS_THRESHOLD = 20  # plans with more writes than this first mark the GitSource Reconciling
DEFAULT_OPTIONS = SyncOptions()
INVENTORY_UNREADABLE = "InventoryUnreadable"  # the Ready/Stalled reason of a GitSource whose inventory is broken


class Syncer:
    """Syncs one source into one cluster, recording status in the GitSource ``ref``."""

    def __init__(self, source: Source, rest: KubeRest, ref: SourceRef, *, url: str,
                 validator: Validator | None = None, audit: Any = None,
                 clock: Callable[[], datetime] | None = None) -> None:
        self.source = source
        self.rest = rest
        self.url = url
        self.clock = clock or (lambda: datetime.now(UTC))
        self.store = StatusStore(rest, ref, clock=self.clock)
        self.label_value = source_label_value(ref)
        self.executor = Executor(rest)
        self.validator = validator or check_pipeline_validator()
        self.audit = audit
        self._validated: tuple[str, Validated] | None = None
        self._applied_docs: tuple[str, Mapping[ObjectKey, Mapping[str, Any]]] | None = None
        # (revision, key -> resourceVersion at which live was seen equal to that revision's desired object)
        self._verified: tuple[str, dict[ObjectKey, str]] | None = None

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
        validated = self._validate(sha, state)
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
            return SyncResult("applied" if execution.ok else "failed", sha, True, plan, execution, validated,
                              timings=timings)
        if plan.is_noop and not plan.conflicts and state.last_applied == sha and _ready(state):
            nothing = Execution(False)
            self._applied_docs = (sha, {key_of_document(d): d for d in validated.documents})
            self._remember_verified(sha, plan, nothing, live)
            return SyncResult("unchanged", sha, False, plan, nothing, validated, timings=timings)
        result = self._execute(sha, state, validated=validated, plan=plan, live=live, timings=timings,
                               started=started)
        timings["status"] = time.perf_counter() - started
        return result

    def _read_status(self, options: SyncOptions) -> SourceState:
        """The GitSource as it is, created first (spec only) on a first real sync."""
        state = self.store.read()
        if not state.exists and not options.dry_run:
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
                 live: Mapping[ObjectKey, Any], timings: dict[str, float], started: float) -> SyncResult:
        """Carry the plan out and write its status in a ``finally``: a pass interrupted after it marked the
        GitSource Reconciling records the failure instead of leaving "Applying revision" behind."""
        marked = False
        if len(plan.applies) + len(plan.prunes) > PROGRESS_THRESHOLD:  # long enough for Reconciling to mean much
            self.store.write(state, build_status(state.status, outcome="progressing", now=self.clock(),
                                                 generation=state.generation, attempted=sha,
                                                 message=f"Applying revision {sha}"))
            state, marked = self.store.read(), True
        result: SyncResult | None = None
        interrupted = "interrupted"
        try:
            execution = self.executor.execute(plan)
            timings["apply"] = time.perf_counter() - started
            outcome: SyncOutcome = "failed" if not execution.ok else \
                ("applied" if execution.applied or execution.pruned or sha != state.last_applied else "unchanged")
            result = SyncResult(outcome, sha, False, plan, execution, validated, timings=timings)
            return result
        except GitopsqError as err:
            interrupted = str(err)
            raise
        finally:
            if result is not None and result.execution is not None:
                execution = result.execution
                self._report(state, result, inventory_after(plan, set(execution.applied), set(execution.pruned)))
                if execution.ok:
                    self._applied_docs = (sha, {key_of_document(d): d for d in validated.documents})
                    self._remember_verified(sha, plan, execution, live)
                else:
                    self._verified = None
            elif marked:
                self._interrupted(state, sha, interrupted)

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

    def _source_failed(self, err: SourceError, options: SyncOptions) -> SyncResult:
        result = SyncResult("failed", None, options.dry_run, error=f"source unavailable: {err}")
        if options.dry_run:
            return result
        state = self.store.read()
        if state.exists:
            status = build_status(state.status, outcome="source-unavailable", now=self.clock(),
                                  generation=state.generation, message=str(err))
            if self.store.write(state, status):
                self.store.event(state, "SourceUnavailable", str(err), warning=True)
        return result

    def _rejected(self, sha: str, state: SourceState, validated: Validated, options: SyncOptions) -> SyncResult:
        result = SyncResult("rejected", sha, options.dry_run, validated=validated, error=validated.reason)
        if options.dry_run:
            return result
        first_time = state.last_rejected != sha
        rejection = {"revision": sha, "time": _stamp(self.clock()) if first_time else
                     ((state.status or {}).get("lastRejection") or {}).get("time"),
                     "findings": [{k: v for k, v in f.items() if v is not None} for f in validated.findings[:50]]}
        message = f"Revision {sha} rejected: {validated.reason}; revision {state.last_applied or 'none'} stays applied"
        status = build_status(state.status, outcome="rejected", now=self.clock(), generation=state.generation,
                              attempted=sha, rejection=rejection, message=message, reason=validated.reason_code)
        self.store.write(state, status)
        if first_time:
            self.store.event(state, "Rejected", message, warning=True)
            self._audit(audit_records(result, now=self.clock(), source_url=self.url,
                                      previous_revision=state.last_applied))
        return result

    def _stalled(self, sha: str, state: SourceState, validated: Validated, err: InventoryFormatError,
                 options: SyncOptions) -> SyncResult:
        """The inventory in the status does not parse: nothing is pruned or applied from a guess, and the
        GitSource says Stalled (final until someone repairs or clears ``status.inventory``)."""
        message = f"GitSource {self.store.ref} has an unreadable inventory: {err}"
        result = SyncResult("stalled", sha, options.dry_run, validated=validated, error=message)
        if options.dry_run:
            return result
        status = build_status(state.status, outcome="rejected", now=self.clock(), generation=state.generation,
                              attempted=sha, message=message, reason=INVENTORY_UNREADABLE)
        if self.store.write(state, status):
            self.store.event(state, "SyncFailed", message, warning=True)
        return result

    def _interrupted(self, state: SourceState, sha: str, error: str) -> None:
        """Best effort: the API that failed the pass may refuse this write too; the pass's error is the news."""
        status = build_status(state.status, outcome="failed", now=self.clock(), generation=state.generation,
                              attempted=sha, message=f"Revision {sha} not applied: {error}")
        try:
            self.store.write(state, status)
        except GitopsqError as err:
            _log.warning("status of an interrupted sync not written", error=str(err))

    def _report(self, state: SourceState, result: SyncResult, inventory: Inventory) -> None:
        plan, execution = result.plan, result.execution
        assert plan is not None and execution is not None
        sha = result.revision
        conflicts = [f"{c.key}: {c.manager}" for c in plan.conflicts]
        if execution.ok:
            parts = [f"Applied revision {sha}: {len(execution.applied)} applied, {len(execution.pruned)} pruned, "
                     f"{len(plan.unchanged)} unchanged"]
            if conflicts:
                parts.append(f"{len(conflicts)} left to another manager ({'; '.join(conflicts)})")
            if plan.pending_prune:
                parts.append(f"{len(plan.pending_prune)} no longer in Git but not pruned")
            status = build_status(state.status, outcome="applied", now=self.clock(), generation=state.generation,
                                  attempted=sha, applied=sha, inventory=inventory.to_status(),
                                  message="; ".join(parts))
        else:
            failed = "; ".join(f"{f.key}: {f.reason}" for f in execution.failed)
            status = build_status(state.status, outcome="failed", now=self.clock(), generation=state.generation,
                                  attempted=sha, inventory=inventory.to_status(),
                                  message=f"Revision {sha} partly applied ({len(execution.applied)} applied, "
                                          f"{len(execution.failed)} failed, {len(execution.not_attempted)} prunes "
                                          f"held back): {failed}")
        status["conflicts"] = conflicts
        old_conflicts = (state.status or {}).get("conflicts") or []
        self.store.write(state, status)
        drifted = plan.drifted
        changed = [k for k in execution.applied if k not in set(drifted)] + list(execution.pruned)
        if not execution.ok:
            self.store.event(state, "SyncFailed", status["conditions"][0]["message"], warning=True)
        if changed:
            self.store.event(state, "Synced", status["conditions"][0]["message"])
        if drifted and execution.ok:
            self.store.event(state, "DriftCorrected",
                             f"Corrected drift on {', '.join(str(k) for k in drifted)} (revision {sha})")
        if conflicts and conflicts != old_conflicts:
            self.store.event(state, "ConflictDetected", "; ".join(conflicts), warning=True)
        if changed or drifted or not execution.ok:
            self._audit(audit_records(result, now=self.clock(), source_url=self.url,
                                      previous_revision=state.last_applied))

    def _audit(self, records: list[Any]) -> None:
        if self.audit is None:
            return
        for record in records:
            try:
                self.audit.record(record)
            except Exception as err:  # the audit trail has its own WAL and retries; a sync never fails on it
                _log.warning("audit record not written", error=str(err))


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
