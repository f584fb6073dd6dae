"""`gitopsq install-crds`: install gitopsq's Kueue-compatible CRDs, leaving an existing Kueue's CRDs alone."""

from __future__ import annotations

import click

from gitopsq.errors import EXIT_OK, EXIT_RUNTIME


@click.command(name="install-crds")
@click.option("--kubeconfig", type=click.Path(dir_okay=False), default=None, help="Kubeconfig file to use.")
@click.option("--context", default=None, help="Kubeconfig context to use.")
@click.option("--dry-run", is_flag=True, help="Ask the API server what would change (server-side dry run).")
@click.pass_context
def command(ctx: click.Context, kubeconfig: str | None, context: str | None, dry_run: bool) -> None:
    """Install gitopsq's Kueue-compatible CRDs (server-side apply, field manager `gitopsq`).

    A CRD that already exists and is not managed by gitopsq (for example one installed with Kueue) is kept
    as it is, and gitopsq uses it.
    """
    # Imported on use for CLI start-up time: the Kubernetes client waits for a real install.
    from gitopsq.cluster.crds import CrdAction, install_crds
    from gitopsq.cluster.kube import load_api_client

    with load_api_client(kubeconfig, context) as api_client:
        report = install_crds(api_client, dry_run=dry_run)
    suffix = " (server dry run)" if dry_run else ""
    unusable = []
    for outcome in report.outcomes:
        if outcome.action is CrdAction.FOREIGN_KEPT:
            click.echo(f"customresourcedefinition/{outcome.name} kept: not managed by gitopsq, {outcome.note}")
            if not outcome.usable:
                unusable.append(outcome.name)
        else:
            click.echo(f"customresourcedefinition/{outcome.name} {outcome.action.value}{suffix}")
    if unusable:
        click.echo(f"gitopsq: existing CRDs do not serve v1beta2: {', '.join(unusable)}", err=True)
        ctx.exit(EXIT_RUNTIME)
    ctx.exit(EXIT_OK)
