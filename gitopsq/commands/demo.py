"""``gitopsq demo [--dir DIR]``: the no-cluster tour on the embedded repository template (docs/demo.md).

Makes a local Git repository from ``repo-template/``, syncs and checks it like the controller, replays the
template's sample trace on the admission engine, writes audit records to the repository's audit branch, and
prints what happened and where to look. Exit 0 when every step that could run succeeded (a step that cannot run
here, such as the fleet step without kustomize, is skipped and says why), 1 when one failed.
"""

from __future__ import annotations

import tempfile
import textwrap
from pathlib import Path

import click

from gitopsq import logs
from gitopsq.errors import EXIT_OK, EXIT_REJECTED
from gitopsq.simulate.text_report import render_text

_MARK = {"ok": "✓", "failed": "✗", "skipped": "–"}


def _queue_table(result: object) -> list[str]:
    text = render_text(result)  # type: ignore[arg-type]
    lines = text.splitlines()
    if "ClusterQueues:" not in lines:
        return []
    start = lines.index("ClusterQueues:")
    end = next((i for i in range(start + 1, len(lines)) if not lines[i].strip()), len(lines))
    return lines[start:end]


def _pending(result: object, width: int = 110) -> list[str]:
    """Why the workloads still pending at the end wait, in Kueue's words (wrapped at ``width`` columns)."""
    waiting = sorted((k, w) for k, w in result.workloads.items() if w.state == "Pending")  # type: ignore[attr-defined]
    lines = ["", f"Still pending at the end ({len(waiting)}):"] if waiting else []
    for key, w in waiting:
        lines.append(f"  {key}: {w.reason}")
        lines += textwrap.wrap(w.message, width, initial_indent="    ", subsequent_indent="    ")
    return lines


def _fleet_changes(fleet: object) -> list[str]:
    """Each changed field of each changed cluster with the file and line that set it, then the clusters left alone."""
    from gitopsq.plan.fleet_plan import FleetPlan
    from gitopsq.plan.render_text import field_line

    assert isinstance(fleet, FleetPlan)
    lines = []
    for cluster in fleet.changed:
        for change in cluster.plan.objects:
            for index, item in enumerate(change.fields):
                source = change.source(index)
                at = f"  ({source})" if source is not None else ""
                lines.append(f"  {cluster.cluster}: {change.key.kind}/{change.key.name} {field_line(item)}{at}")
    if fleet.unchanged:
        lines.append(f"  left alone: {', '.join(fleet.unchanged)}")
    return lines


def describe(outcome: object) -> str:
    """What happened and where to look, for a terminal."""
    # Imported on use for CLI start-up time: gitopsq.demo loads pygit2, the audit trail and the simulator.
    from gitopsq.demo import DemoOutcome

    assert isinstance(outcome, DemoOutcome)
    lines = ["gitopsq demo: a queue-definition repository, synced, checked, simulated and audited — no cluster.", ""]
    lines += [f"  {_MARK[s.status]} {s.name:<10} {s.detail}" for s in outcome.steps]
    if outcome.result is not None:
        lines += ["", *_queue_table(outcome.result), *_pending(outcome.result)]
    if outcome.fleet is not None:
        lines += ["", "Fleet pull request more-gpus, cluster by cluster (each field at the line that set it):",
                  *_fleet_changes(outcome.fleet)]
    lines += ["", "Where to look:", f"  repository     {outcome.repository}   (git -C {outcome.repository} log)"]
    if outcome.report is not None:
        lines.append(f"  report         {outcome.report}")
    if outcome.result_json is not None:
        lines.append(f"  result (JSON)  {outcome.result_json}")
    for chart in outcome.charts:
        lines.append(f"  chart          {chart}")
    if outcome.audit_branch:
        lines.append(f"  audit branch   {outcome.audit_branch} in the repository")
    if outcome.fleet_plan is not None:
        lines.append(f"  fleet plan     {outcome.fleet_plan}   (two clusters, one pull request: docs/fleet.md)")
    lines += ["", "Next:"]
    if outcome.audit_branch:
        lines.append(f"  gitopsq audit verify {outcome.repository}")
        lines.append(f"  gitopsq audit export {outcome.repository} --output html --to audit.html")
    lines.append(f"  gitopsq simulate {outcome.repository / 'traces' / 'sample.yaml'} --output text")
    lines.append(f"  gitopsq check {outcome.repository}")
    if outcome.fleet_plan is not None:
        fleet = outcome.directory / "fleet"
        lines.append(f"  gitopsq plan {fleet} --base main --head more-gpus --output markdown")
    return "\n".join(lines)


@click.command(name="demo")
@click.option("--dir", "directory", type=click.Path(file_okay=False, path_type=Path),
              help="Where to build the demo (new or empty). Default: a new temporary directory, kept.")
@click.option("--template", type=click.Path(exists=True, file_okay=False, path_type=Path),
              help="Repository template to start from (default: the embedded repo-template/).")
@click.pass_context
def command(ctx: click.Context, directory: Path | None, template: Path | None) -> None:
    """The no-cluster tour: repository, sync, check, simulate, audit — and where to look."""
    # Imported on use for CLI start-up time: gitopsq.demo loads pygit2, the audit trail and the simulator.
    from gitopsq.demo import run_demo

    logs.configure(json=False, level="warning")  # the tour prints its own account; only problems go to stderr
    target = directory if directory is not None else Path(tempfile.mkdtemp(prefix="gitopsq-demo-"))
    outcome = run_demo(target, template)
    click.echo(describe(outcome))
    ctx.exit(EXIT_OK if outcome.ok else EXIT_REJECTED)
