"""``aggregate.budgets``: committed quota summed per flavor and resource over the revision's Budgets.

Read from the Budget documents as written (the engine sees Budgets in that form), so ``gitopsq policy test``
and a real revision compute the same sums. Quantities that do not parse are skipped: the manifest check reports
them with the Budget's line. Computed in Python because CEL has no fold.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from gitopsq.api.quantity import QuantityError, format_milli, parse_quantity
from gitopsq.policy.language import SourcedObject

BUDGET_KIND = "Budget"


def aggregate_budgets(objects: Iterable[SourcedObject]) -> list[dict[str, Any]]:
    """One entry per flavor and resource some Budget commits: ``{flavor, resource, committed, contributors}``,
    contributors as ``Budget/<name> (<file>) <amount>`` in file order."""
    totals: dict[tuple[str, str], int] = {}
    contributors: dict[tuple[str, str], list[str]] = {}
    for item in sorted(objects, key=lambda o: (o.path, o.line or 0)):
        if item.key.kind != BUDGET_KIND:
            continue
        spec = item.object.get("spec")
        flavors = spec.get("flavors") if isinstance(spec, Mapping) else None
        for flavor in flavors if isinstance(flavors, list) else []:
            if not isinstance(flavor, Mapping) or not isinstance(flavor.get("committed"), Mapping):
                continue
            for resource, amount in flavor["committed"].items():
                try:
                    milli = parse_quantity(amount).milli
                except QuantityError:
                    continue
                cell = (str(flavor.get("name") or ""), str(resource))
                totals[cell] = totals.get(cell, 0) + milli
                contributors.setdefault(cell, []).append(f"{item.key.kind}/{item.key.name} ({item.path}) "
                                                         f"{format_milli(milli)}")
    return [{"flavor": f, "resource": r, "committed": format_milli(totals[(f, r)]),
             "contributors": contributors[(f, r)]} for f, r in sorted(totals)]
