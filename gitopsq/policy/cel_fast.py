"""The fast CEL backend: cel-expr-python (Google's cel-cpp runtime). The only module importing it.

cel-cpp dispatches Python-implemented functions on concrete runtime types (a ``dyn`` parameter matches
nothing at run time), so each library function is declared once per argument type it accepts. cel-cpp's own
comprehension bound (10,000 iterations) stops runaway expressions. No cel-go extension is enabled: the dialect
stays the one cel-python understands too.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from cel_expr_python import cel

from gitopsq.policy import functions as fn
from gitopsq.policy.runtime import FAST, ITERATION_BUDGET, VARIABLE_NAMES, CelCompileError, Outcome

T = cel.Type
STR, INT, DBL, BOOL = T.STRING, T.INT, T.DOUBLE, T.BOOL
L = T.List(T.DYN)
ELEMENT_TYPES = {"int": INT, "uint": T.UINT, "double": DBL, "string": STR, "bool": BOOL, "list": L,
                 "map": T.Map(T.DYN, T.DYN)}

_STATUS = re.compile(r"^[A-Z_]+: ")
_POSITION = re.compile(r"<input>:(\d+):(\d+): (.*)")


def _guard(impl: Callable[..., Any]) -> Callable[..., Any]:
    def call(*args: Any) -> Any:
        try:
            return impl(*args)
        except fn.CelFunctionError as err:
            raise ValueError(str(err)) from err
    return call


def _overload(name: str, suffix: str, result: Any, params: list[Any], impl: Callable[..., Any], *,
              member: bool = True) -> Any:
    return cel.Overload(f"gitopsq_{name}_{suffix}", result, params, is_member=member, impl=_guard(impl))


def _declarations() -> list[Any]:
    decls: dict[str, list[Any]] = {}

    def add(name: str, suffix: str, result: Any, params: list[Any], impl: Callable[..., Any], *,
            member: bool = True) -> None:
        decls.setdefault(name, []).append(_overload(name, suffix, result, params, impl, member=member))

    add("quantity", "string", STR, [STR], fn.quantity, member=False)
    add("isQuantity", "string", BOOL, [STR], fn.is_quantity, member=False)
    add("compareTo", "quantity", INT, [STR, STR], fn.compare_to)
    add("isGreaterThan", "quantity", BOOL, [STR, STR], fn.is_greater_than)
    add("isLessThan", "quantity", BOOL, [STR, STR], fn.is_less_than)
    for op, impl in (("add", fn.add), ("sub", fn.sub)):
        add(op, "quantity", STR, [STR, STR], impl)
        add(op, "int", STR, [STR, INT], impl)
    add("asInteger", "quantity", INT, [STR], fn.as_integer)
    add("asApproximateFloat", "quantity", DBL, [STR], fn.as_approximate_float)
    add("isInteger", "quantity", BOOL, [STR], fn.is_integer)
    add("sign", "quantity", INT, [STR], fn.sign)
    add("sum", "list", T.DYN, [L], fn.list_sum)
    add("min", "list", T.DYN, [L], fn.list_min)
    add("max", "list", T.DYN, [L], fn.list_max)
    add("isSorted", "list", BOOL, [L], fn.list_is_sorted)
    for kind, element in ELEMENT_TYPES.items():
        add("indexOf", f"list_{kind}", INT, [L, element], fn.list_index_of)
        add("lastIndexOf", f"list_{kind}", INT, [L, element], fn.list_last_index_of)
    add("indexOf", "string", INT, [STR, STR], fn.string_index_of)
    add("indexOf", "string_int", INT, [STR, STR, INT], fn.string_index_of)
    add("lastIndexOf", "string", INT, [STR, STR], fn.string_last_index_of)
    add("lastIndexOf", "string_int", INT, [STR, STR, INT], fn.string_last_index_of)
    add("lowerAscii", "string", STR, [STR], fn.lower_ascii)
    add("upperAscii", "string", STR, [STR], fn.upper_ascii)
    add("trim", "string", STR, [STR], fn.trim)
    add("replace", "string", STR, [STR, STR, STR], fn.replace)
    add("replace", "string_int", STR, [STR, STR, STR, INT], fn.replace)
    add("split", "string", T.List(STR), [STR, STR], fn.split)
    add("split", "string_int", T.List(STR), [STR, STR, INT], fn.split)
    add("join", "list", STR, [L], fn.join)
    add("join", "list_string", STR, [L, STR], fn.join)
    add("substring", "int", STR, [STR, INT], fn.substring)
    add("substring", "int_int", STR, [STR, INT, INT], fn.substring)
    add("charAt", "int", STR, [STR, INT], fn.char_at)
    add("find", "string", STR, [STR, STR], fn.find)
    add("findAll", "string", T.List(STR), [STR, STR], fn.find_all)
    add("findAll", "string_int", T.List(STR), [STR, STR, INT], fn.find_all)
    return [cel.FunctionDecl(name, overloads) for name, overloads in decls.items()]


def _strip_status(text: str) -> str:
    return _STATUS.sub("", text.strip()).removesuffix(" [INTERNAL]").strip()


class _FastProgram:
    __slots__ = ("expression",)

    def __init__(self, expression: Any) -> None:
        self.expression = expression

    def run(self, activation: object) -> Outcome:
        try:
            result = self.expression.eval(activation)
        except RuntimeError as err:
            text = _strip_status(str(err))
            if "Iteration budget exceeded" in text:
                return Outcome(error="evaluation stopped: more than 10000 comprehension iterations",
                               over_budget=True, cost=ITERATION_BUDGET)  # cel-cpp reports no count below it
            return Outcome(error=text)
        if result.type() == T.ERROR:
            return Outcome(error=_strip_status(str(result.value())))
        return Outcome(value=result.plain_value())


class FastBackend:
    """cel-expr-python with the Kubernetes library functions declared per argument type."""

    name = FAST
    inline_variables = True

    def __init__(self) -> None:
        self._env = cel.NewEnv(variables=dict.fromkeys(VARIABLE_NAMES, T.DYN), functions=_declarations())

    def compile(self, expression: str) -> _FastProgram:
        try:
            compiled = self._env.compile(expression)
        except RuntimeError as err:
            text = str(err)
            found = _POSITION.search(text)
            if found:
                raise CelCompileError(found[3].strip(), int(found[1]), int(found[2])) from err
            raise CelCompileError(_strip_status(text).splitlines()[0]) from err
        return _FastProgram(compiled)

    def convert(self, value: object) -> object:
        return value  # cel-cpp converts when the activation is built

    def activation(self, values: Mapping[str, object]) -> object:
        return self._env.Activation(dict(values))
