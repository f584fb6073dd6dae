"""Evaluate policies on a revision's changes: the one evaluation path for check, plan, sync and webhook.

Order of work (and of the verdicts returned):

1. Engine rules: a built-in Deny policy the repository tries to disable without the platform team changing
   ``gitopsq.yaml`` stays enabled and yields a deny; an object defined twice yields a deny.
2. ``Object`` policies, once per matching change, in change order (path, line, identity), then policy order.
3. ``Revision`` policies (aggregate rules over ``desired``/``aggregate``), once if any change matches.

A policy runs its variables in order, then every validation; each failing validation is one verdict. A runtime
error, a non-boolean result or an exhausted iteration budget is a failing verdict carrying the error, never an
exception. A policy with nothing failing yields one allowed verdict per change it matched.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gitopsq.policy.backend import Backend, CelCompileError, Outcome, Program, get_backend
from gitopsq.policy.model import Change, Policy, PolicyInput, Scope, Severity, Validation, Verdict
from gitopsq.policy.repo import owner_of_path, path_matches

ENGINE = "gitopsq-engine"
_PROGRAMS: dict[tuple[str, str], Program] = {}


def program(backend: Backend, expression: str) -> Program:
    """Compile once per (backend, expression); raises `CelCompileError`."""
    key = (backend.name, expression)
    found = _PROGRAMS.get(key)
    if found is None:
        found = backend.compile(expression)
        _PROGRAMS[key] = found
    return found


def _run(backend: Backend, expression: str, activation: object) -> Outcome:
    try:
        return program(backend, expression).run(activation)
    except CelCompileError as err:  # loaded on another backend; this one rejects it
        return Outcome(error=f"does not compile on {backend.name}: {err.message}")


def _expressions(policy: Policy) -> list[str]:
    out = [v.expression for v in policy.variables]
    for v in policy.validations:
        out.append(v.expression)
        if v.message_expression:
            out.append(v.message_expression)
    return out


def uses_desired(policy: Policy) -> bool:
    return any(re.search(r"\bdesired\b", e) for e in _expressions(policy))


def matches(policy: Policy, change: Change) -> bool:
    m = policy.match
    if m.kinds and change.key.kind not in m.kinds:
        return False
    if change.operation not in m.operations:
        return False
    return not m.paths or path_matches(change.path, m.paths)


def _request(change: Change, repo: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "operation": change.operation.value, "path": change.path, "line": change.line,
        "kind": change.key.kind, "group": change.key.group, "namespace": change.key.namespace,
        "name": change.key.name, "key": str(change.key),
        "movedFrom": change.old_path,
        "movedFromOwner": owner_of_path(repo, change.old_path) if change.old_path else None,
        "movedTo": change.moved_to,
        "movedToOwner": owner_of_path(repo, change.moved_to) if change.moved_to else None,
    }


@dataclass
class _Session:
    """Values converted once per revision (shared) and once per change (shared by every policy)."""

    backend: Backend
    pi: PolicyInput

    def __post_init__(self) -> None:
        b, pi = self.backend, self.pi
        self.shared = {
            "repo": b.convert(dict(pi.repo)), "previousRepo": b.convert(pi.previous_repo),
            "commit": b.convert(pi.commit), "actor": b.convert(pi.actor),
            "aggregate": b.convert(dict(pi.aggregate)),
        }
        self._desired: object = None
        self._changes: dict[int, dict[str, object]] = {}
        self._activations: dict[tuple[int, bool], object] = {}

    def desired(self) -> object:
        if self._desired is None:
            self._desired = self.backend.convert({k: list(v) for k, v in self.pi.desired.items()})
        return self._desired

    def for_change(self, index: int, change: Change | None, matched: list[Change]) -> dict[str, object]:
        cached = self._changes.get(index)
        if cached is None:
            b, repo = self.backend, self.pi.repo
            owner_name = owner_of_path(repo, change.path) if change else None
            cached = {
                "object": b.convert(dict(change.object) if change and change.object else None),
                "oldObject": b.convert(dict(change.old_object) if change and change.old_object else None),
                "operation": change.operation.value if change else None,
                "path": change.path if change else None,
                "owner": b.convert(repo["teamsByName"].get(owner_name) if owner_name else None),
                "request": b.convert(_request(change, repo) if change else None),
                "changes": b.convert([_request(c, repo) for c in matched]),
            }
            self._changes[index] = cached
        return cached

    def activation(self, index: int, values: dict[str, object], policy: Policy,
                   variables: dict[str, Any]) -> object:
        """Policies without variables share one activation per change (cel-cpp converts on creation)."""
        if variables:
            return self._build(values, policy, variables)
        key = (index, uses_desired(policy))
        found = self._activations.get(key)
        if found is None:
            found = self._activations[key] = self._build(values, policy, variables)
        return found

    def _build(self, values: dict[str, object], policy: Policy, variables: dict[str, Any]) -> object:
        bound = {**self.shared, **values, "variables": self.backend.convert(variables)}
        bound["desired"] = self.desired() if uses_desired(policy) else self.backend.convert({})
        return self.backend.activation(bound)


def _error_text(outcome: Outcome, what: str) -> tuple[str, str]:
    if outcome.over_budget:
        return f"{what} exceeded the evaluation cost limit: {outcome.error}", "CostLimitExceeded"
    return f"{what} failed to evaluate: {outcome.error}", "EvaluationError"


def _message(session: _Session, act: object, validation: Validation) -> str:
    if validation.message_expression:
        outcome = _run(session.backend, validation.message_expression, act)
        if not outcome.failed and isinstance(outcome.value, str) and outcome.value:
            return outcome.value
    return validation.message or f"failed expression: {validation.expression}"


def _run_policy(session: _Session, policy: Policy, index: int, values: dict[str, object], *,
                where: Change | None, scope_label: str | None) -> list[Verdict]:
    def verdict(allowed: bool, message: str, reason: str) -> Verdict:
        return Verdict(policy.name, policy.severity, allowed, scope_label,
                       where.path if where else None, where.line if where else None, message, reason)

    variables: dict[str, Any] = {}
    for var in policy.variables:
        act = session.activation(index, values, policy, variables)
        outcome = _run(session.backend, var.expression, act)
        if outcome.failed:
            return [verdict(False, *_error_text(outcome, f"variable {var.name!r}"))]
        variables[var.name] = outcome.value
    act = session.activation(index, values, policy, variables)
    failures: list[Verdict] = []
    for validation in policy.validations:
        outcome = _run(session.backend, validation.expression, act)
        if outcome.failed:
            failures.append(verdict(False, *_error_text(outcome, "expression")))
        elif not isinstance(outcome.value, bool):
            failures.append(verdict(False, f"expression returned {type(outcome.value).__name__}, not a bool",
                                    "EvaluationError"))
        elif not outcome.value:
            failures.append(verdict(False, _message(session, act, validation), validation.reason))
    return failures or [verdict(True, "", "")]


def select_policies(policies: Sequence[Policy], pi: PolicyInput) -> tuple[list[Policy], list[Verdict]]:
    """Apply ``policies.disabled`` from ``gitopsq.yaml``, refusing to drop a built-in Deny policy unless the
    platform team changed ``gitopsq.yaml`` in this revision (or it was already disabled before)."""
    disabled = set(pi.repo.get("policies", {}).get("disabled", []))
    before = set((pi.previous_repo or {}).get("policies", {}).get("disabled", []))
    config_change = next((c for c in pi.changes if c.key.kind == "RepositoryConfig"), None)
    actor = pi.actor
    by_platform = actor is not None and bool(actor.get("platform")) and (
        bool(actor.get("verified")) or pi.repo.get("signing", {}).get("mode") != "required")
    trusted_file = pi.commit is None and pi.previous_repo is None  # a working tree: nothing to compare with
    kept: list[Policy] = []
    refusals: list[Verdict] = []
    for policy in policies:
        if policy.name not in disabled:
            kept.append(policy)
            continue
        if not policy.builtin or policy.severity is Severity.WARN or policy.name in before or trusted_file:
            continue
        if config_change is not None and by_platform:
            continue
        kept.append(policy)
        who = actor.get("email") if actor else "an unknown author"
        refusals.append(Verdict(
            ENGINE, Severity.DENY, False, "RepositoryConfig/gitopsq.yaml", "gitopsq.yaml", None,
            f"built-in Deny policy {policy.name!r} may only be disabled by the platform team changing "
            f"gitopsq.yaml; this revision comes from {who}, so the policy stays enabled", "Forbidden"))
    return kept, refusals


def _duplicate_verdicts(pi: PolicyInput) -> list[Verdict]:
    out = []
    for dup in pi.duplicates:
        (first_path, first_line), *rest = dup.places
        others = ", ".join(f"{p}:{line}" if line else p for p, line in rest)
        out.append(Verdict(ENGINE, Severity.DENY, False, str(dup.key), first_path, first_line,
                           f"{dup.key} is defined more than once (also in {others}); "
                           "each object must live in exactly one file", "Duplicate"))
    return out


def evaluate(policies: Sequence[Policy], policy_input: PolicyInput,
             backend: Backend | str | None = None) -> tuple[Verdict, ...]:
    """Every verdict for the revision described by ``policy_input`` (see the module docstring for order)."""
    chosen = backend if backend is not None and not isinstance(backend, str) else get_backend(backend)
    active, verdicts = select_policies(policies, policy_input)
    verdicts.extend(_duplicate_verdicts(policy_input))
    session = _Session(chosen, policy_input)
    object_policies = [p for p in active if p.scope is Scope.OBJECT]
    for index, change in enumerate(policy_input.changes):
        for policy in object_policies:
            if matches(policy, change):
                values = session.for_change(index, change, [])
                verdicts.extend(_run_policy(session, policy, index, values, where=change, scope_label=str(change.key)))
    for number, policy in enumerate(p for p in active if p.scope is Scope.REVISION):
        matched = [c for c in policy_input.changes if matches(policy, c)]
        if matched:
            values = session.for_change(-1 - number, None, matched)
            verdicts.extend(_run_policy(session, policy, -1 - number, values, where=matched[0],
                                        scope_label=str(matched[0].key)))
    return tuple(verdicts)


def format_verdict(verdict: Verdict) -> str:
    """``policy <name>: <object> (<file>:<line>): <message>``."""
    return str(verdict)


def denials(verdicts: Sequence[Verdict]) -> list[Verdict]:
    return [v for v in verdicts if v.denies]

