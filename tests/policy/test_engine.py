"""The evaluation engine: verdicts for changed objects only, errors as denials, severity, scope, and the rule that a
repository cannot switch off a built-in Deny policy on its own."""

from __future__ import annotations

import pytest

from gitopsq.policy import SourcedObject, build_policy_input, evaluate, format_verdict, parse_policies
from gitopsq.policy.language import Change, ObjectKey, Operation, Policy, PolicyInput

from .helpers import BACKENDS, PLATFORM_KEY, TEAM_A_KEY, cluster_queue, local_queue, repo_config, signed_commit


def _policy(spec: str, name: str = "p", builtin: bool = False) -> Policy:
    text = f"apiVersion: gitopsq.dev/v1alpha1\nkind: Policy\nmetadata: {{name: {name}}}\nspec:\n{spec}"
    (policy,) = parse_policies(f"policies/{name}.yaml", text, "cel-python", builtin=builtin)
    return policy


NAME_RULE = _policy(
    "  match: {kinds: [ClusterQueue]}\n"
    "  validations:\n"
    "    - expression: \"object.metadata.name.startsWith('team-')\"\n"
    "      messageExpression: \"'name ' + object.metadata.name + ' lacks the team- prefix'\"\n")
OLD = [SourcedObject("teams/a/q.yaml", cluster_queue("team-a-cq"), 1),
       SourcedObject("teams/a/q.yaml", cluster_queue("x"), 9)]


def _input(new: list[SourcedObject]) -> object:
    return build_policy_input(OLD, new, repo_config(), repo_config())


@pytest.mark.parametrize("backend", BACKENDS)
def test_only_changed_objects_are_evaluated(backend: str) -> None:
    """An unchanged object that would fail the policy draws no verdict; the changed one does."""
    new = [OLD[0], SourcedObject("teams/a/q.yaml", cluster_queue("team-a-2"), 17), OLD[1]]
    verdicts = evaluate([NAME_RULE], _input(new), backend)  # type: ignore[arg-type]
    assert [(v.obj, v.allowed) for v in verdicts] == [("ClusterQueue/team-a-2", True)]


@pytest.mark.parametrize("backend", BACKENDS)
def test_verdict_format_names_policy_object_file_line_and_message(backend: str) -> None:
    """A denial prints as ``policy <name>: <object> (<file>:<line>): <message>``."""
    new = [*OLD, SourcedObject("teams/a/q.yaml", cluster_queue("bad"), 25)]
    (verdict,) = evaluate([NAME_RULE], _input(new), backend)  # type: ignore[arg-type]
    assert format_verdict(verdict) == "policy p: ClusterQueue/bad (teams/a/q.yaml:25): name bad lacks the team- prefix"


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(("expression", "reason", "text"), [
    ("object.spec.missing.field == 1", "EvaluationError", "expression failed to evaluate"),
    ("object.metadata.name", "EvaluationError", "not a bool"),
    ("desired.ClusterQueue.all(a, desired.ClusterQueue.all(b, desired.ClusterQueue.all(c, true)))",
     "CostLimitExceeded", "exceeded the evaluation cost limit"),
], ids=["missing field", "non-boolean result", "runaway expression"])
def test_evaluation_problem_is_a_denial_not_a_crash(backend: str, expression: str, reason: str, text: str) -> None:
    """Runtime errors, non-boolean results and exhausted budgets become deny verdicts carrying the problem."""
    policy = _policy(f"  match: {{kinds: [ClusterQueue]}}\n  validations:\n    - expression: \"{expression}\"\n")
    many = [SourcedObject("teams/a/many.yaml", cluster_queue(f"team-a-{i}"), i) for i in range(30)]
    added = SourcedObject("teams/a/new.yaml", cluster_queue("team-a-new"))
    pi = build_policy_input([*OLD, *many], [*OLD, *many, added], repo_config(), repo_config())
    (verdict,) = evaluate([policy], pi, backend)
    assert verdict.denies and verdict.reason == reason and text in verdict.message


@pytest.mark.parametrize("backend", BACKENDS)
def test_warn_policy_does_not_deny(backend: str) -> None:
    """A failing Warn policy yields a warning verdict that does not deny."""
    policy = _policy("  severity: Warn\n  validations: [{expression: 'false', message: careful}]\n")
    (verdict,) = evaluate([policy], _input([OLD[0]]), backend)  # type: ignore[arg-type]
    assert verdict.warns and not verdict.denies and verdict.message == "careful"


@pytest.mark.parametrize("backend", BACKENDS)
def test_message_falls_back_when_message_expression_fails(backend: str) -> None:
    """A messageExpression that errors falls back to ``message``."""
    policy = _policy("  validations: [{expression: 'false', message: plain, messageExpression: 'object.nope'}]\n")
    (verdict,) = evaluate([policy], _input([OLD[0]]), backend)  # type: ignore[arg-type]
    assert verdict.message == "plain"


@pytest.mark.parametrize("backend", BACKENDS)
def test_revision_policy_runs_once_with_every_matching_change(backend: str) -> None:
    """A Revision-scoped policy is evaluated once, with ``changes`` listing every matching change."""
    policy = _policy("  scope: Revision\n  match: {kinds: [LocalQueue]}\n"
                     "  validations: [{expression: 'changes.size() == 1', messageExpression: "
                     "\"string(changes.size()) + ' queues changed'\"}]\n")
    new = [*OLD, SourcedObject("teams/a/l.yaml", local_queue("one", "team-a", "q")),
           SourcedObject("teams/a/l.yaml", local_queue("two", "team-a", "q"))]
    (verdict,) = evaluate([policy], _input(new), backend)  # type: ignore[arg-type]
    assert verdict.message == "2 queues changed"


GUARD = _policy("  validations: [{expression: 'false', message: guard}]\n", name="guard", builtin=True)


def _disable(previous_disabled: list[str], commit: dict | None, first: bool = False) -> list[str]:  # type: ignore[type-arg]
    config = repo_config(policies={"disabled": ["guard"]})
    previous = None if first else repo_config(policies={"disabled": previous_disabled})
    new = [SourcedObject("teams/a/q.yaml", cluster_queue("team-a-9"))]
    pi = build_policy_input([], new, config, previous, commit=commit)
    return sorted({v.policy for v in evaluate([GUARD], pi, "cel-python") if not v.allowed})


@pytest.mark.parametrize(("previous", "commit", "first", "denying"), [
    ([], signed_commit("pat@example.com", PLATFORM_KEY), False, []),
    (["guard"], signed_commit("ann@example.com", TEAM_A_KEY), False, []),
    ([], None, True, []),
    ([], signed_commit("ann@example.com", TEAM_A_KEY), False, ["gitopsq-engine", "guard"]),
    ([], {**signed_commit("ann@example.com", TEAM_A_KEY), "author": {"email": "pat@example.com"},
          "signature": {"state": "unsigned"}}, False, ["gitopsq-engine", "guard"]),
], ids=["the platform team disables it", "it was already disabled before", "a working tree trusts its file",
        "a team tries to disable it", "an unsigned claim to be the platform (signing required)"])
def test_builtin_deny_policy_disabling(previous: list[str], commit: dict | None, first: bool,  # type: ignore[type-arg]
                                       denying: list[str]) -> None:
    """``policies.disabled`` drops a built-in Deny policy only with the platform team's change to gitopsq.yaml."""
    assert _disable(previous, commit, first) == denying


def test_repository_policy_can_be_disabled_freely() -> None:
    """A repository's own policy listed in ``policies.disabled`` is simply not run."""
    mine = _policy("  validations: [{expression: 'false'}]\n", name="guard", builtin=False)
    config = repo_config(policies={"disabled": ["guard"]})
    pi = build_policy_input([], [SourcedObject("teams/a/q.yaml", cluster_queue("team-a-9"))], config, config,
                            commit=signed_commit("ann@example.com", TEAM_A_KEY))
    assert evaluate([mine], pi, "cel-python") == ()


@pytest.mark.parametrize("backend", BACKENDS)
def test_hand_built_input_without_a_repository_is_evaluated(backend: str) -> None:
    """A PolicyInput built by hand (the admission webhook's Jobs) with an empty ``repo`` evaluates, never crashes."""
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j", "namespace": "team-a"}}
    change = Change(Operation.CREATE, "cluster/team-a/jobs/j", ObjectKey.of(job), job, None)
    policy = _policy("  match: {kinds: [Job]}\n  validations:\n"
                     "    - expression: \"owner == null && has(object.metadata.labels)\"\n"
                     "      message: needs labels\n")
    (verdict,) = evaluate([policy], PolicyInput(changes=(change,), desired={}, repo={}), backend)
    assert verdict.denies and verdict.message == "needs labels"
