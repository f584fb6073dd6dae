"""`gitopsq status`: the fleet view across clusters (docs/fleet.md "Fleet status"): per cluster, the revision each
GitSource has applied, drift from it, and pending workloads per queue. An unreachable cluster is reported, not
fatal. Exit 0 all reached, Ready and without drift; 1 some source not Ready or drifted; 3 some cluster not reached.
The reading lives in gitopsq.controller.fleet, the showing in gitopsq.controller.fleet_view."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click


@click.command(name="status")
@click.option("--kubeconfig", "kubeconfigs", multiple=True, type=click.Path(dir_okay=False),
              help="A cluster's kubeconfig (repeatable: one per cluster) [default: $KUBECONFIG, ~/.kube/config].")
@click.option("--context", "contexts", multiple=True,
              help="A kubeconfig context (repeatable); each is read from every --kubeconfig [default: current].")
@click.option("--repo", default=None, help="Repository to read applied revisions from for drift [default: each "
                                           "GitSource's spec.url].")
@click.option("--no-drift", is_flag=True, help="Do not compare live objects with the applied revision.")
@click.option("--cache-dir", type=click.Path(file_okay=False), default=None, help="Where remote mirrors live.")
@click.option("--output", "-o", type=click.Choice(["text", "json"]), default="text", show_default=True)
def command(kubeconfigs: tuple[str, ...], contexts: tuple[str, ...], repo: str | None, *, no_drift: bool,
            cache_dir: str | None, output: str) -> None:
    """Show every cluster's applied revision, drift and pending workloads; exit 0 all in sync, 1 some not
    Ready or drifted, 3 some cluster unreachable."""
    from gitopsq.controller.fleet import read_cluster, targets
    from gitopsq.controller.fleet_view import exit_code, to_json, to_text
    from gitopsq.source import open_source

    opened: dict[str, Any] = {}

    def source(url: str) -> Any:  # one mirror per repository, shared by the clusters that follow it
        if url not in opened:
            opened[url] = open_source(url, cache_dir=Path(cache_dir) if cache_dir else None)
        return opened[url]

    views = [read_cluster(t, repo=repo, open_source=source, drift=not no_drift)
             for t in targets(kubeconfigs, contexts)]
    if output == "json":
        click.echo(json.dumps(to_json(views), indent=2))
    else:
        click.echo(to_text(views))
    sys.exit(exit_code(views))
