"""The reference CEL backend: cel-python (``celpy``). The only module that imports celpy.

cel-python has no cost limit, so evaluation runs on an interpreter that counts comprehension iterations and
stops at `ITERATION_BUDGET`, the bound cel-cpp applies; ``all``/``exists`` short-circuit the way cel-cpp's do,
so both runtimes spend the same iterations on the same expression.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import celpy
import lark
from celpy import celtypes
from celpy.adapter import json_to_cel
from celpy.celparser import CELParseError
from celpy.evaluation import Activation, CELEvalError, Evaluator, bool_eq, bool_ne

from gitopsq.policy import functions as fn
from gitopsq.policy.runtime import ITERATION_BUDGET, REFERENCE, VARIABLE_NAMES, WORK_LIMIT, CelCompileError, Outcome

_OVER_BUDGET = "evaluation stopped: more than 10000 comprehension iterations"


_OVER_WORK = "evaluation stopped: the policy cost budget of this check is spent"
_WEIGHTS: dict[int, tuple[lark.Tree[Any], int]] = {}  # macro body -> (the body, kept alive; its node count)


def _weight(ast: lark.Tree[Any]) -> int:
    found = _WEIGHTS.get(id(ast))
    if found is None:
        found = _WEIGHTS[id(ast)] = (ast, sum(1 for _ in ast.iter_subtrees()))
    return found[1]


class _Budget:
    """Iterations (the per-expression limit both runtimes share) and work: each iteration weighs its body's
    node count, the cost charged to the check's total budget (`WORK_LIMIT`), which may stop a run midway."""

    __slots__ = ("exhausted", "spent", "work", "work_limit")

    def __init__(self) -> None:
        self.spent = 0
        self.work = 0
        self.exhausted = False
        self.work_limit = WORK_LIMIT.get()

    def spend(self, weight: int) -> None:
        self.spent += 1
        self.work += weight
        if self.spent >= ITERATION_BUDGET:
            self.exhausted = True
            raise CELEvalError(_OVER_BUDGET)
        if self.work_limit is not None and self.work > self.work_limit:
            self.exhausted = True
            raise CELEvalError(_OVER_WORK)


class _BudgetEvaluator(Evaluator):
    """An interpreter whose macro bodies spend from a shared iteration budget."""

    def __init__(self, ast: lark.Tree[Any], activation: Activation, budget: _Budget, counted: bool = False) -> None:
        super().__init__(ast, activation)
        self.budget = budget
        self.counted = counted

    def sub_evaluator(self, ast: lark.Tree[Any]) -> Evaluator:
        return _BudgetEvaluator(ast, self.activation, self.budget, counted=True)

    def set_activation(self, values: Any) -> Evaluator:
        if not self.counted:
            return super().set_activation(values)
        # A macro variable: chain onto the enclosing activation instead of cloning every name and function.
        self.activation = self.base_activation.nested_activation(vars=values)
        return self

    def evaluate(self, context: Any = None) -> Any:
        if self.counted:
            self.budget.spend(_weight(self.ast))
        return super().evaluate(context)

    def member_dot_arg(self, tree: lark.Tree[Any]) -> Any:
        name = str(getattr(tree.children[1], "value", ""))
        if name not in ("all", "exists"):
            return super().member_dot_arg(tree)
        items = self.visit(tree.children[0])
        if isinstance(items, CELEvalError):
            return items
        body = self.build_ss_macro_eval(tree)
        stop = name == "exists"
        error: Any = None
        for item in items:
            value = body(item)
            if self.budget.exhausted:
                return value
            if isinstance(value, celtypes.BoolType):
                if bool(value) is stop:
                    return celtypes.BoolType(stop)
            elif error is None:
                error = value if isinstance(value, CELEvalError) else CELEvalError("no such overload")
        return error if error is not None else celtypes.BoolType(not stop)


def to_plain(value: Any) -> Any:
    """A celpy value as plain Python (bool, int, float, str, list, dict, None)."""
    if value is None:
        return None
    if isinstance(value, celtypes.BoolType):
        return bool(value)
    if isinstance(value, str):
        return str(value)
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    if isinstance(value, dict):
        return {to_plain(k): to_plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [to_plain(v) for v in value]
    return value


def _adapt(impl: Callable[..., Any]) -> Callable[..., Any]:
    def call(*args: Any) -> Any:
        for arg in args:
            if isinstance(arg, CELEvalError):
                return arg
        try:
            return json_to_cel(impl(*(to_plain(a) for a in args)))
        except (fn.CelFunctionError, TypeError) as err:
            return CELEvalError(str(err))
    return call


def _by_receiver(on_string: Callable[..., Any], on_list: Callable[..., Any]) -> Callable[..., Any]:
    def dispatch(receiver: Any, *args: Any) -> Any:
        return on_string(receiver, *args) if isinstance(receiver, str) else on_list(receiver, *args)
    return dispatch


def _equality(compare: Callable[[Any, Any], Any], different: bool) -> Callable[[Any, Any], Any]:
    # CEL's heterogeneous equality (and cel-cpp): values of different types are unequal, not an error.
    def equal(left: Any, right: Any) -> Any:
        try:
            return compare(left, right)
        except TypeError:
            numbers = all(isinstance(v, int | float) and not isinstance(v, celtypes.BoolType)
                          for v in (left, right))
            same = float(left) == float(right) if numbers else False
            return celtypes.BoolType(same != different)
    return equal


_MACROS = frozenset({"map", "filter", "all", "exists", "exists_one"})


def _undeclared(ast: lark.Tree[Any]) -> list[str]:
    """Identifiers that are neither context variables nor macro variables (cel-cpp rejects them at compile)."""
    bound: set[str] = set()
    for node in ast.find_data("member_dot_arg"):
        if len(node.children) == 3 and getattr(node.children[1], "value", None) in _MACROS:
            bound.update(str(tok.children[0]) for tok in node.children[2].children[0].find_data("ident"))
    names = {str(node.children[0]) for node in ast.find_data("ident")}
    return sorted(names - bound - set(VARIABLE_NAMES))


FUNCTIONS: dict[str, Callable[..., Any]] = {"_==_": _equality(bool_eq, False), "_!=_": _equality(bool_ne, True)}
FUNCTIONS |= {
    name: _adapt(impl) for name, impl in dict[str, Callable[..., Any]]({
        "quantity": fn.quantity, "isQuantity": fn.is_quantity, "compareTo": fn.compare_to,
        "isGreaterThan": fn.is_greater_than, "isLessThan": fn.is_less_than, "add": fn.add, "sub": fn.sub,
        "asInteger": fn.as_integer, "asApproximateFloat": fn.as_approximate_float, "isInteger": fn.is_integer,
        "sign": fn.sign, "sum": fn.list_sum, "min": fn.list_min, "max": fn.list_max,
        "isSorted": fn.list_is_sorted,
        "indexOf": _by_receiver(fn.string_index_of, fn.list_index_of),
        "lastIndexOf": _by_receiver(fn.string_last_index_of, fn.list_last_index_of),
        "lowerAscii": fn.lower_ascii, "upperAscii": fn.upper_ascii, "trim": fn.trim, "replace": fn.replace,
        "split": fn.split, "join": fn.join, "substring": fn.substring, "charAt": fn.char_at,
        "find": fn.find, "findAll": fn.find_all,
    }).items()
}


class _ReferenceProgram:
    __slots__ = ("ast", "runner")

    def __init__(self, runner: Any, ast: lark.Tree[Any]) -> None:
        self.runner = runner
        self.ast = ast

    def run(self, activation: object) -> Outcome:
        budget = _Budget()
        evaluator = _BudgetEvaluator(self.ast, self.runner.new_activation(), budget)
        try:
            value = evaluator.evaluate(activation)
        except CELEvalError as err:
            return Outcome(error=_describe(err), over_budget=budget.exhausted, cost=budget.work + 1)
        except (TypeError, ValueError, KeyError, ArithmeticError, AttributeError) as err:
            # celpy lets some Python errors through; an expression must never crash the engine.
            return Outcome(error=f"{type(err).__name__}: {err}", over_budget=budget.exhausted, cost=budget.work + 1)
        if budget.exhausted:
            error = _OVER_BUDGET if budget.spent >= ITERATION_BUDGET else _OVER_WORK
            return Outcome(error=error, over_budget=True, cost=budget.work + 1)
        return Outcome(value=to_plain(value), cost=budget.work + 1)


def _syntax_message(expression: str, line: int | None, column: int | None) -> str:
    lines = expression.splitlines() or [""]
    text = lines[min(max((line or 1) - 1, 0), len(lines) - 1)]
    rest = text[(column or 1) - 1:].strip()
    return f"unexpected {rest[:20]!r}" if rest else "unexpected end of expression"


def _describe(err: CELEvalError) -> str:
    args = err.args
    if len(args) >= 3 and args[2]:
        return f"{args[0]}: {', '.join(str(a) for a in args[2])}"
    return str(args[0]) if args else str(err)


class ReferenceBackend:
    """cel-python, interpreted, with an iteration budget."""

    name = REFERENCE
    inline_variables = False

    def __init__(self) -> None:
        self._env = celpy.Environment()

    def compile(self, expression: str) -> _ReferenceProgram:
        try:
            ast = self._env.compile(expression)
        except CELParseError as err:
            raise CelCompileError(_syntax_message(expression, err.line, err.column), err.line, err.column) from err
        unknown = _undeclared(ast)
        if unknown:
            raise CelCompileError(f"undeclared reference to {unknown[0]!r}")
        return _ReferenceProgram(self._env.program(ast, functions=FUNCTIONS), ast)

    def convert(self, value: object) -> object:
        return json_to_cel(value)  # type: ignore[arg-type]

    def activation(self, values: Mapping[str, object]) -> object:
        return dict(values)

