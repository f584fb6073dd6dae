"""Text-level facts about policy expressions, used to evaluate them cheaply.

1. `inline_variables` expands ``variables.<name>`` into the variable's own expression, for runtimes where
   binding a value costs more than recomputing it (cel-cpp converts every bound value on first access).
2. `referenced_fields` tells which top-level fields of ``repo``, ``commit``... expressions can reach, so only
   those are converted. Any use other than ``root.field`` (indexing, passing the root whole) keeps it all.

Both skip string literals, so a message such as ``'see variables.x'`` is left alone.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

_STRING = re.compile(r"""[rRbB]*('''.*?'''|\"\"\".*?\"\"\"|'(?:\\.|[^'\\])*'|"(?:\\.|[^"\\])*")""", re.DOTALL)
_VARIABLE = re.compile(r"\bvariables\.([A-Za-z_][A-Za-z0-9_]*)\b")
_PRUNABLE = ("repo", "previousRepo", "commit", "actor", "aggregate")
_FIELD = re.compile(r"(?<![.\w])(" + "|".join(_PRUNABLE) + r")\b(\s*\.\s*([A-Za-z_][A-Za-z0-9_]*))?")


def _outside_strings(text: str, replace: Any) -> str:
    out: list[str] = []
    last = 0
    for match in _STRING.finditer(text):
        out.append(replace(text[last:match.start()]))
        out.append(match.group(0))
        last = match.end()
    out.append(replace(text[last:]))
    return "".join(out)


def _code(text: str) -> str:
    """The expression with string literals blanked out."""
    return _STRING.sub("''", text)


def inline_variables(expression: str, variables: Sequence[tuple[str, str]]) -> str:
    """``expression`` with every ``variables.<name>`` replaced by ``(<that variable's expanded expression>)``."""
    expanded: dict[str, str] = {}

    def expand(text: str) -> str:
        return _outside_strings(text, lambda code: _VARIABLE.sub(
            lambda m: f"({expanded[m[1]]})" if m[1] in expanded else m[0], code))

    for name, text in variables:
        expanded[name] = expand(text)
    return expand(expression)


def referenced_fields(expressions: Iterable[str]) -> dict[str, set[str] | None]:
    """Per prunable root, the top-level fields reached (None: the whole value may be needed)."""
    fields: dict[str, set[str] | None] = {root: set() for root in _PRUNABLE}
    for expression in expressions:
        for match in _FIELD.finditer(_code(expression)):
            root, field = match[1], match[3]
            known = fields[root]
            if field is None:
                fields[root] = None
            elif known is not None:
                known.add(field)
    return fields


def prune(value: Mapping[str, Any] | None, keep: set[str] | None) -> Any:
    if value is None or keep is None:
        return value
    return {k: v for k, v in value.items() if k in keep}


def mentions(expressions: Iterable[str], name: str) -> bool:
    pattern = re.compile(rf"(?<![.\w]){re.escape(name)}\b")
    return any(pattern.search(_code(e)) for e in expressions)
