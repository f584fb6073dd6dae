"""`gitopsq render REPO [--rev REV]`: validated, normalised v1beta2 manifests on stdout (docs/check.md).

Made for Argo CD config-management plugins and `kubectl apply -f -`: stdout carries only YAML; findings go to
stderr. An invalid revision prints nothing on stdout and exits 1.
"""

from __future__ import annotations

import click

from gitopsq.commands.check import format_text, load_report
from gitopsq.errors import EXIT_OK, EXIT_REJECTED
from gitopsq.manifests import render_documents


@click.command(name="render")
@click.argument("repo")
@click.option("--rev", default="HEAD", show_default=True, help="Branch, tag or commit to render.")
@click.option("--worktree", is_flag=True, help="Render the files on disk in REPO (a directory), not a commit.")
@click.option("--no-cache", is_flag=True, help="Parse every file again instead of reusing earlier results.")
@click.pass_context
def command(ctx: click.Context, *, repo: str, rev: str, worktree: bool, no_cache: bool) -> None:
    """Print REPO at REV as normalised kueue.x-k8s.io/v1beta2 manifests, in apply order.

    Warnings go to stderr and do not stop rendering; any error prints the findings on stderr and exits 1.
    """
    report, display = load_report(repo, rev, worktree=worktree, use_cache=not no_cache)
    if not report.ok:
        click.echo(format_text(report, display), err=True)
        ctx.exit(EXIT_REJECTED)
    for warning in report.warnings:
        click.echo(str(warning), err=True)
    click.echo(render_documents(report), nl=False)
    ctx.exit(EXIT_OK)
