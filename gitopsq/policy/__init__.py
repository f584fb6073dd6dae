"""The CEL policy engine (pure core): trust boundaries that no pull request can cross.

Entry points for callers (``gitopsq check``, plan, the sync loop, the webhook)::

    policies = load_policies(builtin=True, repo_files={"policies/x.yaml": text}, backend=name)
    pi = build_policy_input(old_objects, new_objects, repo_config, previous_repo_config,
                            commit=commit, touched_paths=touched)
    verdicts = evaluate(policies, pi, backend=name)
    for v in verdicts: if not v.allowed: print(format_verdict(v))

See docs/policy.md for the policy format, the context variables and the built-in library.
"""

from gitopsq.policy.backend import available_backends, default_backend_name, get_backend
from gitopsq.policy.context import build_policy_input
from gitopsq.policy.evaluate import denials, evaluate, format_verdict
from gitopsq.policy.language import (
    Change,
    Duplicate,
    ObjectKey,
    Operation,
    Policy,
    PolicyInput,
    Severity,
    SourcedObject,
    Verdict,
)
from gitopsq.policy.loader import load_policies, parse_policies
from gitopsq.policy.repo import normalise_repo_config, owner_of_path
from gitopsq.policy.revision_changes import desired_by_kind, diff_revisions, find_duplicates
from gitopsq.policy.testing import run_policy_tests

__all__ = [
    "Change", "Duplicate", "ObjectKey", "Operation", "Policy", "PolicyInput", "Severity", "SourcedObject",
    "Verdict", "available_backends", "build_policy_input", "default_backend_name", "denials",
    "desired_by_kind", "diff_revisions", "evaluate", "find_duplicates", "format_verdict", "get_backend",
    "load_policies", "normalise_repo_config", "owner_of_path", "parse_policies", "run_policy_tests",
]
