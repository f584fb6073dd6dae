"""`gitopsq plan --post`: put the plan's markdown on its pull request, replacing gitopsq's earlier comment.

The comment is found again by the marker the markdown renderer writes on its first line, so a re-run (a new push
to the PR) edits one comment in place instead of stacking new ones.
"""

from __future__ import annotations

from dataclasses import dataclass

from gitopsq.errors import UsageError
from gitopsq.forge import open_forge
from gitopsq.forge.http import load_token
from gitopsq.forge.model import Comment
from gitopsq.plan.render_markdown import MARKER

TOKEN_ENV = "GITOPSQ_FORGE_TOKEN"


@dataclass(frozen=True, slots=True)
class PostTarget:
    """Where `--post` writes: the forge kind and URL, the repository slug and the pull request's number."""

    forge: str
    url: str | None
    slug: str
    pr: int
    token_file: str | None


def post_plan(markdown: str, target: PostTarget, *, timeout: float = 15.0) -> Comment:
    """Create or update the plan comment on ``target``'s pull request (ForgeError when the forge refuses)."""
    if MARKER not in markdown:
        raise UsageError(f"the plan's markdown lacks the marker {MARKER}; cannot find the comment to update")
    if target.pr <= 0:
        raise UsageError(f"--pr must be a pull request number, not {target.pr}")
    forge = open_forge(target.forge, target.url, target.slug, load_token(target.token_file, TOKEN_ENV),
                       timeout=timeout)
    return forge.upsert_comment(target.pr, MARKER, markdown)
