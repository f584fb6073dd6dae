"""`gitopsq plan --post`: put the plan's markdown on its pull request, replacing gitopsq's earlier comment.

The comment is found again by the marker the markdown renderer writes on its first line, so a re-run (a new push
to the PR) edits one comment in place instead of stacking new ones.
"""

from __future__ import annotations

from dataclasses import dataclass

from gitopsq.errors import UsageError
from gitopsq.forge import open_forge
from gitopsq.forge.http import load_token
from gitopsq.forge.port import Comment, Forge
from gitopsq.plan.render_markdown import MARKER

TOKEN_ENV = "GITOPSQ_FORGE_TOKEN"
TIMEOUT = 15.0  # seconds per forge call; retries come on top (docs/source.md "Forges")


@dataclass(frozen=True, slots=True)
class PostTarget:
    """Where `--post` writes: a client for the forge's repository and the pull request's number."""

    client: Forge
    slug: str
    pr: int


def post_target(post: bool, *, forge: str | None, url: str | None, slug: str | None, pr: int | None,
                token_file: str | None) -> PostTarget | None:
    """The --post destination from the command line (None without --post), checked and with its token read
    before any plan is computed; UsageError naming what is missing or wrong."""
    if not post:  # the forge options alone read the pull request's reviews (gitopsq.commands.review)
        return None
    missing = [flag for flag, value in (("--forge", forge), ("--repo-slug", slug), ("--pr", pr)) if value is None]
    if missing:
        raise UsageError(f"--post needs {', '.join(missing)}")
    if pr is None or pr <= 0:
        raise UsageError(f"--pr must be a pull request number, not {pr}")
    client = open_forge(str(forge), url, str(slug), load_token(token_file, TOKEN_ENV), timeout=TIMEOUT)
    return PostTarget(client=client, slug=str(slug), pr=pr)


def post_plan(markdown: str, target: PostTarget) -> Comment:
    """Create or update the plan comment on ``target``'s pull request (ForgeError when the forge refuses)."""
    if MARKER not in markdown:
        raise UsageError(f"the plan's markdown lacks the marker {MARKER}; cannot find the comment to update")
    return target.client.upsert_comment(target.pr, MARKER, markdown)
