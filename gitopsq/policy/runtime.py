"""The small interface every CEL runtime sits behind (the choice between runtimes is `backend`).

Two backends implement it: ``cel-python`` (the reference, pure Python, `gitopsq.policy.cel`) and
``cel-expr-python`` (Google's cel-cpp runtime, `gitopsq.policy.cel_fast`). Both evaluate the same dialect:
standard CEL plus the Kubernetes functions of `gitopsq.policy.functions`, without cel-go extensions that only
one runtime has (optional chaining ``.?``, ``cel.bind``). Both stop an evaluation after
`ITERATION_BUDGET` comprehension iterations, cel-cpp's own bound, so a runaway expression yields the same
verdict on either runtime.

A leaf: both runtimes implement it, and `backend`, the one module that imports them, hands one out.
"""

from __future__ import annotations

from collections.abc import Mapping
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Protocol

# Comprehension iterations one evaluation may run; cel-cpp fails the 10,000th, and cel-python is held to it.
ITERATION_BUDGET = 10_000
# What is left of the check's total cost budget while one evaluation runs (set by `evaluate`); a runtime that
# can measure its work mid-run (cel-python) stops there.
WORK_LIMIT: ContextVar[int | None] = ContextVar("gitopsq_cel_work_limit", default=None)

# Every name an expression may reference; both runtimes declare exactly these (as dyn).
VARIABLE_NAMES = (
    "object", "oldObject", "operation", "path", "owner", "repo", "previousRepo", "commit", "commits", "actor",
    "desired", "aggregate", "changes", "request", "variables", "cluster",
)

REFERENCE = "cel-python"
FAST = "cel-expr-python"
BACKEND_NAMES = (REFERENCE, FAST)


class CelCompileError(Exception):
    """An expression does not compile; ``line`` and ``column`` are 1-based positions inside the expression."""

    def __init__(self, message: str, line: int | None = None, column: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.line = line
        self.column = column


@dataclass(frozen=True, slots=True)
class Outcome:
    """What one evaluation produced: a plain Python value, or an error text, or an exhausted budget."""

    value: object = None
    error: str | None = None
    over_budget: bool = False
    cost: int = 1  # work done (iterations weighted by body size, where measured), plus one

    @property
    def failed(self) -> bool:
        return self.error is not None or self.over_budget


class Program(Protocol):
    def run(self, activation: object) -> Outcome: ...


class Backend(Protocol):
    """A CEL runtime: compile once, convert a revision's values once, evaluate many times."""

    name: str
    inline_variables: bool  # True when re-evaluating a variable is cheaper than binding its value

    def compile(self, expression: str) -> Program:
        """Compile, raising `CelCompileError` with the position of the fault."""
        ...

    def convert(self, value: object) -> object:
        """Turn a plain JSON-like value into this runtime's value (done once per revision and reused)."""
        ...

    def activation(self, values: Mapping[str, object]) -> object:
        """Bind converted values to variable names for `Program.run`."""
        ...
