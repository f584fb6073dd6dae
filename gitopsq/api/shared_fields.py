"""Field shapes several kinds share, decoded and encoded: tolerations (ResourceFlavor, pod templates), label
selectors (a ClusterQueue's namespaceSelector), fairSharing (ClusterQueue, Cohort, LocalQueue), and the helpers
that leave unset fields out of an encoded manifest."""

from __future__ import annotations

from typing import Any

from gitopsq.api import model as m
from gitopsq.api.reader import FieldPath, Reader


def decode_tolerations(r: Reader, raw: Any, path: FieldPath) -> tuple[m.Toleration, ...]:
    out = []
    for i, item in enumerate(r.sequence(raw, path)):
        p = (*path, i)
        t = r.mapping(item, p, allowed=("key", "operator", "value", "effect", "tolerationSeconds"))
        out.append(m.Toleration(
            key=r.string(t.get("key"), (*p, "key")),
            operator=r.string(t.get("operator"), (*p, "operator"), default="Equal", choices=("Equal", "Exists")),
            value=r.string(t.get("value"), (*p, "value")),
            effect=r.string(t.get("effect"), (*p, "effect"),
                            choices=("", "NoSchedule", "PreferNoSchedule", "NoExecute")),
            toleration_seconds=r.integer(t.get("tolerationSeconds"), (*p, "tolerationSeconds"))))
    return tuple(out)


def encode_toleration(t: m.Toleration) -> dict[str, Any]:
    return drop_empty({"key": t.key, "operator": t.operator, "value": t.value, "effect": t.effect,
                        "tolerationSeconds": t.toleration_seconds})


def decode_selector(r: Reader, raw: Any, path: FieldPath) -> m.LabelSelector | None:
    if raw is None:
        return None
    data = r.mapping(raw, path, allowed=("matchLabels", "matchExpressions"))
    exprs = []
    for i, item in enumerate(r.sequence(data.get("matchExpressions"), (*path, "matchExpressions"))):
        p = (*path, "matchExpressions", i)
        e = r.mapping(item, p, allowed=("key", "operator", "values"))
        exprs.append(m.LabelSelectorRequirement(
            key=r.string(e.get("key"), (*p, "key"), required=True),
            operator=r.string(e.get("operator"), (*p, "operator"), required=True,
                              choices=("In", "NotIn", "Exists", "DoesNotExist")),
            values=r.string_list(e.get("values"), (*p, "values"))))
    return m.LabelSelector(match_labels=r.string_map(data.get("matchLabels"), (*path, "matchLabels")),
                           match_expressions=tuple(exprs))


def encode_selector(sel: m.LabelSelector | None) -> dict[str, Any] | None:
    if sel is None:
        return None
    out: dict[str, Any] = {}
    if sel.match_labels:
        out["matchLabels"] = dict(sel.match_labels)
    if sel.match_expressions:
        out["matchExpressions"] = [drop_empty({"key": e.key, "operator": e.operator, "values": list(e.values)})
                                   for e in sel.match_expressions]
    return out


def decode_fair_sharing(r: Reader, raw: Any, path: FieldPath) -> m.FairSharing | None:
    if raw is None:
        return None
    data = r.mapping(raw, path, allowed=("weight",))
    return m.FairSharing(weight=r.quantity(data.get("weight"), (*path, "weight")))


def encode_fair_sharing(fs: m.FairSharing | None) -> dict[str, Any] | None:
    if fs is None:
        return None
    return {"weight": str(fs.weight)} if fs.weight is not None else {}


def drop_none(d: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in d.items() if v is not None}


def drop_empty(d: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in d.items() if v not in (None, "", [])}
