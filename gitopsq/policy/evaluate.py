"""Evaluate policies on a revision's changes: the one evaluation path for check, plan, sync and webhook.

Order of work (and of the verdicts returned):

1. Engine rules: a built-in Deny policy the repository tries to disable without the platform team changing
   ``gitopsq.yaml`` stays enabled and yields a deny; an object defined twice yields a deny.
2. ``Object`` policies, once per matching change, in change order (path, line, identity), then policy order.
3. ``Revision`` policies (aggregate rules over ``desired``/``aggregate``), once if any change matches.

A policy runs its variables in order, then every validation; each failing validation is one verdict. A runtime
error, a non-boolean result or an exhausted iteration budget is a failing verdict carrying the error, never an
exception. A policy with nothing failing yields one allowed verdict per change it matched.

Cost: each evaluation stops after `ITERATION_BUDGET` comprehension iterations (the per-expression limit, the
same on both runtimes), and one `evaluate` call may spend at most `cost_limit` (``COST_BASE +
COST_PER_CHANGE`` × changes) work units in total: the work a runtime reports (cel-python: iterations weighted
by the size of their body, and it stops midway when the total runs out; cel-cpp, which cannot measure, charges
one per evaluation and the whole per-expression limit when an evaluation hits it). A variable may not hold a
string, list or map longer than `VALUE_LIMIT`, and a policy whose inlined expression would exceed cel-cpp's
size limit is not inlined. Past any limit the policy *denies* whatever its severity (fail closed), with a
message naming the policy file, the expression's line and the expression; once the total is spent no further
expression runs, so a file of expensive policies costs a bounded time.

Speed without changing any verdict: programs are compiled once per (backend, expression); each change is bound
once and shared by every policy; the validations of all variable-free policies matching a change first run as
one list expression, and only if that is not all true does each run alone to say what failed. On cel-cpp,
variables are inlined (re-evaluating is cheaper there than binding a value).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from gitopsq.policy.backend import ITERATION_BUDGET, WORK_LIMIT, Backend, CelCompileError, Outcome, Program, get_backend
from gitopsq.policy.expressions import inline_variables, mentions, prune, referenced_fields
from gitopsq.policy.language import Change, Policy, PolicyInput, Scope, Severity, Validation, Verdict
from gitopsq.policy.repo import owner_of_path, path_matches

ENGINE = "gitopsq-engine"
# Total cost one `evaluate` call may spend, in work units (a comprehension iteration weighs its body's node
# count; an evaluation one more): about a second on the reference backend for the base, plus ten times what
# the built-in library spends on a change (about 600 units on the repository template).
COST_BASE = 10 * ITERATION_BUDGET
COST_PER_CHANGE = 5_000


# An expression longer than cel-cpp's own limit is not inlined (its variables are bound one by one instead).
_INLINE_LIMIT = 100_000
_BATCH_LIMIT = 20_000
_VARIABLE_USE = re.compile(r"\bvariables\.([A-Za-z_][A-Za-z0-9_]*)")
# The largest string, list or map a variable may hold (doubling a string in each of 30 variables makes 2 GB).
VALUE_LIMIT = 1 << 20


def cost_limit(changes: int) -> int:
    """The total cost budget of one `evaluate` call over ``changes`` changes."""
    return COST_BASE + COST_PER_CHANGE * changes
_PROGRAMS: dict[tuple[str, str], Program] = {}


def program(backend: Backend, expression: str) -> Program:
    """Compile once per (backend, expression); raises `CelCompileError`."""
    key = (backend.name, expression)
    found = _PROGRAMS.get(key)
    if found is None:
        found = backend.compile(expression)
        _PROGRAMS[key] = found
    return found


def clear_program_cache() -> None:
    """Forget compiled programs (benchmarks measure compilation; a long-running controller never needs it)."""
    _PROGRAMS.clear()


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


def matches(policy: Policy, change: Change) -> bool:
    m = policy.match
    if m.kinds and change.key.kind not in m.kinds:
        return False
    if change.operation not in m.operations:
        return False
    return not m.paths or path_matches(change.path, m.paths)


@dataclass(frozen=True, slots=True)
class _Prepared:
    """A policy readied for one backend: expressions to run, with variables inlined where that is cheaper."""

    policy: Policy
    variables: tuple[tuple[str, str], ...]             # evaluated in order (empty when inlined)
    checks: tuple[tuple[Validation, str, str | None], ...]  # validation, expression, message expression

    @property
    def combined(self) -> str | None:
        """Every validation in one list: one evaluation when all pass, the usual case."""
        if len(self.checks) < 2:
            return None
        return "[" + ", ".join(f"({expression})" for _, expression, _ in self.checks) + "]"


def _inlined_size(policy: Policy) -> int:
    """How long the longest validation would be with variables inlined, computed without building it
    (doubling variables would otherwise expand to gigabytes of text)."""
    sizes: dict[str, int] = {}

    def size(text: str) -> int:
        found = _VARIABLE_USE.findall(text)
        return len(text) + sum(sizes.get(name, 0) + 2 for name in found)

    for variable in policy.variables:
        sizes[variable.name] = min(size(variable.expression), _INLINE_LIMIT + 1)
    texts = [t for v in policy.validations for t in (v.expression, v.message_expression) if t]
    return max((size(t) for t in texts), default=0)


def _prepare(policy: Policy, backend: Backend) -> _Prepared:
    if not backend.inline_variables or not policy.variables or _inlined_size(policy) > _INLINE_LIMIT:
        return _Prepared(policy, tuple((v.name, v.expression) for v in policy.variables),
                         tuple((v, v.expression, v.message_expression) for v in policy.validations))
    pairs = [(v.name, v.expression) for v in policy.variables]
    return _Prepared(policy, (), tuple(
        (v, inline_variables(v.expression, pairs),
         inline_variables(v.message_expression, pairs) if v.message_expression else None)
        for v in policy.validations))


class _Session:
    """Values converted once per revision (shared) and once per change (shared by every policy).

    Only the fields of ``repo``, ``commit``, ``actor``... that some expression can reach are bound, and
    ``desired`` only when some expression names it: binding is what costs on cel-cpp.
    """

    def __init__(self, backend: Backend, pi: PolicyInput, policies: Sequence[Policy], limit: int) -> None:
        self.backend, self.pi = backend, pi
        self.cost_limit, self.spent = limit, 0
        texts = [e for p in policies for e in _expressions(p)]
        fields = referenced_fields(texts)
        b = backend
        self.shared = {
            "repo": b.convert(prune(dict(pi.repo), fields["repo"])),
            "previousRepo": b.convert(prune(pi.previous_repo, fields["previousRepo"])),
            "commit": b.convert(prune(pi.commit, fields["commit"])),
            "commits": b.convert([dict(c) for c in pi.commits] if mentions(texts, "commits") else []),
            "actor": b.convert(prune(pi.actor, fields["actor"])),
            "aggregate": b.convert(prune(dict(pi.aggregate), fields["aggregate"])),
            "desired": b.convert({k: list(v) for k, v in pi.desired.items()} if mentions(texts, "desired") else {}),
            "variables": b.convert({}),
            "cluster": b.convert(str(pi.repo.get("cluster") or "")),  # the cluster judged (docs/fleet.md)
        }
        self._changes: dict[int, tuple[dict[str, object], object]] = {}
        self._owners: dict[str, str | None] = {}

    def owner(self, path: str | None) -> str | None:
        """The owning team's name, computed once per file (many objects share one)."""
        if path is None:
            return None
        if path not in self._owners:
            self._owners[path] = owner_of_path(self.pi.repo, path)
        return self._owners[path]

    def request(self, change: Change) -> dict[str, Any]:
        return {
            "operation": change.operation.value, "path": change.path, "line": change.line,
            "kind": change.key.kind, "group": change.key.group, "namespace": change.key.namespace,
            "name": change.key.name, "key": str(change.key),
            "movedFrom": change.old_path, "movedFromOwner": self.owner(change.old_path),
            "movedTo": change.moved_to, "movedToOwner": self.owner(change.moved_to),
        }

    def for_change(self, index: int, change: Change | None, matched: list[Change]) -> tuple[dict[str, object], object]:
        """The change's bound values and the activation every variable-free policy shares."""
        cached = self._changes.get(index)
        if cached is None:
            b, repo = self.backend, self.pi.repo
            owner_name = self.owner(change.path) if change else None
            values = {
                **self.shared,
                "object": b.convert(dict(change.object) if change and change.object else None),
                "oldObject": b.convert(dict(change.old_object) if change and change.old_object else None),
                "operation": change.operation.value if change else None,
                "path": change.path if change else None,
                "owner": b.convert(repo.get("teamsByName", {}).get(owner_name) if owner_name else None),
                "request": b.convert(self.request(change) if change else None),
                "changes": b.convert([self.request(c) for c in matched]),
            }
            cached = self._changes[index] = (values, b.activation(values))
        return cached

    def run(self, expression: str, act: object) -> Outcome:
        """Evaluate unless the total budget is spent; charge what the evaluation cost."""
        if self.spent >= self.cost_limit:
            return Outcome(error=f"not evaluated: the policy cost budget of this check ({self.cost_limit:,} "
                           "units) is spent", over_budget=True, cost=0)
        token = WORK_LIMIT.set(self.cost_limit - self.spent)
        try:
            outcome = _run(self.backend, expression, act)
        finally:
            WORK_LIMIT.reset(token)
        self.spent += outcome.cost
        return outcome

    def with_variables(self, values: dict[str, object], variables: dict[str, Any]) -> object:
        return self.backend.activation({**values, "variables": self.backend.convert(variables)})


def _error_text(outcome: Outcome, what: str, policy: Policy, line: int | None, expression: str) -> tuple[str, str]:
    shown = " ".join(expression.split())
    shown = shown if len(shown) <= 120 else shown[:117] + "..."
    where = f"({policy.source}:{line or policy.line}: {shown})"
    if outcome.over_budget:
        return f"{what} exceeded the evaluation cost limit {where}: {outcome.error}", "CostLimitExceeded"
    return f"{what} failed to evaluate {where}: {outcome.error}", "EvaluationError"


def _message(session: _Session, act: object, validation: Validation, message_expression: str | None) -> str:
    if message_expression:
        outcome = session.run(message_expression, act)
        if not outcome.failed and isinstance(outcome.value, str) and outcome.value:
            return outcome.value
    return validation.message or f"failed expression: {validation.expression}"


def _run_policy(session: _Session, prepared: _Prepared, index: int, change: Change | None,
                matched: list[Change]) -> list[Verdict]:
    policy, where = prepared.policy, change or (matched[0] if matched else None)

    def verdict(allowed: bool, message: str, reason: str) -> Verdict:
        # A policy that could not be evaluated within its cost denies, whatever its severity (fail closed).
        severity = Severity.DENY if reason == "CostLimitExceeded" else policy.severity
        return Verdict(policy.name, severity, allowed, str(where.key) if where else None,
                       where.path if where else None, where.line if where else None, message, reason)

    values, act = session.for_change(index, change, matched)
    variables: dict[str, Any] = {}
    for name, expression in prepared.variables:
        outcome = session.run(expression, session.with_variables(values, variables) if variables else act)
        if outcome.failed:
            return [verdict(False, *_error_text(outcome, f"variable {name!r}", policy, policy.line, expression))]
        held = outcome.value
        if isinstance(held, str | bytes | list | dict) and len(held) > VALUE_LIMIT:
            over = Outcome(error=f"its value holds {len(held):,} items or characters; the limit is {VALUE_LIMIT:,}",
                           over_budget=True)
            return [verdict(False, *_error_text(over, f"variable {name!r}", policy, policy.line, expression))]
        session.spent += len(held) // 100 if isinstance(held, str | bytes | list | dict) else 0
        variables[name] = held
    if variables:
        act = session.with_variables(values, variables)
    if prepared.combined is not None:
        outcome = session.run(prepared.combined, act)
        if not outcome.failed and outcome.value == [True] * len(prepared.checks):
            return [verdict(True, "", "")]
    failures: list[Verdict] = []  # evaluate one by one to say precisely what failed
    for validation, expression, message_expression in prepared.checks:
        outcome = session.run(expression, act)
        if outcome.failed:
            failures.append(verdict(False, *_error_text(outcome, "expression", policy, validation.line,
                                                        validation.expression)))
        elif not isinstance(outcome.value, bool):
            failures.append(verdict(False, f"expression returned {type(outcome.value).__name__}, not a bool",
                                    "EvaluationError"))
        elif not outcome.value:
            failures.append(verdict(False, _message(session, act, validation, message_expression),
                                    validation.reason))
    return failures or [verdict(True, "", "")]


def _batch(items: Sequence[_Prepared]) -> str | None:
    """Every validation of several variable-free policies as one list expression (None when not possible)."""
    if len(items) < 2 or any(item.variables for item in items):
        return None
    batch = "[" + ", ".join(f"({expression})" for item in items for _, expression, _ in item.checks) + "]"
    return batch if len(batch) <= _BATCH_LIMIT else None  # compiling a huge batch would cost more than it saves


def _batch_passes(session: _Session, batch: str | None, index: int, change: Change) -> bool:
    """Whether the batch evaluates to all-true; on any false or error the caller evaluates one by one."""
    if batch is None:
        return False
    _, act = session.for_change(index, change, [])
    outcome = session.run(batch, act)
    return not outcome.failed and isinstance(outcome.value, list) and all(v is True for v in outcome.value)


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
    session = _Session(chosen, policy_input, active, cost_limit(len(policy_input.changes)))
    prepared = [_prepare(p, chosen) for p in active]
    object_policies = [p for p in prepared if p.policy.scope is Scope.OBJECT]
    batches: dict[tuple[int, ...], str | None] = {}
    for index, change in enumerate(policy_input.changes):
        chosen_items = [(n, item) for n, item in enumerate(object_policies) if matches(item.policy, change)]
        key = tuple(n for n, _ in chosen_items)
        if key not in batches:
            batches[key] = _batch([item for _, item in chosen_items])
        if _batch_passes(session, batches[key], index, change):
            verdicts.extend(Verdict(item.policy.name, item.policy.severity, True, str(change.key), change.path,
                                    change.line, "", "") for _, item in chosen_items)
            continue
        for _, item in chosen_items:
            verdicts.extend(_run_policy(session, item, index, change, []))
    for number, item in enumerate(p for p in prepared if p.policy.scope is Scope.REVISION):
        matched = [c for c in policy_input.changes if matches(item.policy, c)]
        if matched:
            verdicts.extend(_run_policy(session, item, -1 - number, None, matched))
    return tuple(verdicts)


def format_verdict(verdict: Verdict) -> str:
    """``policy <name>: <object> (<file>:<line>): <message>``."""
    return str(verdict)


def denials(verdicts: Sequence[Verdict]) -> list[Verdict]:
    return [v for v in verdicts if v.denies]

