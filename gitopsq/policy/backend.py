"""The choice between CEL runtimes: the one place that imports an implementation, lazily, when first asked.

Two backends implement `runtime.Backend`: ``cel-python`` (the reference, pure Python, `gitopsq.policy.cel`) and
``cel-expr-python`` (Google's cel-cpp runtime, `gitopsq.policy.cel_fast`); each is imported only when chosen, so a
process that never evaluates CEL pays for neither. The interface's names stay importable from here.

The core never reads the environment: the shell picks a backend name (``GITOPSQ_CEL_BACKEND``) and passes it.
"""

from __future__ import annotations

import importlib.util

from gitopsq.policy.runtime import (
    BACKEND_NAMES,
    FAST,
    ITERATION_BUDGET,
    REFERENCE,
    VARIABLE_NAMES,
    WORK_LIMIT,
    Backend,
    CelCompileError,
    Outcome,
    Program,
)

__all__ = ["BACKEND_NAMES", "FAST", "ITERATION_BUDGET", "REFERENCE", "VARIABLE_NAMES", "WORK_LIMIT", "Backend",
           "CelCompileError", "Outcome", "Program", "available_backends", "default_backend_name",
           "fast_backend_installed", "get_backend"]


def fast_backend_installed() -> bool:
    return importlib.util.find_spec("cel_expr_python") is not None


def available_backends() -> tuple[str, ...]:
    return BACKEND_NAMES if fast_backend_installed() else (REFERENCE,)


def default_backend_name() -> str:
    """The fast runtime when it is installed, else the reference one."""
    return FAST if fast_backend_installed() else REFERENCE


_BACKENDS: dict[str, Backend] = {}


def get_backend(name: str | None = None) -> Backend:
    """The backend called ``name`` (default: `default_backend_name`); one instance per process."""
    chosen = name or default_backend_name()
    if chosen not in BACKEND_NAMES:
        raise ValueError(f"unknown CEL backend {chosen!r} (choose {' or '.join(BACKEND_NAMES)})")
    backend = _BACKENDS.get(chosen)
    if backend is None:
        # Imported on first use for CLI start-up time: each CEL runtime takes 130-155 ms to import, a command needs one.
        if chosen == FAST:
            from gitopsq.policy.cel_fast import FastBackend
            backend = FastBackend()
        else:
            from gitopsq.policy.cel import ReferenceBackend
            backend = ReferenceBackend()
        _BACKENDS[chosen] = backend
    return backend
