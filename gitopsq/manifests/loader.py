"""One file's bytes → decoded queue objects plus every finding that depends on that file alone.

The result depends only on the bytes, the path and `LoadSettings`, so the pipeline caches it by blob id: a
revision that changes one file re-reads one file.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from gitopsq.api import findings
from gitopsq.api import model as m
from gitopsq.api.codec import SUPPORTED_VERSIONS, decode
from gitopsq.api.findings import Finding
from gitopsq.errors import Location
from gitopsq.manifests.budget_compile import compile_budget
from gitopsq.manifests.budgets import LoadedBudget, is_budget, parse_budget
from gitopsq.manifests.check_report import LoadedObject, PassThrough
from gitopsq.manifests.object_rules import validate_object
from gitopsq.manifests.yamldoc import DEFAULT_LIMITS, YamlDocument, YamlLimits, load_yaml

# The kinds a queue-definition repository holds (shared/interfaces.md §2); Workloads come from Jobs, not Git.
REPO_KINDS: Final = ("ResourceFlavor", "ClusterQueue", "LocalQueue", "Cohort", "WorkloadPriorityClass",
                     "AdmissionCheck", "Topology", "ProvisioningRequestConfig", "MultiKueueConfig",
                     "MultiKueueCluster", "Namespace", "PriorityClass")


@dataclass(frozen=True, slots=True)
class LoadSettings:
    """What parsing a file depends on besides its bytes (part of the cache key)."""

    allow_kinds: tuple[str, ...] = ()
    limits: YamlLimits = DEFAULT_LIMITS

    def fingerprint(self) -> str:
        lim = self.limits
        return "|".join((*sorted(self.allow_kinds),
                         f"{lim.max_bytes}:{lim.max_lines}:{lim.max_depth}:{lim.max_nodes}:{lim.max_alias_nodes}"))


@dataclass(frozen=True, slots=True)
class FileResult:
    path: str
    entries: tuple[LoadedObject, ...]
    passthrough: tuple[PassThrough, ...]
    findings: tuple[Finding, ...]
    budgets: tuple[LoadedBudget, ...] = ()  # gitopsq's own kind; ``entries`` hold what they compile into


def load_file(path: str, data: bytes, settings: LoadSettings = LoadSettings()) -> FileResult:
    """Parse, decode and validate (per object) every document of one file."""
    loaded = load_yaml(path, data, settings.limits)
    return load_documents(path, loaded.documents, settings, loaded.findings)


def load_documents(path: str, documents: Sequence[YamlDocument], settings: LoadSettings = LoadSettings(),
                   found: Sequence[Finding] = ()) -> FileResult:
    """Decode and validate parsed documents (a file's, or kustomize's rendered output, docs/kustomize.md)."""
    problems: list[Finding] = list(found)
    entries: list[LoadedObject] = []
    passthrough: list[PassThrough] = []
    budgets: list[LoadedBudget] = []
    for doc in documents:
        if isinstance(doc.data, Mapping) and is_budget(doc.data):
            budget, found = parse_budget(doc.data, path=doc.path, line=doc.line, lines=doc.lines)
            problems.extend(found)
            if budget is not None:
                budgets.append(budget)
                for compiled in compile_budget(budget):
                    entries.append(compiled)
                    problems.extend(validate_object(compiled))
            continue
        item = _load_document(doc, settings, problems)
        if isinstance(item, LoadedObject):
            entries.append(item)
        elif isinstance(item, PassThrough):
            passthrough.append(item)
    return FileResult(path, tuple(entries), tuple(passthrough), tuple(problems), tuple(budgets))


def _load_document(doc: YamlDocument, settings: LoadSettings,
                   problems: list[Finding]) -> LoadedObject | PassThrough | None:
    data: Mapping[str, Any] = doc.data
    api_version, kind = data.get("apiVersion"), data.get("kind")
    if isinstance(api_version, str) and isinstance(kind, str):
        if f"{api_version}/{kind}" in settings.allow_kinds:
            return _pass_through(doc, api_version, kind, problems)
        if kind not in REPO_KINDS:
            problems.append(findings.error(
                "unknown-kind", _unknown_kind_message(api_version, kind),
                location=Location(doc.path, doc.line_of(("kind",)) or doc.line), obj=_describe(data)))
            return None
    decoded = decode(data, file=doc.path, line=doc.line, line_of=doc.line_of)
    problems.extend(decoded.findings)
    obj = decoded.obj
    if obj is None or isinstance(obj, m.Workload):
        return None
    entry = LoadedObject(obj, doc.path, doc.line, decoded.api_version, doc.lines)
    problems.extend(validate_object(entry))
    return entry


def _unknown_kind_message(api_version: str, kind: str) -> str:
    if kind in SUPPORTED_VERSIONS:  # a Workload: real Kueue kind, but not one a repository declares
        return (f"{kind} objects are created by Kueue from Jobs and do not belong in a queue-definition "
                "repository")
    return (f"kind {kind!r} ({api_version}) is not a queue-definition kind (supported: {', '.join(REPO_KINDS)}, "
            "and gitopsq.dev/v1alpha1 Budget); "
            f"to pass it through unchanged, add \"{api_version}/{kind}\" to allowKinds in gitopsq.yaml")


def _pass_through(doc: YamlDocument, api_version: str, kind: str, problems: list[Finding]) -> PassThrough | None:
    meta = doc.data.get("metadata")
    name = meta.get("name") if isinstance(meta, Mapping) else None
    namespace = meta.get("namespace") if isinstance(meta, Mapping) else None
    if not isinstance(name, str) or not name:
        problems.append(findings.error("missing-field", "metadata.name is required",
                                       location=Location(doc.path, doc.line), obj=f"{kind}/<unnamed>"))
        return None
    return PassThrough(api_version, kind, name, namespace if isinstance(namespace, str) else "", doc.data,
                       doc.path, doc.line)


def _describe(data: Mapping[str, Any]) -> str:
    meta = data.get("metadata")
    name = meta.get("name") if isinstance(meta, Mapping) else None
    return f"{data.get('kind')}/{name if isinstance(name, str) else '<unnamed>'}"
