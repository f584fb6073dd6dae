"""``gitopsq simulate SCENARIO.yaml [--output json|text]``: replay a scenario on the admission engine.

Exit 0 when the scenario's ``expect`` block holds (or there is none), 1 when an expectation fails (each failure
is printed on stderr as ``file:line: …``) or the scenario is invalid, 2 on a usage error.
"""

from __future__ import annotations

import dataclasses
import importlib
import importlib.util
import json
from pathlib import Path

import click

from gitopsq.errors import EXIT_OK, EXIT_REJECTED, UsageError
from gitopsq.simulate.replay import failed_expectations, simulate
from gitopsq.simulate.result import Result, to_json
from gitopsq.simulate.scenario import Scenario, parse_scenario


def _compact_text(result: Result) -> str:
    lines = [f"scenario {result.scenario}: {result.count('Admitted')} admitted, {result.count('Preempted')} "
             f"preempted, {result.count('Finished')} finished (ran to t={result.end:g}s)"]
    for e in result.events:
        where = f" in {e.cluster_queue}" if e.cluster_queue else ""
        why = f" ({e.reason})" if e.reason and e.reason != e.type else ""
        lines.append(f"  t={e.time:>8g}  {e.type:<13} {e.workload}{where}{why}")
    lines.append("final:")
    for key in sorted(result.workloads):
        w = result.workloads[key]
        detail = f" in {w.cluster_queue}" if w.cluster_queue else ""
        if w.reason:
            detail += f" — {w.reason}: {w.message}"
        lines.append(f"  {key}: {w.state}{detail}")
    for name in sorted(result.queues):
        q = result.queues[name]
        lines.append(f"  {name}: {q.admitted} admitted, {q.pending} pending, mean wait "
                     f"{result.mean_wait(name):.1f}s, utilisation {result.utilisation.get(name, 0.0):.0%}")
    return "\n".join(lines)


def render_text(result: Result) -> str:
    """The full text report when gitopsq.simulate.text_report exists, else a compact summary."""
    if importlib.util.find_spec("gitopsq.simulate.text_report") is not None:
        report = importlib.import_module("gitopsq.simulate.text_report")
        text: str = report.render_text(result)
        return text
    return _compact_text(result)


def _on_repository(parsed: Scenario, repo: str, rev: str, cluster: str | None) -> list[tuple[str, Scenario]]:
    """The scenario once per cluster judged, its objects (and ``admission`` settings, when declared) replaced by
    that cluster's revision of REPO (docs/fleet.md); a revision with errors is a usage error naming them."""
    # Imported on use for CLI start-up time: the check pipeline loads pygit2 and the policy stack.
    from gitopsq.commands.check import format_text, load_reports
    from gitopsq.commands.plan import settings_of

    reports, display = load_reports(repo, rev, cluster=cluster)
    out = []
    for name, report in reports:
        if not report.ok:
            raise UsageError(f"--repo {repo}: the revision does not pass check, nothing to simulate on\n"
                             + format_text(report, display, name))
        settings = settings_of(report.config) or parsed.settings
        out.append((name, dataclasses.replace(parsed, objects=tuple(report.objects), settings=settings)))
    return out


@click.command(name="simulate")
@click.argument("scenario", type=click.Path(path_type=Path))
@click.option("--output", "-o", type=click.Choice(["text", "json"]), default="text", show_default=True,
              help="json: the stable, documented result object.")
@click.option("--repo", metavar="REPO", help="Replay on the queue objects of this repository (not the scenario's).")
@click.option("--rev", default="HEAD", show_default=True, help="With --repo: the revision to take objects from.")
@click.option("--cluster", metavar="NAME", help="With --repo: only this cluster of gitopsq.yaml (default: every one).")
@click.pass_context
def command(ctx: click.Context, scenario: Path, *, output: str, repo: str | None, rev: str,
            cluster: str | None) -> None:
    """Replay SCENARIO.yaml on the admission core (on REPO's objects, cluster by cluster, with --repo)."""
    if not scenario.is_file():
        raise UsageError(f"{scenario}: no such scenario file")
    if cluster is not None and repo is None:
        raise UsageError("--cluster names a cluster of a repository's gitopsq.yaml: give --repo too")
    parsed = parse_scenario(scenario.read_text(encoding="utf-8"), str(scenario))
    runs = [("", parsed)] if repo is None else _on_repository(parsed, repo, rev, cluster)
    failed = False
    results = []
    for name, run in runs:
        result = simulate(run)
        results.append((name, result))
        if output != "json":
            click.echo((f"── cluster {name} ──\n" if name else "") + render_text(result))
        for failure in failed_expectations(run, result):
            failed = True
            click.echo(f"expectation failed{f' on cluster {name}' if name else ''}: {failure}", err=True)
    if output == "json":
        if len(results) == 1 and not results[0][0]:
            click.echo(to_json(results[0][1]))
        else:
            click.echo(json.dumps({"clusters": [{"cluster": n, "result": json.loads(to_json(r))}
                                                for n, r in results]}, ensure_ascii=False))
    ctx.exit(EXIT_REJECTED if failed else EXIT_OK)
