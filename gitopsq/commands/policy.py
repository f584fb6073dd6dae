"""``gitopsq policy test [DIR]``: run the test cases embedded in policy files, on every CEL backend.

Exit 0 when every test passes on every backend and the backends agree; 1 otherwise. Without DIR, the built-in
library is tested. ``GITOPSQ_CEL_BACKEND`` (read here, in the shell) picks the backend other commands use;
`backend_from_env` is the one place that reads it.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import click

from gitopsq.commands.groups import group
from gitopsq.errors import EXIT_OK, EXIT_REJECTED, UsageError
from gitopsq.policy import available_backends, load_policies, parse_policies, run_policy_tests
from gitopsq.policy.backend import BACKEND_NAMES, default_backend_name
from gitopsq.policy.language import Policy
from gitopsq.policy.testing import TestReport

POLICY_TEST_JSON_VERSION = 1

BACKEND_ENV = "GITOPSQ_CEL_BACKEND"


def backend_from_env() -> str:
    """The CEL backend the user chose with ``GITOPSQ_CEL_BACKEND``, else the fastest installed one."""
    chosen = os.environ.get(BACKEND_ENV, "").strip()
    if not chosen:
        return default_backend_name()
    if chosen not in available_backends():
        raise UsageError(f"{BACKEND_ENV}={chosen!r} is not an installed CEL backend "
                         f"(installed: {', '.join(available_backends())})")
    return chosen


def read_policy_dir(directory: Path) -> list[Policy]:
    """Every policy in ``*.yaml``/``*.yml`` files below ``directory``; paths in errors are relative to it."""
    if not directory.is_dir():
        raise UsageError(f"{directory} is not a directory")
    files = sorted(p for p in directory.rglob("*") if p.suffix in (".yaml", ".yml") and p.is_file())
    policies: list[Policy] = []
    seen: dict[str, str] = {}
    for file in files:
        rel = file.relative_to(directory).as_posix()
        for policy in parse_policies(rel, file.read_text(encoding="utf-8"), backend=BACKEND_NAMES[0]):
            if policy.name in seen:
                raise UsageError(f"{rel}: policy name {policy.name!r} is also used in {seen[policy.name]}")
            seen[policy.name] = rel
            policies.append(policy)
    return policies


@group(name="policy")
def command() -> None:
    """Policy tools."""


def test_report_json(report: TestReport, policies: list[Policy], backends: Sequence[str]) -> dict[str, Any]:
    """The stable JSON form of `policy test` (docs/policy.md)."""
    failed = sum(not o.passed for o in report.outcomes)
    return {"version": POLICY_TEST_JSON_VERSION, "ok": report.ok, "backends": list(backends),
            "summary": {"policies": len(policies), "tests": len({(o.policy, o.test) for o in report.outcomes}),
                        "failed": failed, "disagreements": len(report.disagreements)},
            "outcomes": [{"policy": o.policy, "test": o.test, "backend": o.backend, "passed": o.passed,
                          "detail": o.detail or None} for o in report.outcomes],
            "disagreements": list(report.disagreements)}


@command.command(name="test")
@click.argument("directory", required=False, type=click.Path(path_type=Path))
@click.option("--backend", "backends", multiple=True, type=click.Choice(BACKEND_NAMES),
              help="Run on this backend only (repeatable). Default: every installed backend.")
@click.option("--verbose", "-v", is_flag=True, help="List every test, not only failures.")
@click.option("--output", "-o", type=click.Choice(["text", "json"]), default="text", show_default=True,
              help="json: every outcome and the summary as one stable document.")
@click.pass_context
def test(ctx: click.Context, directory: Path | None, backends: tuple[str, ...], verbose: bool, output: str) -> None:
    """Run the tests embedded in the policies of DIRECTORY (default: the built-in library)."""
    chosen = backends or available_backends()
    for name in chosen:
        if name not in available_backends():
            raise UsageError(f"CEL backend {name!r} is not installed")
    policies = read_policy_dir(directory) if directory else load_policies(builtin=True, backend=BACKEND_NAMES[0])
    report = run_policy_tests(policies, chosen)
    if output == "json":
        click.echo(json.dumps(test_report_json(report, policies, chosen), indent=2, ensure_ascii=False))
        ctx.exit(EXIT_OK if report.ok else EXIT_REJECTED)
    for outcome in report.outcomes:
        if verbose or not outcome.passed:
            mark = "ok  " if outcome.passed else "FAIL"
            line = f"{mark} {outcome.policy}: {outcome.test} [{outcome.backend}]"
            click.echo(line + (f": {outcome.detail}" if outcome.detail else ""))
    for disagreement in report.disagreements:
        click.echo(f"FAIL {disagreement}")
    failed = sum(not o.passed for o in report.outcomes)
    tests = len({(o.policy, o.test) for o in report.outcomes})
    click.echo(f"{len(policies)} policies, {tests} tests on {', '.join(chosen)}: "
               f"{failed} failed, {len(report.disagreements)} backend disagreements")
    ctx.exit(EXIT_OK if report.ok else EXIT_REJECTED)
