"""Forge options of `gitopsq check` and `gitopsq plan` for a pull request under review (docs/check.md "Pull
requests reviewed in the forge"): read the PR's approving reviews so a team member's change passes once a
maintainer of each touched team (not its author) approved it at the head commit.

Without these options nothing is read and the commands judge the commits alone, as before.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import click

from gitopsq.errors import UsageError

TOKEN_ENV = "GITOPSQ_FORGE_TOKEN"
TIMEOUT = 15.0  # seconds per forge call; retries come on top (docs/source.md "Forges")


@dataclass(frozen=True, slots=True)
class ReviewTarget:
    """The pull request whose reviews count: forge kind, API URL, repository slug, number, token file."""

    forge: str
    url: str | None
    slug: str
    pr: int
    token_file: str | None


def review_target(*, forge: str | None, url: str | None, slug: str | None, pr: int | None,
                  token_file: str | None) -> ReviewTarget | None:
    """The PR to read reviews of, or None without forge options; UsageError naming what is missing."""
    if forge is None and slug is None and pr is None:
        if url or token_file:
            raise UsageError("--forge-url and --forge-token-file need --forge, --forge-repo and --pr")
        return None
    missing = [flag for flag, value in (("--forge", forge), ("--forge-repo", slug), ("--pr", pr)) if value is None]
    if missing:
        raise UsageError(f"reading the pull request's reviews needs {', '.join(missing)}")
    if pr is None or pr <= 0:
        raise UsageError(f"--pr must be a pull request number, not {pr}")
    return ReviewTarget(str(forge), url, str(slug), pr, token_file)


def read_reviews(target: ReviewTarget, head: str) -> list[dict[str, Any]]:
    """The PR's standing approvals given at ``head``, as policies read them; each approval that does not count
    (an older head, or no commit named) is said on stderr. ForgeError (exit 3) when the forge refuses."""
    # Imported on use for CLI start-up time.
    from gitopsq.forge import open_forge
    from gitopsq.forge.http import load_token
    from gitopsq.forge.reviews import approvals_at_head

    client = open_forge(target.forge, target.url, target.slug, load_token(target.token_file, TOKEN_ENV),
                        timeout=TIMEOUT)
    counted, stale = approvals_at_head(client, target.pr, head)
    for given in stale:
        approved = given.commit[:12] if given.commit else "a commit the forge does not name"
        click.echo(f"gitopsq: the approval by {given.reviewer} of {target.slug}#{target.pr} was given on "
                   f"{approved}, not on the head {head[:12]}: it does not count", err=True)
    return counted


def review_options(function: Any) -> Any:
    """--forge, --forge-url, --forge-repo, --forge-token-file and --pr, as `gitopsq check` takes them."""
    options = [
        click.option("--forge", type=click.Choice(["gitea", "github", "gitlab"]),
                     help="Read the pull request's approving reviews from this forge."),
        click.option("--forge-url", metavar="URL", help="The forge's API base URL (default: GitHub's or GitLab's "
                     "SaaS)."),
        click.option("--forge-repo", metavar="OWNER/NAME", help="The repository on the forge (GitLab: the "
                     "project path)."),
        click.option("--forge-token-file", metavar="FILE", help="File holding the forge token (else "
                     "$GITOPSQ_FORGE_TOKEN)."),
        click.option("--pr", type=int, metavar="N", help="The pull (merge) request whose reviews count."),
    ]
    for option in reversed(options):
        function = option(function)
    return function
