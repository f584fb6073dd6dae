"""`gitopsq apply REPO`: one sync of a revision to the cluster of the current kubeconfig (docs/sync.md)."""

from __future__ import annotations

import json
from typing import Any

import click

from gitopsq.commands.repo import locate
from gitopsq.errors import UsageError


@click.command(name="apply")
@click.argument("repo")
@click.option("--rev", default="HEAD", show_default=True, help="Branch, tag or commit to apply.")
@click.option("--dry-run", is_flag=True, help="Server-side dry run: validate and plan against the live cluster, "
                                              "write nothing.")
@click.option("--prune", is_flag=True, help="Delete objects gitopsq applied earlier that this revision no longer has.")
@click.option("--allow-empty", is_flag=True, help="With --prune, allow a revision with no objects to prune all.")
@click.option("--kubeconfig", type=click.Path(dir_okay=False), default=None, help="Kubeconfig file to use.")
@click.option("--context", default=None, help="Kubeconfig context to use.")
@click.option("--name", "source_name", default=None, help="GitSource that records status and inventory "
                                                          "[default: from REPO's name].")
@click.option("--namespace", default="gitopsq-system", show_default=True, help="Namespace of the GitSource.")
@click.option("--output", "-o", type=click.Choice(["text", "json"]), default="text", show_default=True)
@click.option("--retry-timeout", default="60s", show_default=True,
              help="How long to keep retrying while the API server is unavailable (429, 5xx, unreachable).")
@click.option("--wait-health", is_flag=True, help="After applying, wait for the applied ClusterQueues and "
                                                  "LocalQueues to be Active (Kueue or gitopsq's admission loop "
                                                  "must be running); unhealthy exits 3.")
@click.option("--health-timeout", default="2m", show_default=True, help="How long --wait-health waits.")
@click.pass_context
def command(ctx: click.Context, *, repo: str, rev: str, dry_run: bool, prune: bool, allow_empty: bool,
            kubeconfig: str | None, context: str | None, source_name: str | None, namespace: str,
            output: str, retry_timeout: str, wait_health: bool, health_timeout: str) -> None:
    """Validate REPO at REV like `gitopsq check`, server-side dry-run every object, then apply them all
    (field manager `gitopsq`): all or nothing.

    Exit 0 applied (or nothing to do), 1 nothing applied: the revision was rejected, refused by the API
    server's dry run, or its GitSource is suspended (the previous revision stays), 3 API or Git failure (a
    failed apply is rolled back to the previous revision) or, with --wait-health, queues not healthy.
    """
    # Imported on use for CLI start-up time: the Kubernetes client and sync stack (~500 ms) wait for a real apply.
    from gitopsq.cluster.apply import Backoff, KubeRest
    from gitopsq.cluster.kube import load_api_client
    from gitopsq.cluster.status import SourceRef
    from gitopsq.controller.manager import parse_duration
    from gitopsq.progress import for_stderr
    from gitopsq.source import open_any
    from gitopsq.sync.labels import default_source_name
    from gitopsq.sync.syncer import Syncer
    from gitopsq.sync.values import SyncOptions

    if allow_empty and not prune:
        raise UsageError("--allow-empty only makes sense with --prune")
    try:
        backoff = Backoff(deadline=parse_duration(retry_timeout))
        health = parse_duration(health_timeout) if wait_health else None
    except ValueError as err:
        raise UsageError(str(err)) from err

    source = open_any(locate(repo))  # from a subdirectory: its repository's root, as git does
    ref = SourceRef(namespace, source_name or default_source_name(repo))
    with load_api_client(kubeconfig, context) as api_client:
        syncer = Syncer(source, KubeRest(api_client, backoff=backoff), ref, url=source.display)
        syncer.progress = for_stderr()  # a progress line on a terminal; silent in CI and when piped
        result = syncer.sync(SyncOptions(rev=rev, prune=prune, dry_run=dry_run, allow_empty=allow_empty,
                                         health_timeout=health))
    report = result.to_json()
    if output == "json":
        click.echo(json.dumps(report, indent=2, sort_keys=True))
    else:
        click.echo(render_text(report))
    ctx.exit(result.exit_code)


def render_text(report: dict[str, Any]) -> str:
    """The human form of a sync report."""
    dry = " (server dry run)" if report.get("dryRun") else ""
    lines = [f"revision {report.get('revision') or '?'}: {report['outcome']}{dry}"]
    for finding in report.get("findings") or []:
        where = ":".join(str(x) for x in (finding.get("path"), finding.get("line")) if x)
        lines.append(f"  {finding.get('severity', 'error')}: {where + ': ' if where else ''}{finding.get('message')}")
    for item in report.get("applied") or []:
        verb = {"create": "created", "changed": "configured", "drift": "drift corrected", "adopt": "adopted"}
        state = verb.get(item["reason"], item["reason"]) if item["done"] else f"NOT applied ({item['reason']})"
        lines.append(f"  {item['object']} {state}")
        lines.extend(f"      {c['path']}: {_short(c.get('old'))} → {_short(c.get('new'))}"
                     for c in item["changes"][:20])
        if item.get("droppedMarkers"):
            lines.append(f"      dropped from Git's copy: {', '.join(item['droppedMarkers'])}")
    for item in report.get("pruned") or []:
        lines.append(f"  {item['object']} {'pruned' if item['done'] else 'NOT pruned'}")
    for item in report.get("conflicts") or []:
        lines.append(f"  {item['object']} left alone: {item['manager']}")
    for item in report.get("failed") or []:
        lines.append(f"  {item['object']} {item['operation']} failed: {item['reason']}")
    for item in report.get("refused") or []:
        where = f" ({item['path']}:{item['line']})" if item.get("path") else ""
        lines.append(f"  {item['object']}{where} refused by the API server: {item['reason']}")
    if report.get("refused"):
        lines.append("  nothing applied: every object is dry-run first, and one refusal refuses the revision")
    if "rollback" in report:
        back = report["rollback"]
        lines.append(f"  rolled back to revision {report.get('rolledBackTo') or 'none'}: "
                     f"{len(back['applied'])} re-applied, {len(back['pruned'])} deleted"
                     + (f", {len(back['failed'])} could not be put back" if back["failed"] else ""))
    if "health" in report:
        bad = [h for h in report["health"] if h["status"] != "Healthy"]
        lines.append(f"  health: {len(report['health']) - len(bad)} of {len(report['health'])} queues healthy")
        lines.extend(f"  {h['object']} {h['status']}: {h['reason']} ({h['message']})" for h in bad)
    if report.get("pendingPrune"):
        lines.append(f"  no longer in Git, not pruned (use --prune): {', '.join(report['pendingPrune'])}")
    if report.get("emptyGuard"):
        lines.append("  the revision has no objects: nothing pruned (use --allow-empty)")
    if report.get("error"):
        lines.append(f"  error: {report['error']}")
    if "unchanged" in report:
        done = sum(1 for a in report.get("applied") or [] if a["done"])
        pruned = sum(1 for p in report.get("pruned") or [] if p["done"])
        lines.append(f"{done} applied, {pruned} pruned, {report['unchanged']} unchanged, "
                     f"{len(report.get('conflicts') or [])} conflicts, {len(report.get('failed') or [])} failed")
    return "\n".join(lines)


def _short(value: Any) -> str:
    text = "-" if value is None else json.dumps(value, sort_keys=True) if not isinstance(value, str) else value
    return text if len(text) <= 80 else text[:77] + "..."
