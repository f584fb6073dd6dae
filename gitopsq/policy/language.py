"""Policies, changes and verdicts: the values the policy engine takes and returns.

Everything here is plain data. Objects are JSON-like dicts exactly as they appear in the repository, so the
engine does not depend on the object model; the caller (``gitopsq check``, the sync loop) builds a
`PolicyInput` with `gitopsq.policy.context.build_policy_input`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

JSON = Any  # a JSON-like value: dict, list, str, int, float, bool or None


class Operation(StrEnum):
    CREATE = "CREATE"
    UPDATE = "UPDATE"
    DELETE = "DELETE"


class Severity(StrEnum):
    DENY = "Deny"
    WARN = "Warn"


class Scope(StrEnum):
    """``Object``: once per matching changed object. ``Revision``: once per revision (aggregate rules)."""

    OBJECT = "Object"
    REVISION = "Revision"


@dataclass(frozen=True, slots=True, order=True)
class ObjectKey:
    """Identity of an object across revisions and API versions: group, kind, namespace, name."""

    group: str
    kind: str
    namespace: str
    name: str

    @classmethod
    def of(cls, obj: Mapping[str, JSON]) -> ObjectKey:
        api_version = str(obj.get("apiVersion") or "")
        group = api_version.rpartition("/")[0] if "/" in api_version else ""
        meta = obj.get("metadata")
        if not isinstance(meta, Mapping):
            meta = {}
        return cls(group, str(obj.get("kind") or ""), str(meta.get("namespace") or ""), str(meta.get("name") or ""))

    def __str__(self) -> str:
        if self.namespace:
            return f"{self.kind}/{self.namespace}/{self.name}"
        return f"{self.kind}/{self.name}"


@dataclass(frozen=True, slots=True)
class SourcedObject:
    """An object of a revision with the file (repository-relative) and 1-based line it was read from."""

    path: str
    object: Mapping[str, JSON]
    line: int | None = None

    @property
    def key(self) -> ObjectKey:
        return ObjectKey.of(self.object)


@dataclass(frozen=True, slots=True)
class Change:
    """One object that differs between the previous accepted revision and the new one.

    A moved object is a DELETE at its old path (``moved_to`` set) and a CREATE at its new path (``old_path``
    set), so each side is judged with the team that owns that path.
    """

    operation: Operation
    path: str
    key: ObjectKey
    object: Mapping[str, JSON] | None
    old_object: Mapping[str, JSON] | None
    line: int | None = None
    old_path: str | None = None
    moved_to: str | None = None


@dataclass(frozen=True, slots=True)
class Duplicate:
    """The same object identity defined more than once in one revision."""

    key: ObjectKey
    places: tuple[tuple[str, int | None], ...]


@dataclass(frozen=True, slots=True)
class PolicyInput:
    """Everything one evaluation looks at. Build it with `build_policy_input`."""

    changes: tuple[Change, ...]
    desired: Mapping[str, Sequence[Mapping[str, JSON]]]
    repo: Mapping[str, JSON]
    previous_repo: Mapping[str, JSON] | None = None
    commit: Mapping[str, JSON] | None = None
    commits: tuple[Mapping[str, JSON], ...] = ()
    touched_paths: frozenset[str] = frozenset()
    duplicates: tuple[Duplicate, ...] = ()
    actor: Mapping[str, JSON] | None = None
    aggregate: Mapping[str, JSON] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Variable:
    name: str
    expression: str
    line: int | None = None


@dataclass(frozen=True, slots=True)
class Validation:
    expression: str
    message: str | None = None
    message_expression: str | None = None
    reason: str = "Forbidden"
    line: int | None = None


@dataclass(frozen=True, slots=True)
class Match:
    kinds: tuple[str, ...] = ()        # empty: every kind
    paths: tuple[str, ...] = ()        # globs; empty: every path
    operations: tuple[Operation, ...] = (Operation.CREATE, Operation.UPDATE, Operation.DELETE)


@dataclass(frozen=True, slots=True)
class PolicyTest:
    name: str
    case: Mapping[str, JSON]
    expect_allowed: bool
    message_contains: str | None = None
    line: int | None = None


@dataclass(frozen=True, slots=True)
class Policy:
    name: str
    source: str                        # file the policy was read from
    line: int | None
    match: Match
    variables: tuple[Variable, ...]
    validations: tuple[Validation, ...]
    severity: Severity = Severity.DENY
    scope: Scope = Scope.OBJECT
    builtin: bool = False
    tests: tuple[PolicyTest, ...] = ()
    test_defaults: Mapping[str, JSON] = field(default_factory=dict)
    description: str = ""


@dataclass(frozen=True, slots=True)
class Verdict:
    """The outcome of one policy on one changed object (or on the revision, for aggregate policies)."""

    policy: str
    severity: Severity
    allowed: bool
    obj: str | None
    path: str | None
    line: int | None
    message: str
    reason: str

    def __str__(self) -> str:
        where = self.path or "-"
        if self.line is not None:
            where = f"{where}:{self.line}"
        return f"policy {self.policy}: {self.obj or '-'} ({where}): {self.message}"

    @property
    def denies(self) -> bool:
        return not self.allowed and self.severity is Severity.DENY

    @property
    def warns(self) -> bool:
        return not self.allowed and self.severity is Severity.WARN
