"""`gitopsq approvals record|show`: approvals of a merged pull request kept in the repository as a signed git note
(docs/audit.md "Approvals recorded in the repository"; the format is gitopsq.forge.notes).

``record`` runs in the merge workflow: it asks the forge which pull request the merged commit closed and who
approved it, signs that with the recorder's SSH key and pushes the note. ``show`` prints what a note on a commit
is worth against the trusted gitopsq.yaml (its first parent's), as the controller judges it.
"""

from __future__ import annotations

import json
import os
import subprocess
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import click

from gitopsq.commands.groups import group
from gitopsq.commands.repo import locate
from gitopsq.commands.review import TOKEN_ENV
from gitopsq.errors import EXIT_OK, EXIT_REJECTED, RuntimeFailure, UsageError

PUSH_ATTEMPTS = 3  # another merge's recorder may push the notes ref meanwhile: fetch, re-add, push again
FALLBACK_NAME = "gitopsq"  # the notes commit's identity when no flag names one and no recorder lists the key
IDENTITY_EMAIL = "gitopsq@localhost"  # as the audit writer's commits: an address that reaches nobody


@group(name="approvals")
def command() -> None:
    """Approvals of merged pull requests recorded in the repository (signed git notes)."""


@command.command(name="record")
@click.argument("repo")
@click.option("--rev", default="HEAD", show_default=True, help="The merge or squash commit the forge made.")
@click.option("--forge", type=click.Choice(["gitea", "github", "gitlab"]), required=True)
@click.option("--forge-url", metavar="URL", help="The forge's API base URL (default: GitHub's or GitLab's SaaS).")
@click.option("--forge-repo", metavar="OWNER/NAME", required=True, help="The repository on the forge.")
@click.option("--forge-token-file", metavar="FILE", help=f"File holding the forge token (else ${TOKEN_ENV}).")
@click.option("--pr", type=int, metavar="N", help="The pull request (default: the one the forge says REV merged).")
@click.option("--key-file", required=True, type=click.Path(exists=True, dir_okay=False),
              help="The recorder's private SSH key (its public key is listed under approvalRecorders).")
@click.option("--push", "remote", default="origin", show_default=True, metavar="REMOTE",
              help="Remote (name or URL) to push the notes ref to.")
@click.option("--no-push", is_flag=True, help="Only write the note locally.")
@click.option("--committer-name", metavar="NAME",
              help="Name on the notes commit (default: the approvalRecorders entry listing the key, else gitopsq).")
@click.option("--committer-email", metavar="EMAIL", default=IDENTITY_EMAIL, show_default=True,
              help="Email on the notes commit.")
def record(*, repo: str, rev: str, forge: str, forge_url: str | None, forge_repo: str, forge_token_file: str | None,
           pr: int | None, key_file: str, remote: str, no_push: bool, committer_name: str | None,
           committer_email: str) -> None:
    """Record the approvals of the pull request REV merged as a signed note on REV, and push it."""
    from gitopsq.forge import open_forge
    from gitopsq.forge.http import load_token
    from gitopsq.forge.notes import NOTES_REF, check_key, payload_line, sign

    public_key = check_key(key_file)
    root = Path(locate(repo))
    sha = _git(root, "rev-parse", "--verify", f"{rev}^{{commit}}").strip()
    identity = _identity(committer_name or _recorder_name(root, sha, public_key) or FALLBACK_NAME, committer_email)
    client = open_forge(forge, forge_url, forge_repo, load_token(forge_token_file, TOKEN_ENV))
    number = pr if pr is not None else client.pull_request_of(sha)
    if number is None:
        raise UsageError(f"{forge_repo}: commit {sha[:12]} is not the merge of a pull request the forge knows "
                         "(give --pr N)")
    approvals = [{"login": a.reviewer, "email": a.email or "", "approvedCommit": a.commit, "at": a.at}
                 for a in client.approvals(number)]
    line = payload_line(commit=sha, forge=forge, repository=forge_repo, pull_request=number,
                        recorded_at=datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"), approvals=approvals)
    text = sign(line, key_file)
    for attempt in range(1, PUSH_ATTEMPTS + 1):
        if not no_push:  # take the remote's notes first, so this note adds to them
            _git(root, "fetch", "-q", remote, f"+{NOTES_REF}:{NOTES_REF}", check=False)
        _git(root, "notes", "--ref", NOTES_REF, "add", "-f", "-F", "-", sha, stdin=text, env=identity)
        if no_push:
            break
        pushed = _run(root, "push", "-q", remote, f"{NOTES_REF}:{NOTES_REF}")
        if pushed.returncode == 0:
            break
        if attempt == PUSH_ATTEMPTS:
            raise RuntimeFailure(f"cannot push {NOTES_REF} to {remote}: {pushed.stderr.strip()}")
    who = ", ".join(str(a["login"]) for a in approvals) or "nobody"
    click.echo(f"gitopsq: recorded {forge_repo}#{number} approved by {who} on {sha[:12]} ({NOTES_REF}"
               f"{'' if no_push else ', pushed to ' + remote})", err=True)


@command.command(name="show")
@click.argument("repo")
@click.option("--rev", default="HEAD", show_default=True, help="The commit whose note to judge.")
@click.option("--output", "-o", type=click.Choice(["text", "json"]), default="text", show_default=True)
@click.pass_context
def show(ctx: click.Context, *, repo: str, rev: str, output: str) -> None:
    """Judge the approvals note on REV as the controller does; exit 1 unless it verifies."""
    from gitopsq.forge.note_source import NoteApprovals
    from gitopsq.source import open_any

    source = open_any(locate(repo))
    sha = source.resolve(rev)
    verdict = NoteApprovals(source).verdict(sha)
    data: dict[str, Any] = {"commit": sha, "state": verdict.state, "reason": verdict.reason,
                            "recorder": verdict.recorder, "note": dict(verdict.payload or {})}
    if output == "json":
        click.echo(json.dumps(data, indent=2))
    elif verdict.verified and verdict.payload is not None:
        who = ", ".join(str(a.get("login")) for a in verdict.payload["approvals"] if isinstance(a, dict)) or "nobody"
        click.echo(f"{sha[:12]}: verified (recorder {verdict.recorder}): {verdict.payload.get('repository')}"
                   f"#{verdict.payload.get('pullRequest')} approved by {who}")
    else:
        click.echo(f"{sha[:12]}: {verdict.state}: {verdict.reason}")
    ctx.exit(EXIT_OK if verdict.verified else EXIT_REJECTED)


def _recorder_name(root: Path, sha: str, public_key: str) -> str | None:
    """The approvalRecorders entry of the trusted gitopsq.yaml (``sha``'s first parent's) that lists the key."""
    from gitopsq.forge.note_source import trusted_recorders
    from gitopsq.source import open_any

    wanted = public_key.split()[:2]
    for name, keys in trusted_recorders(open_any(str(root)), sha).items():
        if any(key.split()[:2] == wanted for key in keys):
            return name
    return None


def _identity(name: str, email: str) -> dict[str, str]:
    """Who writes the notes commit, set in the environment so that no git configuration (the machine's global
    one included, which a CI runner seldom has) is needed or consulted."""
    return {**os.environ, "GIT_AUTHOR_NAME": name, "GIT_AUTHOR_EMAIL": email, "GIT_COMMITTER_NAME": name,
            "GIT_COMMITTER_EMAIL": email}


def _run(root: Path, *args: str, stdin: str | None = None,
         env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", *args], cwd=root, input=stdin, capture_output=True, text=True, timeout=120,
                          check=False, env=env)


def _git(root: Path, *args: str, stdin: str | None = None, check: bool = True,
         env: dict[str, str] | None = None) -> str:
    done = _run(root, *args, stdin=stdin, env=env)
    if check and done.returncode != 0:
        raise RuntimeFailure(f"git {args[0]} failed in {root}: {done.stderr.strip()}")
    return done.stdout
