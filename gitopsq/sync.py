"""One sync of a Git source to the cluster: fetch → validate → plan → apply → status (the shell pipeline).

The same `Syncer` serves ``gitopsq apply`` (one pass) and the controller's sync loop (many passes; it keeps
the last validated revision in memory so a no-change reconcile neither re-reads Git nor re-validates).

A revision is validated whole by the same pipeline as ``gitopsq check`` (gitopsq.sync_validate) before the
first write; a rejected revision writes nothing but its status, and the last applied revision stays live.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

from gitopsq import logs
from gitopsq.api.model import ObjectKey
from gitopsq.cluster.apply import Execution, Executor, KubeRest, read_live, read_objects
from gitopsq.cluster.status import SourceRef, SourceState, StatusStore, build_status
from gitopsq.errors import EXIT_OK, EXIT_REJECTED, EXIT_RUNTIME, ClusterError, SourceError
from gitopsq.plan.inventory import Inventory, InventoryFormatError, version_of
from gitopsq.plan.sync_plan import Plan, build_plan, inventory_after, key_of_document
from gitopsq.source.port import Source
from gitopsq.sync_report import audit_records, summary
from gitopsq.sync_validate import check_pipeline_validator, from_report

# Import paths other modules use: reporting and validation live in their own modules.
__all__ = ["SOURCE_LABEL", "SyncOptions", "SyncOutcome", "SyncResult", "Syncer", "Validated", "Validator",
           "audit_records", "check_pipeline_validator", "from_report", "source_label_value", "summary"]


def _log() -> Any:
    """The logger, looked up at use: a module-level bound logger would freeze the configuration of import time."""
    return logs.get("sync")
SyncOutcome = Literal["applied", "unchanged", "rejected", "failed"]
TARGETED_READ_LIMIT = 200  # above this many changed objects, LISTs beat one GET each
SOURCE_LABEL = "gitopsq.dev/source"  # on every applied object: <namespace>.<name> of its GitSource
PROGRESS_THRESHOLD = 20  # plans with more writes than this first mark the GitSource Reconciling


@dataclass(frozen=True, slots=True)
class Validated:
    """A validated revision: its objects as v1beta2 wire documents, the findings, and whether it is refused.

    ``reason_code`` is the Ready condition reason for a refusal: ``ValidationFailed`` or ``PolicyDenied``.
    Findings are JSON objects (severity, reason, message, path, line, object) as ``status.lastRejection`` holds.
    """

    documents: tuple[Mapping[str, Any], ...]
    findings: tuple[Mapping[str, Any], ...] = ()
    rejected: bool = False
    reason: str = ""
    reason_code: str = "ValidationFailed"


Validator = Callable[[Source, str, "str | None"], Validated]
"""(source, commit, last applied commit or None) -> Validated: the same pipeline as `gitopsq check`."""


@dataclass(frozen=True, slots=True)
class SyncOptions:
    rev: str = "HEAD"
    prune: bool = True
    dry_run: bool = False
    allow_empty: bool = False
    drift_check: bool = True  # False: when the revision is the applied one, trust the last check and read no live


@dataclass(frozen=True, slots=True)
class SyncResult:
    """What one sync did; ``exit_code`` is what ``gitopsq apply`` returns (0 / 1 rejected / 3 failed)."""

    outcome: SyncOutcome
    revision: str | None
    dry_run: bool
    plan: Plan | None = None
    execution: Execution | None = None
    validated: Validated | None = None
    error: str | None = None
    timings: Mapping[str, float] = field(default_factory=dict)

    @property
    def exit_code(self) -> int:
        return {"applied": EXIT_OK, "unchanged": EXIT_OK, "rejected": EXIT_REJECTED}.get(self.outcome, EXIT_RUNTIME)

    def to_json(self) -> dict[str, Any]:
        return summary(self)


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

    def sync(self, options: SyncOptions = SyncOptions()) -> SyncResult:
        """One pass. Raises ClusterError only when even the status cannot be read or written."""
        timings: dict[str, float] = {}
        started = time.perf_counter()
        try:
            sha = self.source.resolve(options.rev)
        except SourceError as err:
            return self._source_failed(err, options)
        timings["fetch"] = time.perf_counter() - started
        state = self.store.read()
        if not state.exists and not options.dry_run:
            state = self.store.ensure(url=self.url, ref=options.rev, prune=options.prune)
        validated = self._validate(sha, state)
        timings["validate"] = time.perf_counter() - started
        if validated.rejected:
            return self._rejected(sha, state, validated, options)
        if not options.drift_check and not options.dry_run and sha == state.last_applied and _ready(state) \
                and self._verified is not None and self._verified[0] == sha:
            return SyncResult("unchanged", sha, False, validated=validated, timings=timings)
        try:
            inventory = Inventory.from_status((state.status or {}).get("inventory"))
        except InventoryFormatError as err:
            raise ClusterError(f"GitSource {self.store.ref} has an unreadable inventory: {err}") from err
        docs = validated.documents
        live, assumed = self._read_live(sha, state, docs, inventory)
        plan = build_plan(sha, docs, live, inventory, prune=options.prune, allow_empty=options.allow_empty,
                          previous=self._previous(sha, state, validated), assume_unchanged=assumed,
                          labels={SOURCE_LABEL: self.label_value})
        timings["plan"] = time.perf_counter() - started
        if options.dry_run:
            execution = self.executor.execute(plan, dry_run=True)
            return SyncResult("applied" if execution.ok else "failed", sha, True, plan, execution, validated,
                              timings=timings)
        if plan.is_noop and not plan.conflicts and state.last_applied == sha and _ready(state):
            nothing = Execution(False)
            self._applied_docs = (sha, {key_of_document(d): d for d in docs})
            self._remember_verified(sha, plan, nothing, live)
            return SyncResult("unchanged", sha, False, plan, nothing, validated, timings=timings)
        if len(plan.applies) + len(plan.prunes) > PROGRESS_THRESHOLD:  # long enough for Reconciling to mean much
            self.store.write(state, build_status(state.status, outcome="progressing", now=self.clock(),
                                                 generation=state.generation, attempted=sha,
                                                 message=f"Applying revision {sha}"))
            state = self.store.read()
        execution = self.executor.execute(plan)
        timings["apply"] = time.perf_counter() - started
        outcome: SyncOutcome = "failed" if not execution.ok else \
            ("applied" if execution.applied or execution.pruned or sha != state.last_applied else "unchanged")
        result = SyncResult(outcome, sha, False, plan, execution, validated, timings=timings)
        self._report(state, result, inventory_after(plan, set(execution.applied), set(execution.pruned)))
        if execution.ok:
            self._applied_docs = (sha, {key_of_document(d): d for d in docs})
            self._remember_verified(sha, plan, execution, live)
        else:
            self._verified = None
        timings["status"] = time.perf_counter() - started
        return result

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
            self._audit(audit_records(self, result, state))
        return result

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
            self._audit(audit_records(self, result, state))

    def _audit(self, records: list[Any]) -> None:
        if self.audit is None:
            return
        for record in records:
            try:
                self.audit.record(record)
            except Exception as err:  # the audit trail has its own WAL and retries; a sync never fails on it
                _log().warning("audit record not written", error=str(err))


def source_label_value(ref: SourceRef) -> str:
    """``<namespace>.<name>`` of the GitSource, or a digest of it when longer than a label value may be."""
    value = f"{ref.namespace}.{ref.name}"
    if len(value) <= 63:
        return value
    import hashlib

    return "h" + hashlib.sha256(value.encode()).hexdigest()[:40]


def _ready(state: SourceState) -> bool:
    conds = (state.status or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conds) and len(conds) == 1


def _stamp(now: datetime) -> str:
    return now.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
