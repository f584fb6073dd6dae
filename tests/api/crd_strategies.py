"""Objects generated from Kueue's own CRD OpenAPI schemas (read from the Go module cache, never copied here), and
the comparison of a rendered object with the manifest it came from.

`objects(kind, version)` draws manifests whose every field comes from the schema: required fields always,
optional ones at random, enums, patterns, length and item limits, int32 bounds, quantities for int-or-string.
A few fix-ups per kind then make the draws agree with Kueue's cross-field rules (a flavor lists its group's
covered resources; borrowing limits need a cohort...) so that most of them are valid and every field is seen in
accepted objects. The fix-ups choose values, and at most keep the first of several resource groups where Kueue
allows one; every field is still drawn in other objects.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable, Iterator, Mapping
from datetime import UTC, datetime, timedelta
from functools import cache
from pathlib import Path
from typing import Any

import yaml
from hypothesis import strategies as st

from gitopsq.api.quantity import QuantityError, parse_quantity

REPO_ROOT = Path(__file__).resolve().parents[2]
KINDS = ("ResourceFlavor", "ClusterQueue", "LocalQueue", "Cohort", "WorkloadPriorityClass", "AdmissionCheck",
         "Topology", "ProvisioningRequestConfig", "MultiKueueConfig", "MultiKueueCluster")
VERSIONS = ("v1beta1", "v1beta2")
SKIPPED_TOP = ("apiVersion", "kind", "metadata", "status")
MAX_ITEMS = 3  # lists longer than this add time, not coverage
NAME = st.from_regex(r"[a-z][a-z0-9-]{0,10}[a-z0-9]", fullmatch=True)
LABEL_KEY = st.from_regex(r"([a-z]{1,8}\.(io|com)/)?[a-z][a-z0-9_.-]{0,12}[a-z0-9]", fullmatch=True)
QUANTITY = st.one_of(st.integers(0, 10 ** 6), st.from_regex(r"[1-9][0-9]{0,3}(\.[0-9]{1,2})?(m|k|Ki|Mi|Gi|M|G)?",
                                                            fullmatch=True))


def kueue_crd_dir() -> Path:
    """Kueue's CRDs in the Go module cache, found as the rest of the suite finds them (hack/kueue)."""
    sys.path.insert(0, str(REPO_ROOT / "hack" / "kueue"))
    import kueuebuild

    path: Path = kueuebuild.crd_dir()
    return path


@cache
def schemas() -> dict[tuple[str, str], dict[str, Any]]:
    """(kind, version) → the version's openAPIV3Schema."""
    out: dict[tuple[str, str], dict[str, Any]] = {}
    for file in sorted(kueue_crd_dir().glob("*.yaml")):
        crd = yaml.safe_load(file.read_text())
        for version in crd["spec"]["versions"]:
            out[(crd["spec"]["names"]["kind"], version["name"])] = version["schema"]["openAPIV3Schema"]
    return out


def leaf_paths(schema: Mapping[str, Any], prefix: str = "") -> Iterator[str]:
    """Every field path the schema allows (``[]`` for list items, ``{}`` for map values)."""
    if "properties" in schema:
        for name, sub in schema["properties"].items():
            if not prefix and name in SKIPPED_TOP:
                continue
            yield from leaf_paths(sub, f"{prefix}.{name}" if prefix else name)
    elif schema.get("type") == "array":
        yield from leaf_paths(schema["items"], prefix + "[]")
    elif isinstance(schema.get("additionalProperties"), Mapping):
        yield prefix + "{}"
    else:
        yield prefix


def paths_in(value: Any, schema: Mapping[str, Any], prefix: str = "") -> Iterator[str]:
    """The leaf paths a drawn document holds, in `leaf_paths`' notation."""
    if "properties" in schema and isinstance(value, Mapping):
        for key, sub in value.items():
            if not prefix and key in SKIPPED_TOP:
                continue
            yield from paths_in(sub, schema["properties"][key], f"{prefix}.{key}" if prefix else key)
    elif isinstance(value, list):
        for item in value:
            yield from paths_in(item, schema["items"], prefix + "[]")
    elif isinstance(value, Mapping):
        if value:
            yield prefix + "{}"
    else:
        yield prefix


def _timestamps() -> st.SearchStrategy[str]:
    base = datetime(2020, 1, 1, tzinfo=UTC)
    return st.integers(0, 10 ** 9).map(lambda s: (base + timedelta(seconds=s)).strftime("%Y-%m-%dT%H:%M:%SZ"))


# Fields whose schema is looser than Kueue's webhooks and Kubernetes' own types (suffix of the path → values).
HINTS: dict[str, st.SearchStrategy[Any]] = {
    "admissionScope.admissionMode": st.sampled_from(["UsageBasedAdmissionFairSharing", "NoAdmissionFairSharing"]),
    "matchExpressions[].operator": st.sampled_from(["In", "NotIn", "Exists", "DoesNotExist"]),
    "tolerations[].operator": st.sampled_from(["Equal", "Exists"]),
    "tolerations[].effect": st.sampled_from(["NoSchedule", "PreferNoSchedule", "NoExecute"]),
    "nodeTaints[].effect": st.sampled_from(["NoSchedule", "PreferNoSchedule", "NoExecute"]),
    "value": st.from_regex(r"([A-Za-z0-9][-A-Za-z0-9_.]{0,10})?[A-Za-z0-9]", fullmatch=True),
    "values[]": st.from_regex(r"[a-z0-9]{1,8}", fullmatch=True),
    "matchLabels{}": st.from_regex(r"[a-z0-9]{1,8}", fullmatch=True),
    "nodeLabels{}": st.from_regex(r"[a-z0-9]{1,8}", fullmatch=True),
}


def _string(schema: Mapping[str, Any], path: str) -> st.SearchStrategy[Any]:
    for suffix, hinted in HINTS.items():
        if path.endswith("." + suffix):
            return hinted
    if "enum" in schema:
        return st.sampled_from(schema["enum"])
    if schema.get("format") == "date-time":
        return _timestamps()
    low, high = schema.get("minLength", 0), min(schema.get("maxLength", 40), 40)
    if "pattern" in schema:
        pattern: str = schema["pattern"]
        flags = re.IGNORECASE if "(?i)" in pattern else 0  # Go's inline flag; Python wants it first
        drawn: st.SearchStrategy[str] = st.from_regex(re.compile(pattern.replace("(?i)", ""), flags),
                                                      fullmatch=True)
        return drawn.filter(lambda s: low <= len(s) <= high)
    if path.endswith(("name", "Name", "clusterQueue", "cohort", "parentName", "clusters[]", "onFlavors[]",
                      "admissionChecks[]")):
        return NAME
    if path.endswith(("key", "nodeLabel", "coveredResources[]", "managedResources[]")):
        return LABEL_KEY
    return st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7e), min_size=max(low, 1),
                   max_size=max(high, 1))


def strategy(schema: Mapping[str, Any], path: str = "") -> st.SearchStrategy[Any]:
    """Values valid for ``schema`` (bounded in size)."""
    if schema.get("x-kubernetes-int-or-string"):
        return QUANTITY
    kind = schema.get("type")
    if "properties" in schema:
        props = {k: v for k, v in schema["properties"].items() if path or k not in SKIPPED_TOP}
        required = set(schema.get("required", ())) | ({"spec"} if not path else set())  # a body, always
        return st.fixed_dictionaries(
            {k: strategy(v, f"{path}.{k}") for k, v in props.items() if k in required},
            optional={k: strategy(v, f"{path}.{k}") for k, v in props.items() if k not in required})
    if kind == "object" and isinstance(schema.get("additionalProperties"), Mapping):
        return st.dictionaries(LABEL_KEY, strategy(schema["additionalProperties"], path + "{}"),
                               max_size=min(schema.get("maxProperties", MAX_ITEMS), MAX_ITEMS))
    if kind == "array":
        items = strategy(schema["items"], path + "[]")
        low = schema.get("minItems", 0)
        return st.lists(items, min_size=low, max_size=max(low, min(schema.get("maxItems", MAX_ITEMS), MAX_ITEMS)),
                        unique_by=_identity(schema))
    if kind == "string":
        return _string(schema, path)
    if kind == "integer":
        bits = 31 if schema.get("format") == "int32" else 40
        return st.integers(schema.get("minimum", -(2 ** bits)), schema.get("maximum", 2 ** bits - 1))
    if kind == "boolean":
        return st.booleans()
    return st.just({})


def _identity(schema: Mapping[str, Any]) -> Callable[[Any], Any] | None:
    """Items of a set, a map list, or a list whose CEL rule says unique, are drawn distinct."""
    keys = schema.get("x-kubernetes-list-map-keys")
    if keys:
        return lambda item: tuple(item.get(k) for k in keys)
    rules = " ".join(r.get("rule", "") for r in schema.get("x-kubernetes-validations", ()))
    if schema.get("x-kubernetes-list-type") == "set" or "size(self.filter(j, j == i)) > 1" in rules:
        return repr
    return None


# --- fix-ups: Kueue's cross-field rules, so that most draws are valid -------------------------------------------


def _groups(spec: dict[str, Any]) -> None:
    """Each covered resource and flavor once; each flavor lists exactly its group's covered resources."""
    seen_resources: set[str] = set()
    seen_flavors: set[str] = set()
    for group in spec.get("resourceGroups", ()):
        covered = [r for r in dict.fromkeys(group["coveredResources"]) if r not in seen_resources]
        group["coveredResources"] = covered or [f"res-{len(seen_resources)}"]
        seen_resources.update(group["coveredResources"])
        for flavor in group["flavors"]:
            while flavor["name"] in seen_flavors:
                flavor["name"] += "x"
            seen_flavors.add(flavor["name"])
            drawn = flavor["resources"] or [{"nominalQuota": 1}]
            flavor["resources"] = [{**drawn[i % len(drawn)], "name": name}
                                   for i, name in enumerate(group["coveredResources"])]
            for quota in flavor["resources"]:
                if "lendingLimit" in quota and _value(quota["lendingLimit"]) > _value(quota["nominalQuota"]):
                    quota["lendingLimit"] = quota["nominalQuota"]


def _value(quantity: Any) -> Any:
    try:
        return parse_quantity(quantity)
    except QuantityError:
        return 0


def _cluster_queue(spec: dict[str, Any], version: str) -> None:
    _groups(spec)
    cohort = "cohortName" if version == "v1beta2" else "cohort"
    if _has_limits(spec):
        spec[cohort] = spec.get(cohort) or "team"
    preemption = spec.get("preemption", {})
    if preemption.get("borrowWithinCohort", {}).get("policy", "Never") != "Never":
        preemption["reclaimWithinCohort"] = "Any"
    fungibility = spec.get("flavorFungibility", {})
    if "preference" in fungibility:
        fungibility["whenCanBorrow"] = fungibility["whenCanPreempt"] = "TryNextFlavor"
    policy = spec.get("concurrentAdmissionPolicy")
    if policy is not None:  # Kueue's webhook: one resource group, a known last flavor, no StrictFIFO
        groups = spec.get("resourceGroups") or [{"coveredResources": ["cpu"],
                                                 "flavors": [{"name": "f", "resources": [{"name": "cpu",
                                                                                          "nominalQuota": 1}]}]}]
        spec["resourceGroups"] = groups[:1]
        constraints = policy["migration"].get("constraints")
        if constraints is not None:
            policy["migration"]["mode"] = "TryPreferredFlavors"
            if "lastAcceptableFlavorName" in constraints:
                constraints["lastAcceptableFlavorName"] = groups[0]["flavors"][0]["name"]
        if spec.get("queueingStrategy") == "StrictFIFO":
            spec["queueingStrategy"] = "BestEffortFIFO"
    strategy_checks = spec.get("admissionChecksStrategy", {}).get("admissionChecks")
    if spec.get("admissionChecks") and strategy_checks:
        del spec["admissionChecks"]


def _has_limits(spec: Mapping[str, Any]) -> bool:
    return any("borrowingLimit" in q or "lendingLimit" in q for g in spec.get("resourceGroups", ())
               for f in g["flavors"] for q in f["resources"])


def _cohort(spec: dict[str, Any]) -> None:
    _groups(spec)
    if _has_limits(spec):
        spec["parentName"] = spec.get("parentName") or "root"


def _flavor(spec: dict[str, Any]) -> None:
    """Tolerations as Kubernetes validates them; a topology needs node labels to find the flavor's nodes."""
    for toleration in spec.get("tolerations", ()):
        if not toleration.get("key"):
            toleration["operator"] = "Exists"
        if toleration.get("operator") == "Exists" and "value" in toleration:
            toleration["value"] = ""
        if "tolerationSeconds" in toleration:
            toleration["effect"] = "NoExecute"
    if "topologyName" in spec and not spec.get("nodeLabels"):
        spec["nodeLabels"] = {"pool": "a"}


def _topology(spec: dict[str, Any]) -> None:
    levels = spec["levels"]
    hostname = [lv for lv in levels if lv["nodeLabel"] == "kubernetes.io/hostname"]
    spec["levels"] = [lv for lv in levels if lv["nodeLabel"] != "kubernetes.io/hostname"] + hostname[:1]


def _multikueue_cluster(spec: dict[str, Any], version: str) -> None:
    source = spec["clusterSource"] if version == "v1beta2" else spec
    if ("kubeConfig" in source) == ("clusterProfileRef" in source):
        source.pop("clusterProfileRef", None)
        source.setdefault("kubeConfig", {"location": "worker-1", "locationType": "Secret"})


FIXUPS: dict[str, Callable[[dict[str, Any], str], None]] = {
    "ClusterQueue": _cluster_queue,
    "Cohort": lambda spec, _: _cohort(spec),
    "Topology": lambda spec, _: _topology(spec),
    "ResourceFlavor": lambda spec, _: _flavor(spec),
    "MultiKueueCluster": _multikueue_cluster,
}


def objects(kind: str, version: str) -> st.SearchStrategy[dict[str, Any]]:
    """Whole manifests of ``kind`` in ``version``: envelope, a valid name (and namespace), a drawn body."""
    schema = schemas()[(kind, version)]
    body = strategy(schema)
    namespaced = kind == "LocalQueue"

    def build(drawn: dict[str, Any], name: str) -> dict[str, Any]:
        meta: dict[str, Any] = {"name": name, **({"namespace": "team-a"} if namespaced else {})}
        doc = {"apiVersion": f"kueue.x-k8s.io/{version}", "kind": kind, "metadata": meta, **drawn}
        if "spec" in doc and kind in FIXUPS:
            FIXUPS[kind](doc["spec"], version)
        return doc

    return st.builds(build, body, NAME)


class _QuotingDumper(yaml.SafeDumper):
    """Every string double-quoted, so that a drawn string such as 1E100 is not read back as a number."""


_QuotingDumper.add_representer(str, lambda dumper, text: dumper.represent_scalar("tag:yaml.org,2002:str", text,
                                                                                 style='"'))


def dump(doc: Mapping[str, Any]) -> bytes:
    return yaml.dump(dict(doc), Dumper=_QuotingDumper, sort_keys=False).encode()


# --- comparison -------------------------------------------------------------------------------------------------


def to_v1beta2(doc: Mapping[str, Any]) -> dict[str, Any]:
    """The documented v1beta1 → v1beta2 conversion (docs/crds.md), applied to a v1beta1 manifest."""
    out = yaml.safe_load(yaml.safe_dump(dict(doc)))
    out["apiVersion"] = "kueue.x-k8s.io/v1beta2"
    if not doc["apiVersion"].endswith("v1beta1"):
        return out
    spec = out.get("spec") or {}
    kind = out["kind"]
    if kind == "ClusterQueue":
        if "cohort" in spec:
            spec["cohortName"] = spec.pop("cohort")
        if "admissionChecks" in spec:
            names = spec.pop("admissionChecks")
            if names:
                spec["admissionChecksStrategy"] = {"admissionChecks": [{"name": n} for n in names]}
        fungibility = spec.get("flavorFungibility", {})
        for key in ("whenCanBorrow", "whenCanPreempt"):
            if fungibility.get(key) in ("Borrow", "Preempt"):
                fungibility[key] = "MayStopSearch"
    if kind == "AdmissionCheck":
        spec.pop("retryDelayMinutes", None)
    if kind == "MultiKueueCluster":
        out["spec"] = {"clusterSource": {k: spec[k] for k in ("kubeConfig", "clusterProfileRef") if k in spec}}
    return out


def _empty(value: Any) -> bool:
    """An optional list or map with nothing in it, at any depth ({"nodeSelector": []} included)."""
    if isinstance(value, Mapping):
        return all(_empty(v) for v in value.values())
    return value in ("", [])  # Go's omitempty writes neither an empty string nor an empty list


def differences(expected: Any, rendered: Any, path: str = "") -> list[str]:
    """Where ``rendered`` lacks or changes a field of ``expected`` (extra fields in ``rendered`` are defaults, and
    are checked by decoding both). Empty optional lists and maps mean the same as absent ones, as in Kueue's
    Go types; quantities compare by value."""
    if isinstance(expected, Mapping):
        if not isinstance(rendered, Mapping):
            return [f"{path}: {rendered!r} is not a mapping"]
        out = []
        for key, value in expected.items():
            if _empty(value) and key not in rendered:
                continue
            if key not in rendered:
                out.append(f"{path}.{key}: dropped (was {value!r})")
            else:
                out.extend(differences(value, rendered[key], f"{path}.{key}"))
        return out
    if isinstance(expected, list):
        if not isinstance(rendered, list) or len(rendered) != len(expected):
            return [f"{path}: {rendered!r} instead of {expected!r}"]
        return [d for i, (a, b) in enumerate(zip(expected, rendered, strict=True))
                for d in differences(a, b, f"{path}[{i}]")]
    if expected == rendered and type(expected) is type(rendered):
        return []
    if isinstance(expected, int | str) and isinstance(rendered, int | str):
        try:
            if parse_quantity(expected) == parse_quantity(rendered):
                return []
        except QuantityError:
            pass
    return [f"{path}: {rendered!r} instead of {expected!r}"]
