"""Both CEL backends: runtime errors are values, runaway expressions stop at the same budget, compile errors point
at the fault, and the backend choice is a parameter."""

from __future__ import annotations

import pytest

from gitopsq.policy import get_backend
from gitopsq.policy.backend import ITERATION_BUDGET, CelCompileError, default_backend_name

from .helpers import BACKENDS

OBJECT = {"spec": {"cohort": "research", "n": 3, "items": [1, 2, 3]}}


def _run(backend: str, expression: str, data: dict[str, object] | None = None) -> object:
    b = get_backend(backend)
    values = {k: b.convert(v) for k, v in (data or {"object": OBJECT}).items()}
    return b.compile(expression).run(b.activation(values))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("expression", [
    "object.spec.missing == 1",
    "object.spec.cohort + 1 == 2",
    "object.spec.n / 0 == 1",
    "object.spec.cohort.size() > object.spec.items",
], ids=["missing field", "type mismatch", "division by zero", "comparing a number with a list"])
def test_runtime_error_is_a_value(backend: str, expression: str) -> None:
    """A runtime error comes back as an error outcome carrying a message, not as an exception."""
    outcome = _run(backend, expression)
    assert outcome.error and not outcome.over_budget  # type: ignore[attr-defined]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(("size", "stopped"), [
    (ITERATION_BUDGET - 1, False), (ITERATION_BUDGET, True),
], ids=["just under the budget", "at the budget"])
def test_iteration_budget_is_the_same_on_both_backends(backend: str, size: int, stopped: bool) -> None:
    """Comprehension iterations are bounded at cel-cpp's 10,000 on either backend."""
    outcome = _run(backend, "object.all(x, true)", {"object": list(range(size))})
    assert outcome.over_budget is stopped  # type: ignore[attr-defined]


@pytest.mark.parametrize("backend", BACKENDS)
def test_nested_runaway_is_stopped(backend: str) -> None:
    """A cubic nested comprehension over a modest list is stopped and reported, not run for minutes."""
    outcome = _run(backend, "object.all(a, object.all(b, object.all(c, true)))",
                   {"object": list(range(300))})
    assert outcome.over_budget and "10000" in outcome.error  # type: ignore[attr-defined]


@pytest.mark.parametrize("backend", BACKENDS)
def test_exists_short_circuits(backend: str) -> None:
    """``exists`` stops at the first match, so a long list with an early match stays within budget."""
    outcome = _run(backend, "object.exists(x, x == 0)", {"object": list(range(50_000))})
    assert outcome.value is True  # type: ignore[attr-defined]


@pytest.mark.parametrize("backend", BACKENDS)
def test_all_is_false_despite_errors(backend: str) -> None:
    """``all`` is false when any element is false, even if another element errors (CEL's commutative logic)."""
    outcome = _run(backend, "object.all(x, x.size() > 0)", {"object": [1, ""]})
    assert outcome.value is False  # type: ignore[attr-defined]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("expression", ["object.spec.x == (1", "object.?x", "a +* b"],
                         ids=["unclosed parenthesis", "optional syntax is outside the shared dialect", "two operators"])
def test_syntax_error_has_a_position(backend: str, expression: str) -> None:
    """A syntax error raises CelCompileError with a 1-based line and column inside the expression."""
    with pytest.raises(CelCompileError) as caught:
        get_backend(backend).compile(expression)
    assert caught.value.line == 1 and caught.value.column is not None


@pytest.mark.parametrize("backend", BACKENDS)
def test_syntax_error_column_points_at_the_fault(backend: str) -> None:
    """In ``a +* b`` both backends point at column 4, the stray ``*``."""
    with pytest.raises(CelCompileError) as caught:
        get_backend(backend).compile("a +* b")
    assert caught.value.column == 4


@pytest.mark.parametrize("backend", BACKENDS)
def test_undeclared_variable_is_a_compile_error(backend: str) -> None:
    """A misspelt context variable is refused when the policy loads, on both backends."""
    with pytest.raises(CelCompileError, match="undeclared reference"):
        get_backend(backend).compile("objct.spec.x == 1")


def test_default_backend_is_the_fast_one_when_installed() -> None:
    """With cel-expr-python installed, the default backend is the fast one; the reference stays selectable."""
    assert default_backend_name() == "cel-expr-python"
    assert get_backend("cel-python").name == "cel-python"


def test_unknown_backend_is_refused() -> None:
    """Asking for a backend that does not exist is a ValueError naming the choices."""
    with pytest.raises(ValueError, match="cel-python or cel-expr-python"):
        get_backend("cel-go")
