"""`gitopsq render REPO [--rev REV] [--output yaml|json]`: validated, normalised v1beta2 manifests on stdout
(docs/check.md).

Made for Argo CD config-management plugins and `kubectl apply -f -`: stdout carries only YAML; findings go to
stderr. An invalid revision prints nothing on stdout and exits 1. ``--output json`` prints one stable JSON
document instead (version, repository, revision, ok, findings, items), also when the revision is invalid.
"""

from __future__ import annotations

import json
from typing import Any

import click

from gitopsq.commands.check import format_text, load_report
from gitopsq.errors import EXIT_OK, EXIT_REJECTED
from gitopsq.manifests import Report, render_documents
from gitopsq.manifests.check_report import finding_json
from gitopsq.manifests.render import render_order

RENDER_JSON_VERSION = 1


def render_json(report: Report, display: str) -> dict[str, Any]:
    """The stable JSON form of `render` (docs/check.md): the documents in apply order under ``items``."""
    return {"version": RENDER_JSON_VERSION, "repository": display, "revision": report.revision, "ok": report.ok,
            "findings": [finding_json(f) for f in report.findings],
            "items": render_order(report) if report.ok else []}


@click.command(name="render")
@click.argument("repo")
@click.option("--rev", default="HEAD", show_default=True, help="Branch, tag or commit to render.")
@click.option("--worktree", is_flag=True, help="Render the files on disk in REPO (a directory), not a commit.")
@click.option("--no-cache", is_flag=True, help="Parse every file again instead of reusing earlier results.")
@click.option("--output", "-o", type=click.Choice(["yaml", "json"]), default="yaml", show_default=True,
              help="json: one document with the manifests under items and the findings.")
@click.option("--cluster", metavar="NAME", help="The cluster of gitopsq.yaml to render (required when it declares "
              "clusters: docs/fleet.md).")
@click.pass_context
def command(ctx: click.Context, *, repo: str, rev: str, worktree: bool, no_cache: bool, output: str,
            cluster: str | None) -> None:
    """Print REPO at REV as normalised kueue.x-k8s.io/v1beta2 manifests, in apply order.

    Warnings go to stderr and do not stop rendering; any error prints the findings on stderr and exits 1.
    With --output json everything, findings included, is in the one JSON document on stdout. A repository
    declaring clusters renders one cluster's revision: --cluster NAME (exit 2 listing the names without it).
    """
    report, display = load_report(repo, rev, worktree=worktree, use_cache=not no_cache, cluster=cluster)
    if output == "json":
        doc = render_json(report, display)
        if report.config is not None and report.config.cluster:
            doc["cluster"] = report.config.cluster
        click.echo(json.dumps(doc, indent=2, ensure_ascii=False))
        ctx.exit(EXIT_OK if report.ok else EXIT_REJECTED)
    if not report.ok:
        click.echo(format_text(report, display, cluster or ""), err=True)
        ctx.exit(EXIT_REJECTED)
    for warning in report.warnings:
        click.echo(str(warning), err=True)
    click.echo(render_documents(report), nl=False)
    ctx.exit(EXIT_OK)
