"""``gitopsq init DIR [--fleet]``: the repository template written as a new Git repository (docs/install.md).

DIR must be new or empty. The repository gets one commit on ``main`` and no remote, so it is ready to push. The
commit names no one from the machine's git configuration, which a new machine lacks: gitopsq commits it, and its
author is the platform maintainer the template's gitopsq.yaml names first (or ``--author-name/--author-email``),
because the built-in policies judge every file of the first revision by its author and accept a platform
maintainer's. The single-cluster layout is written by default; ``--fleet`` writes the two-cluster layout instead
(docs/fleet.md), which the template keeps as a repository of its own, as ``gitopsq demo`` does.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import click

from gitopsq.errors import UsageError

COMMITTER = ("gitopsq init", "init@gitopsq.invalid")
FLEET_DIR = "fleet"


def _target(directory: Path) -> Path:
    target = directory.expanduser().resolve()
    if target.exists() and not target.is_dir():
        raise UsageError(f"{target} exists and is not a directory; pick a new DIR")
    if target.is_dir() and any(target.iterdir()):
        raise UsageError(f"{target} is not empty; gitopsq init writes a new repository into a new or empty DIR")
    return target


def platform_maintainer(template: Path) -> tuple[str, str] | None:
    """The first maintainer with an email of the platform team the template's gitopsq.yaml names."""
    from gitopsq.manifests.config import CONFIG_PATH, parse_config

    config = parse_config((template / CONFIG_PATH).read_bytes()).config
    if config is None:
        return None
    team = next((t for t in config.teams if t.name == config.platform_team), None)
    found = next((m for m in team.maintainers if m.email), None) if team is not None else None
    return (found.name, found.email) if found is not None else None


def next_steps(target: Path, commit: str, author: tuple[str, str], fleet: bool) -> str:
    layout = "two-cluster fleet layout (docs/fleet.md)" if fleet else "single-cluster layout"
    needs = "   (builds the overlays: needs kustomize, docs/kustomize.md)" if fleet else ""
    return "\n".join([
        f"gitopsq init: {target} is a new Git repository from the repository template's {layout}:",
        f"one commit {commit[:12]} on main by {author[0]} <{author[1]}>, no remote yet.",
        "",
        "Next:",
        f"  1. Make it yours: teams, maintainers and their keys, capacity in {target / 'gitopsq.yaml'};",
        "     flavors for your node pools. Check and commit:",
        f"       gitopsq check {target}{needs}",
        "  2. Add a remote and push:",
        f"       git -C {target} remote add origin <URL>",
        f"       git -C {target} push -u origin main",
        "  3. Point the controller at it (docs/controller.md):",
        "       gitopsq controller --repo <URL> --branch main",
    ])


@click.command(name="init")
@click.argument("directory", type=click.Path(path_type=Path))
@click.option("--fleet", is_flag=True,
              help="Write the two-cluster fleet layout (a kustomize base and an overlay per cluster) instead.")
@click.option("--author-name", help="Author of the first commit [default: the template's first platform "
                                    "maintainer; gitopsq check accepts only a platform maintainer gitopsq.yaml names].")
@click.option("--author-email", help="The author's email [default: as --author-name].")
@click.option("--template", type=click.Path(exists=True, file_okay=False, path_type=Path),
              help="Repository template to start from (default: the one gitopsq carries).")
def command(directory: Path, fleet: bool, author_name: str | None, author_email: str | None,
            template: Path | None) -> None:
    """Write the repository template as a new Git repository in DIR (new or empty), ready to push."""
    # Imported on use for CLI start-up time: gitopsq.demo loads pygit2.
    from gitopsq.demo import find_template, make_repository

    target = _target(directory)
    source = find_template(template)
    if fleet:
        source = source / FLEET_DIR
        if not (source / "gitopsq.yaml").is_file():
            raise UsageError(f"the template has no fleet layout ({source / 'gitopsq.yaml'} is missing)")
    default = platform_maintainer(source) or COMMITTER
    given = (author_name, author_email)
    author = (given[0] if given[0] is not None else default[0]).strip(), (
        given[1] if given[1] is not None else default[1]).strip()
    if not all(author):
        raise UsageError("--author-name and --author-email must not be empty")
    if target.is_dir():
        target.rmdir()  # empty (checked above); the copy creates it again
    commit = make_repository(source, target, datetime.now(UTC), author, COMMITTER)
    click.echo(next_steps(target, commit, author, fleet))
