"""A placement as Kueue writes it in a Workload's ``status.admission.podSetAssignments[].topologyAssignment``.

v1beta1: ``{"levels": [...], "domains": [{"values": [...], "count": n}, ...]}``.

v1beta2 (Kueue v0.19.2, TASAssignmentsEncodingByHostnamePrefix on): ``{"levels": [...], "slices": [...]}``; a
slice lists ``domainCount`` domains, per level either one ``universal`` value or ``individual`` values (a common
``prefix`` and ``suffix`` and each domain's ``roots``), and ``podCounts`` (``universal`` or ``individual``). When
the lowest level is the hostname, consecutive hosts sharing a dash-ended name prefix (``node-3-``) go in one slice,
and the shorter JSON of that form and of a single slice is kept. Slices hold at most 100,000 domains.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping

from gitopsq.admission.tas_domains import HOSTNAME, leaf_id
from gitopsq.admission.tas_placement import Placement
from gitopsq.api.raw_objects import JsonValue

MAX_DOMAINS_PER_SLICE = 100_000
MAX_SLICES = 1_000

Domains = list[tuple[tuple[str, ...], int]]


class AssignmentError(ValueError):
    """A topologyAssignment that cannot be read; the message names where and why."""


def v1beta1(p: Placement) -> dict[str, JsonValue]:
    domains: list[JsonValue] = []
    for values, count in p.domains:
        domains.append({"values": list(values), "count": count})
    return {"levels": list(p.levels), "domains": domains}


def _level_values(values: list[str]) -> dict[str, JsonValue]:
    """One level's values: a universal value, or individual roots between a shared prefix and suffix."""
    prefix = suffix = values[0]
    shortest = longest = len(values[0])
    for s in values[1:]:
        n = len(s)
        shortest, longest = min(shortest, n), max(longest, n)
        prefix, suffix = prefix[:n], suffix[len(suffix) - n:] if n < len(suffix) else suffix
        i = 0
        while i < len(prefix) and s[i] == prefix[i]:
            i += 1
        prefix = prefix[:i]
        i = 0
        while i < len(suffix) and s[len(s) - 1 - i] == suffix[len(suffix) - 1 - i]:
            i += 1
        suffix = suffix[len(suffix) - i:]
    if len(prefix) == longest:
        return {"universal": prefix}
    if len(prefix) + len(suffix) > shortest:
        prefix = prefix[:shortest - len(suffix)]
    individual: dict[str, JsonValue] = {}
    if prefix:
        individual["prefix"] = prefix
    if suffix:
        individual["suffix"] = suffix
    individual["roots"] = [s[len(prefix):len(s) - len(suffix)] for s in values]
    return {"individual": individual}


def _slice(levels: tuple[str, ...], domains: Domains) -> dict[str, JsonValue]:
    per_level: list[JsonValue] = [_level_values([values[i] for values, _ in domains]) for i in range(len(levels))]
    counts: list[JsonValue] = [c for _, c in domains]
    pod_counts: dict[str, JsonValue] = ({"universal": counts[0]} if all(c == counts[0] for c in counts)
                                        else {"individual": counts})
    return {"domainCount": len(domains), "valuesPerLevel": per_level, "podCounts": pod_counts}


def _chunks(domains: Domains) -> Iterable[Domains]:
    for i in range(0, len(domains), MAX_DOMAINS_PER_SLICE):
        yield domains[i:i + MAX_DOMAINS_PER_SLICE]


def _prefix_keys(domains: Domains) -> list[str] | None:
    """Per host, the longest dash-ended prefix that at least two hosts share, at the deepest prefix depth that
    keeps the slices within `MAX_SLICES` (None: no depth does)."""
    hosts = [values[-1] for values, _ in domains]
    ends: list[list[int]] = []
    shared: dict[str, int] = {}
    for h in hosts:
        mine = [i + 1 for i in range(len(h) - 1) if h[i] == "-"]
        ends.append(mine)
        for e in mine:
            shared[h[:e]] = min(2, shared.get(h[:e], 0) + 1)
    for depth in range(max((len(e) for e in ends), default=0), 0, -1):
        keys = []
        for h, mine in zip(hosts, ends, strict=True):
            key = ""
            for j in range(min(len(mine), depth) - 1, -1, -1):
                if shared[h[:mine[j]]] >= 2:
                    key = h[:mine[j]]
                    break
            keys.append(key)
        if sum(_chunk_count(len(run)) for run in _runs(domains, keys)) <= MAX_SLICES:
            return keys
    return None


def _chunk_count(n: int) -> int:
    return (n + MAX_DOMAINS_PER_SLICE - 1) // MAX_DOMAINS_PER_SLICE


def _runs(domains: Domains, keys: list[str] | None) -> list[Domains]:
    if not domains:
        return []
    if not keys:
        return [domains]
    out: list[Domains] = []
    start = 0
    for i in range(1, len(domains)):
        if keys[i] != keys[start]:
            out.append(domains[start:i])
            start = i
    out.append(domains[start:])
    return out


def _encode(levels: tuple[str, ...], runs: list[Domains]) -> dict[str, JsonValue]:
    slices: list[JsonValue] = [_slice(levels, chunk) for run in runs for chunk in _chunks(run)]
    out: dict[str, JsonValue] = {"levels": list(levels)}
    if slices:
        out["slices"] = slices
    return out


def _size(obj: dict[str, JsonValue]) -> int:
    return len(json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode())


def single_slice(p: Placement) -> dict[str, JsonValue]:
    """Every domain in one slice (Kueue without TASAssignmentsEncodingByHostnamePrefix)."""
    return _encode(p.levels, [list(p.domains)])


def by_hostname_prefix(p: Placement) -> dict[str, JsonValue]:
    """One slice per run of consecutive hosts sharing a dash-ended name prefix."""
    domains: Domains = list(p.domains)
    keys = _prefix_keys(domains) if len(domains) > 1 and p.levels and p.levels[-1] == HOSTNAME else None
    return _encode(p.levels, _runs(domains, keys))


def v1beta2(p: Placement) -> dict[str, JsonValue]:
    """Kueue v0.19.2's encoding: by hostname prefix, unless that takes several slices and one slice is shorter."""
    by_prefix = by_hostname_prefix(p)
    slices = by_prefix.get("slices")
    if not isinstance(slices, list) or len(slices) <= 1 or len(p.domains) > MAX_DOMAINS_PER_SLICE:
        return by_prefix
    single = single_slice(p)
    return single if _size(single) < _size(by_prefix) else by_prefix


def placement_of(levels: tuple[str, ...], domains: Domains) -> Placement:
    return Placement(levels, tuple(domains), tuple((leaf_id(levels, v), c) for v, c in domains))


def _strings(value: JsonValue, where: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise AssignmentError(f"{where}: expected a list of strings")
    return [v for v in value if isinstance(v, str)]


def _count(value: JsonValue, where: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise AssignmentError(f"{where}: expected a count (a non-negative integer), got {value!r}")
    return value


def _mapping(value: JsonValue, where: str) -> Mapping[str, JsonValue]:
    if not isinstance(value, dict):
        raise AssignmentError(f"{where}: expected an object")
    return value


def from_v1beta1(doc: JsonValue, where: str) -> Placement:
    """A v1beta1 topologyAssignment read back (``where`` names it in errors)."""
    obj = _mapping(doc, where)
    levels = tuple(_strings(obj.get("levels"), f"{where}.levels"))
    raw = obj.get("domains") or []
    if not isinstance(raw, list):
        raise AssignmentError(f"{where}.domains: expected a list")
    domains: Domains = []
    for i, d in enumerate(raw):
        dm = _mapping(d, f"{where}.domains[{i}]")
        values = tuple(_strings(dm.get("values"), f"{where}.domains[{i}].values"))
        if len(values) != len(levels):
            raise AssignmentError(f"{where}.domains[{i}].values: {len(values)} values for {len(levels)} levels")
        domains.append((values, _count(dm.get("count"), f"{where}.domains[{i}].count")))
    return placement_of(levels, domains)


def _level_values_of(value: JsonValue, count: int, where: str) -> list[str]:
    obj = _mapping(value, where)
    universal = obj.get("universal")
    if isinstance(universal, str):
        return [universal] * count
    individual = _mapping(obj.get("individual"), f"{where}.individual")
    prefix, suffix = individual.get("prefix") or "", individual.get("suffix") or ""
    if not isinstance(prefix, str) or not isinstance(suffix, str):
        raise AssignmentError(f"{where}.individual: prefix and suffix must be strings")
    roots = _strings(individual.get("roots"), f"{where}.individual.roots")
    if len(roots) != count:
        raise AssignmentError(f"{where}.individual.roots: {len(roots)} roots for {count} domains")
    return [prefix + r + suffix for r in roots]


def from_v1beta2(doc: JsonValue, where: str) -> Placement:
    """A v1beta2 topologyAssignment read back (``where`` names it in errors)."""
    obj = _mapping(doc, where)
    levels = tuple(_strings(obj.get("levels"), f"{where}.levels"))
    raw = obj.get("slices") or []
    if not isinstance(raw, list):
        raise AssignmentError(f"{where}.slices: expected a list")
    domains: Domains = []
    for i, sl in enumerate(raw):
        at = f"{where}.slices[{i}]"
        sm = _mapping(sl, at)
        count = _count(sm.get("domainCount"), f"{at}.domainCount")
        per_level = sm.get("valuesPerLevel")
        if not isinstance(per_level, list) or len(per_level) != len(levels):
            raise AssignmentError(f"{at}.valuesPerLevel: expected one entry per level ({len(levels)})")
        columns = [_level_values_of(v, count, f"{at}.valuesPerLevel[{j}]") for j, v in enumerate(per_level)]
        pods = _mapping(sm.get("podCounts"), f"{at}.podCounts")
        universal = pods.get("universal")
        if universal is not None:
            counts = [_count(universal, f"{at}.podCounts.universal")] * count
        else:
            individual = pods.get("individual")
            if not isinstance(individual, list) or len(individual) != count:
                raise AssignmentError(f"{at}.podCounts.individual: expected {count} counts")
            counts = [_count(c, f"{at}.podCounts.individual[{k}]") for k, c in enumerate(individual)]
        for k in range(count):
            domains.append((tuple(col[k] for col in columns), counts[k]))
    return placement_of(levels, domains)
