"""What checking a revision produces: the objects it holds, where each came from, and the findings."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Final

from gitopsq.api import model as m
from gitopsq.api.findings import Finding
from gitopsq.api.reader import FieldPath
from gitopsq.errors import Location
from gitopsq.manifests.budgets import LoadedBudget
from gitopsq.manifests.config_model import RepoConfig

REPORT_VERSION: Final = 1


@dataclass(frozen=True, slots=True)
class LoadedObject:
    """A decoded queue object, the file and line it came from, the version it was written in, its field lines."""

    obj: m.QueueObject
    path: str
    line: int
    api_version: str
    lines: Mapping[FieldPath, int] = field(default_factory=dict, compare=False, repr=False)
    # A kustomize-rendered object: where each field was written (its base file or the patch that set it);
    # ``path``/``line`` are then the base document's (docs/kustomize.md).
    sources: Mapping[FieldPath, Location] | None = field(default=None, compare=False, repr=False)
    overlay: str = ""  # the overlay's kustomization file, for a kustomize-rendered object

    @property
    def key(self) -> m.ObjectKey:
        return m.key_of(self.obj)

    def location(self, field_path: FieldPath = ()) -> Location:
        """Where ``field_path`` (or its nearest parent that has a place) was written."""
        probe = field_path
        while probe:
            if self.sources is not None:
                found = self.sources.get(probe)
                if found is not None:
                    return found
            else:
                line = self.lines.get(probe)
                if line is not None:
                    return Location(self.path, line)
            probe = probe[:-1]
        return Location(self.path, self.line)


@dataclass(frozen=True, slots=True)
class PassThrough:
    """A document of a kind gitopsq.yaml's ``allowKinds`` lets through unchanged."""

    api_version: str
    kind: str
    name: str
    namespace: str
    doc: Mapping[str, Any]
    path: str
    line: int
    overlay: str = ""  # the overlay's kustomization file, for a kustomize-rendered document


@dataclass(frozen=True, slots=True)
class Report:
    """The outcome of checking one revision. Policies add their findings with `with_findings`."""

    revision: str | None
    config: RepoConfig | None
    entries: tuple[LoadedObject, ...]
    findings: tuple[Finding, ...]
    passthrough: tuple[PassThrough, ...] = ()
    files: tuple[str, ...] = ()
    budgets: tuple[LoadedBudget, ...] = ()  # `entries` already hold what they compile into

    @property
    def objects(self) -> tuple[m.QueueObject, ...]:
        return tuple(e.obj for e in self.entries)

    @property
    def errors(self) -> tuple[Finding, ...]:
        return tuple(f for f in self.findings if f.is_error)

    @property
    def warnings(self) -> tuple[Finding, ...]:
        return tuple(f for f in self.findings if not f.is_error)

    @property
    def ok(self) -> bool:
        return not self.errors

    @property
    def rejected(self) -> bool:
        return not self.ok

    def with_findings(self, extra: Iterable[Finding]) -> Report:
        return replace(self, findings=sort_findings((*self.findings, *extra)))

    def to_json(self) -> dict[str, Any]:
        """The stable JSON form (docs/check.md)."""
        errors = len(self.errors)
        return {
            "version": REPORT_VERSION,
            "revision": self.revision,
            "ok": errors == 0,
            "summary": {"files": len(self.files), "objects": len(self.entries) + len(self.passthrough),
                        "errors": errors, "warnings": len(self.findings) - errors},
            "findings": [finding_json(f) for f in self.findings],
            "objects": [{"kind": e.obj.KIND, "namespace": e.obj.meta.namespace, "name": e.obj.meta.name,
                         "apiVersion": e.api_version, "path": e.path, "line": e.line} for e in self.entries]
                       + [{"kind": p.kind, "namespace": p.namespace or None, "name": p.name,
                           "apiVersion": p.api_version, "path": p.path, "line": p.line} for p in self.passthrough]
                       + [{"kind": "Budget", "namespace": None, "name": b.budget.name,
                           "apiVersion": str(b.doc.get("apiVersion")), "path": b.path, "line": b.line}
                          for b in self.budgets],
        }


def finding_json(f: Finding) -> dict[str, Any]:
    loc = f.location
    return {"severity": f.severity.value, "code": f.code, "message": f.message,
            "path": loc.path if loc else None, "line": loc.line if loc else None, "object": f.obj}


def sort_findings(items: Iterable[Finding]) -> tuple[Finding, ...]:
    """Findings by file, line, errors before warnings, code, message; exact duplicates dropped."""
    return tuple(sorted(set(items), key=Finding.sort_key))
