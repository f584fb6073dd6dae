"""One error tree for the whole product.

Outcomes (a workload that does not fit, a policy that denies) are values, never exceptions. Exceptions are for
broken input and broken surroundings, and every one carries fields so that callers match on type and fields,
never on message text. Third-party errors (pygit2, kubernetes, YAML) are translated into this tree in exactly
one place each, chained with ``from``.

    GitopsqError                      base; ``exit_code`` tells the CLI what to return
    ├── InputError (exit 1)           the user's input is invalid: fix the input
    │   ├── ManifestError             a file or object in the repository is invalid (path, line, object, reason)
    │   │   ├── ConfigError           gitopsq.yaml is invalid
    │   │   ├── PolicyError           a policy file cannot be loaded or compiled
    │   │   └── ScenarioError         a simulation scenario or trace is invalid
    │   └── QuantityError             a Kubernetes quantity is malformed (text, reason); also a ValueError
    ├── UsageError (exit 2)           the command line itself is wrong
    └── RuntimeFailure (exit 3)       the world around us failed: retry may help
        ├── SourceError               git: unreachable remote, unknown ref, authentication failure (url, ref)
        │   ├── UnknownRevisionError  the branch, tag or commit does not exist
        │   └── AuthenticationError   the remote refused our credentials
        ├── ClusterError              Kubernetes API: unreachable, forbidden, conflict that did not resolve
        │   ├── ClusterConflict       the object changed under us, or another field manager owns a field
        │   ├── ClusterNotFound       the object, its namespace or its API kind does not exist
        │   ├── ClusterForbidden      401 or 403
        │   ├── ClusterInvalid        the API server rejected the object (causes)
        │   ├── ClusterUnavailable    unreachable, 429 or 5xx (retry_after)
        │   └── NotLeading            the controller lost its Lease: no writes until it leads again
        ├── AuditError                the audit trail cannot be written or read
        │   ├── WalLockedError        another writer holds the WAL directory
        │   ├── WalCorruptError       a WAL line other than the newest segment's last cannot be read
        │   ├── RemoteUnreachableError  the audit remote cannot be reached: records stay in the WAL
        │   ├── PushRejectedError     the remote rejected a push (not a fast-forward)
        │   ├── PushRefusedError      the remote refused a push (hook, protection)
        │   └── AuditBranchRewoundError  the audit branch no longer holds what the writer pushed
        ├── ForgeError                a forge API call failed or was refused (forge, status, method, path)
        └── NoteError                 an approvals note cannot be signed (no ssh-keygen, an unusable key)

The classes below `ClusterError` and `AuditError` (and `NotLeading`, `ForgeError`, `NoteError`) are defined
beside the code that raises them; `QuantityError` is defined here and importable from `gitopsq.api.quantity`,
where it is raised. tests/test_errors.py compares this drawing with the class hierarchy.

Not in the tree, on purpose: exceptions that never leave the package that raises them, each translated where it
is caught (CallbackAbort and its subclasses, RefusedError, CelCompileError, CelFunctionError, InventoryFormatError,
_ExpiredError, KeyFileError — a key file gitopsq.yaml names that cannot be used, a config finding), and
NegativeUsageError, an assertion: a bug in the quota accounting, never a reaction to input; and BuildError, which
only the engine's compile step (`python -m gitopsq.native_build`, a build tool) raises and reports itself;
AmbiguousRefError, a name that is both a branch and a tag, which the source turns into an unknown-revision
error naming both refs where it resolves a revision; TopologyRequestError and AssignmentError, the TAS readers' refusal
of a topology annotation or a topologyAssignment Kueue would refuse, for their caller to report against the
object; and _BodyTooLargeError, which the HTTP server answers with 413 where it reads the body.
"""

from __future__ import annotations

from dataclasses import dataclass

EXIT_OK = 0
EXIT_REJECTED = 1
EXIT_USAGE = 2
EXIT_RUNTIME = 3


class GitopsqError(Exception):
    """Base of every error gitopsq raises on purpose."""

    exit_code: int = EXIT_RUNTIME

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason

    def __str__(self) -> str:
        return self.reason


class InputError(GitopsqError):
    """The input is invalid; the user must change it."""

    exit_code = EXIT_REJECTED


@dataclass(frozen=True, slots=True)
class Location:
    """Where something stands in a repository: file path (repository-relative) and 1-based line."""

    path: str
    line: int | None = None
    column: int | None = None

    def __str__(self) -> str:
        if self.line is None:
            return self.path
        if self.column is None:
            return f"{self.path}:{self.line}"
        return f"{self.path}:{self.line}:{self.column}"


class ManifestError(InputError):
    """A file or object in a queue-definition repository is invalid."""

    def __init__(self, reason: str, *, location: Location | None = None, obj: str | None = None) -> None:
        super().__init__(reason)
        self.location = location
        self.obj = obj

    def __str__(self) -> str:
        parts = [str(self.location)] if self.location else []
        if self.obj:
            parts.append(self.obj)
        parts.append(self.reason)
        return ": ".join(parts)


class ConfigError(ManifestError):
    """gitopsq.yaml is invalid."""


class PolicyError(ManifestError):
    """A policy file cannot be loaded or an expression cannot be compiled."""


class ScenarioError(ManifestError):
    """A simulation scenario or workload trace is invalid."""


class UsageError(GitopsqError):
    """The command line is wrong."""

    exit_code = EXIT_USAGE


class RuntimeFailure(GitopsqError):  # noqa: N818 - a category of errors, named for the exit code it maps to
    """Something outside gitopsq failed; the input may be fine."""

    exit_code = EXIT_RUNTIME


class SourceError(RuntimeFailure):
    """Git failed: unreachable remote, unknown revision, authentication failure."""

    def __init__(self, reason: str, *, url: str | None = None, ref: str | None = None) -> None:
        super().__init__(reason)
        self.url = url
        self.ref = ref


class UnknownRevisionError(SourceError):
    """The branch, tag or commit does not exist in the repository."""


class AuthenticationError(SourceError):
    """The remote refused our credentials."""


class ClusterError(RuntimeFailure):
    """The Kubernetes API failed or refused a request."""

    def __init__(self, reason: str, *, status: int | None = None, obj: str | None = None) -> None:
        super().__init__(reason)
        self.status = status
        self.obj = obj


class AuditError(RuntimeFailure):
    """The audit trail cannot be written or read."""


class QuantityError(InputError, ValueError):
    """The text is not a valid Kubernetes quantity; ``reason`` says why in words a user understands."""

    def __init__(self, text: str, reason: str) -> None:
        super().__init__(reason)
        self.text = text

    def __str__(self) -> str:
        return f"invalid quantity {self.text!r}: {self.reason}"


class NegativeUsageError(AssertionError):
    """Quota usage would drop below zero: something was removed that was never added (an accounting bug in
    `gitopsq.admission.quota`, never input). Defined here, not beside its raiser: the engine's modules may be
    compiled (`gitopsq.native`), and a compiled class cannot derive from AssertionError."""

