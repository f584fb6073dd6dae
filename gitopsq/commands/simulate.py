"""``gitopsq simulate SCENARIO.yaml [--output json|text]``: replay a scenario on the admission engine.

Exit 0 when the scenario's ``expect`` block holds (or there is none), 1 when an expectation fails (each failure
is printed on stderr as ``file:line: …``) or the scenario is invalid, 2 on a usage error.
"""

from __future__ import annotations

import importlib
import importlib.util
from pathlib import Path

import click

from gitopsq.errors import EXIT_OK, EXIT_REJECTED, UsageError
from gitopsq.simulate.engine import failed_expectations, simulate
from gitopsq.simulate.result import Result, to_json
from gitopsq.simulate.scenario import parse_scenario


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
    """The full text report when gitopsq.simulate.report exists, else a compact summary."""
    if importlib.util.find_spec("gitopsq.simulate.report") is not None:
        report = importlib.import_module("gitopsq.simulate.report")
        text: str = report.render_text(result)
        return text
    return _compact_text(result)


@click.command(name="simulate")
@click.argument("scenario", type=click.Path(path_type=Path))
@click.option("--output", "-o", type=click.Choice(["text", "json"]), default="text", show_default=True,
              help="json: the stable, documented result object.")
@click.pass_context
def command(ctx: click.Context, scenario: Path, output: str) -> None:
    """Replay SCENARIO.yaml on the admission core."""
    if not scenario.is_file():
        raise UsageError(f"{scenario}: no such scenario file")
    parsed = parse_scenario(scenario.read_text(encoding="utf-8"), str(scenario))
    result = simulate(parsed)
    click.echo(to_json(result) if output == "json" else render_text(result))
    failures = failed_expectations(parsed, result)
    for failure in failures:
        click.echo(f"expectation failed: {failure}", err=True)
    ctx.exit(EXIT_REJECTED if failures else EXIT_OK)
