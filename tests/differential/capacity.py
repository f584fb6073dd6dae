"""Kueue's quota arithmetic, just enough for the generator to place already-admitted workloads feasibly.

Written from Kueue's documented formulas (shared/research/kueue.md §1.3), deliberately apart from gitopsq's
admission core: the generator must not inherit the engine's bugs. Units: cpu in cores, memory in Gi (the
generator only produces whole numbers of each).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

FR = tuple[str, str]  # (flavor, resource)


def units(value: Any) -> int:
    text = str(value)
    return int(text[:-2]) if text.endswith("Gi") else int(text)


@dataclass(slots=True)
class Node:
    name: str
    parent: str | None = None
    nominal: dict[FR, int] = field(default_factory=dict)
    borrowing: dict[FR, int] = field(default_factory=dict)
    lending: dict[FR, int] = field(default_factory=dict)
    children: list[str] = field(default_factory=list)


class Capacity:
    def __init__(self, objects: list[dict[str, Any]]) -> None:
        self.nodes: dict[str, Node] = {}
        self.groups: dict[str, list[tuple[list[str], list[str]]]] = {}
        self.usage: dict[str, dict[FR, int]] = {}
        for o in objects:
            if o["kind"] == "Cohort":
                self._node(f"cohort/{o['metadata']['name']}", o["spec"].get("parentName"), o["spec"])
        for o in objects:
            if o["kind"] == "ClusterQueue":
                name = o["metadata"]["name"]
                self._node(f"cq/{name}", o["spec"].get("cohortName"), o["spec"])
                self.groups[name] = [(g["coveredResources"], [f["name"] for f in g["flavors"]])
                                     for g in o["spec"]["resourceGroups"]]
                self.usage[f"cq/{name}"] = {}

    def _node(self, key: str, parent: str | None, spec: dict[str, Any]) -> None:
        node = self.nodes.setdefault(key, Node(key))
        node.parent = f"cohort/{parent}" if parent else None
        for g in spec.get("resourceGroups") or []:
            for f in g["flavors"]:
                for r in f["resources"]:
                    fr = (f["name"], r["name"])
                    node.nominal[fr] = units(r["nominalQuota"])
                    if "borrowingLimit" in r:
                        node.borrowing[fr] = units(r["borrowingLimit"])
                    if "lendingLimit" in r:
                        node.lending[fr] = units(r["lendingLimit"])
        if node.parent is not None:
            parent_node = self.nodes.setdefault(node.parent, Node(node.parent))
            parent_node.children.append(key)

    def subtree(self, key: str, fr: FR) -> int:
        node = self.nodes[key]
        own = node.nominal.get(fr, 0)
        return own + sum(self.subtree(c, fr) - self.local(c, fr) for c in node.children)

    def local(self, key: str, fr: FR) -> int:
        lend = self.nodes[key].lending.get(fr)
        return max(0, self.subtree(key, fr) - lend) if lend is not None else 0

    def used(self, key: str, fr: FR) -> int:
        if key in self.usage:
            return self.usage[key].get(fr, 0)
        return sum(max(0, self.used(c, fr) - self.local(c, fr)) for c in self.nodes[key].children)

    def available(self, key: str, fr: FR) -> int:
        node = self.nodes[key]
        if node.parent is None:
            return self.subtree(key, fr) - self.used(key, fr)
        local_available = max(0, self.local(key, fr) - self.used(key, fr))
        from_parent = self.available(node.parent, fr)
        if fr in node.borrowing:
            cap = (self.subtree(key, fr) - self.local(key, fr)) - max(0, self.used(key, fr) - self.local(key, fr))
            from_parent = min(from_parent, cap + node.borrowing[fr])
        return local_available + from_parent

    def place(self, cq: str, pod_sets: list[dict[str, Any]], rnd: random.Random) -> dict[str, dict[str, str]] | None:
        """Pick flavors where every pod set fits now, add the usage, and return the choice (None: no fit)."""
        key = f"cq/{cq}"
        extra: dict[FR, int] = {}
        chosen: dict[str, dict[str, str]] = {}
        for ps in pod_sets:
            wanted = {r: units(q) * int(ps.get("count", 1)) for r, q in ps["requests"].items()}
            chosen[ps["name"]] = {}
            for covered, flavors in self.groups[cq]:
                needs = {r: v for r, v in wanted.items() if r in covered}
                if not needs:
                    continue
                options = [f for f in flavors if all(
                    extra.get((f, r), 0) + v <= max(0, self.available(key, (f, r))) for r, v in needs.items())]
                if not options:
                    return None
                flavor = rnd.choice(options)
                for r, v in needs.items():
                    extra[(flavor, r)] = extra.get((flavor, r), 0) + v
                    chosen[ps["name"]][r] = flavor
            if set(chosen[ps["name"]]) != set(wanted):
                return None  # a resource no group covers
        for fr, v in extra.items():
            self.usage[key][fr] = self.usage[key].get(fr, 0) + v
        return chosen
