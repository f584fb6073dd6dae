"""The error tree drawn in gitopsq/errors.py is the class hierarchy, so the drawing cannot drift from the code."""

from __future__ import annotations

import importlib
import pkgutil
import re

import gitopsq
from gitopsq import errors
from gitopsq.errors import GitopsqError

_NODE = re.compile(r"^(?P<indent>[ │├└─]*)(?P<name>\w+)")


def _drawn() -> dict[str, str | None]:
    """Each drawn class with its drawn parent (None for the root), from the docstring's tree."""
    doc = errors.__doc__ or ""
    lines = doc.splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip().startswith("GitopsqError "))
    base = len(lines[start]) - len(lines[start].lstrip())
    parents: dict[str, str | None] = {}
    stack: list[str] = []
    for line in lines[start:]:
        if not line.strip():
            break
        found = _NODE.match(line)
        assert found, line
        depth = (len(found["indent"]) - base) // 4
        del stack[depth:]
        parents[found["name"]] = stack[-1] if stack else None
        stack.append(found["name"])
    return parents


def _import_everything() -> None:
    for module in pkgutil.walk_packages(gitopsq.__path__, "gitopsq."):
        if not module.name.endswith("__main__"):
            importlib.import_module(module.name)


def _defined_in_gitopsq(root: type[BaseException]) -> list[type[BaseException]]:
    out, pending = [], list(root.__subclasses__())
    while pending:
        cls = pending.pop()
        pending.extend(cls.__subclasses__())
        if cls.__module__.startswith("gitopsq.") and cls not in out:
            out.append(cls)
    return out


def test_drawn_tree_is_the_class_hierarchy() -> None:
    """Every GitopsqError subclass anywhere in gitopsq is drawn under its real parent, and nothing else is drawn."""
    _import_everything()
    actual: dict[str, str | None] = {GitopsqError.__name__: None}
    for cls in _defined_in_gitopsq(GitopsqError):
        parent = next(b for b in cls.__bases__ if issubclass(b, GitopsqError))
        actual[cls.__name__] = parent.__name__
    assert _drawn() == actual


def test_exceptions_outside_the_tree_are_the_named_internal_ones() -> None:
    """An exception class of gitopsq outside the tree is one the docstring names as internal (translated where it
    is caught, or an accounting bug), so a new error cannot bypass the tree unnoticed."""
    _import_everything()
    doc = errors.__doc__ or ""
    internal_text = doc[doc.index("Not in the tree"):]
    named = set(re.findall(r"\b_?[A-Z]\w*(?:Error|Abort)\b", internal_text))
    # The families' roots: a subclass of an internal exception is internal with it.
    outside = {cls.__name__ for cls in _defined_in_gitopsq(BaseException) if not issubclass(cls, GitopsqError)
               and not any(b.__module__.startswith("gitopsq.") for b in cls.__bases__)}
    assert outside == named


def test_quantity_error_is_an_input_error_and_keeps_its_message() -> None:
    """An invalid quantity is an InputError (exit 1) that code catching ValueError still catches, worded as before."""
    from gitopsq.api.quantity import QuantityError, parse_quantity

    try:
        parse_quantity("12 apples")
    except ValueError as err:
        assert isinstance(err, QuantityError) and isinstance(err, errors.InputError)
        assert str(err).startswith("invalid quantity '12 apples': ")
        assert err.exit_code == errors.EXIT_REJECTED
    else:
        raise AssertionError("parse_quantity accepted '12 apples'")
