"""The `gitopsq` command line.

Exit codes (shared/interfaces.md): 0 ok, 1 rejected (invalid input or policy deny), 2 usage error,
3 runtime failure (unreachable remote or API). Every verb lives in ``gitopsq.commands.<module>`` and is loaded
lazily; a `GitopsqError` escaping a verb is printed as one line and mapped to its exit code, never a traceback.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from typing import Any

import click

from gitopsq import logs
from gitopsq.commands.groups import SuggestingGroup
from gitopsq.errors import EXIT_RUNTIME, EXIT_USAGE, GitopsqError

# verb -> (module under gitopsq.commands, one-line help). Order is the order `--help` shows.
VERBS: dict[str, tuple[str, str]] = {
    "check": ("check", "Validate a revision: schema, references, signatures and CEL policies."),
    "plan": ("plan", "Show what merging a head revision would change, and its impact."),
    "render": ("render", "Print validated, normalised manifests (for Argo CD plugins and kubectl)."),
    "apply": ("apply", "Sync one revision to the cluster of the current kubeconfig."),
    "controller": ("controller", "Run the long-lived controller: sync, admission, audit, metrics."),
    "status": ("status", "The fleet view: each cluster's applied revision, drift and pending workloads."),
    "simulate": ("simulate", "Replay a scenario on the admission core."),
    "policy": ("policy", "Policy tools (`policy test`)."),
    "audit": ("audit", "Audit trail tools (`audit verify`, `audit export`)."),
    "approvals": ("approvals", "Approvals of merged pull requests as signed git notes (`record`, `show`)."),
    "demo": ("demo", "The no-cluster tour on the embedded repository template."),
    "init": ("init", "Write the repository template as a new Git repository, ready to push."),
    "install-crds": ("install_crds", "Install gitopsq's Kueue-compatible CRDs into the cluster."),
}


class LazyGroup(SuggestingGroup):
    """A click group whose sub-commands are imported on first use; a mistyped one gets a suggestion."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return [verb for verb, (module, _) in VERBS.items() if _module_exists(module)]

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        entry = VERBS.get(cmd_name)
        if entry is None or not _module_exists(entry[0]):
            return None
        module = importlib.import_module(f"gitopsq.commands.{entry[0]}")
        command: click.Command = module.command
        return command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = [(verb, VERBS[verb][1]) for verb in self.list_commands(ctx)]
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


def _module_exists(module: str) -> bool:
    return importlib.util.find_spec(f"gitopsq.commands.{module}") is not None


def _print_version(ctx: click.Context, param: click.Parameter, value: bool) -> None:
    if not value or ctx.resilient_parsing:
        return
    from gitopsq.version import version_line  # reads the build record or the checkout: only when asked

    click.echo(version_line())
    ctx.exit()


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--version", is_flag=True, expose_value=False, is_eager=True, callback=_print_version,
              help="Show the version and the commit it was built from, and exit.")
def cli() -> None:
    """gitopsq: GitOps for Kueue-style batch queues."""


def main(argv: list[str] | None = None) -> None:
    """Entry point of the console script; never lets a traceback reach the user for expected errors."""
    logs.configure(json=False, level="warning")
    try:
        rv: Any = cli.main(args=argv, prog_name="gitopsq", standalone_mode=False)
    except GitopsqError as err:
        click.echo(f"gitopsq: {err}", err=True)
        sys.exit(err.exit_code)
    except click.exceptions.Abort:
        click.echo("gitopsq: aborted", err=True)
        sys.exit(EXIT_RUNTIME)
    except click.UsageError as err:
        err.show()
        sys.exit(EXIT_USAGE)
    except click.exceptions.Exit as err:
        sys.exit(err.exit_code)
    except click.ClickException as err:
        err.show()
        sys.exit(err.exit_code)
    sys.exit(rv if isinstance(rv, int) else 0)
