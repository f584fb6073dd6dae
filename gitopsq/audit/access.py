"""Open the repository that holds an audit branch: a local path as it is, a URL through a private fetch."""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pygit2

from gitopsq.audit.gitstore import git, resolve_target
from gitopsq.audit.redact import redact_text
from gitopsq.errors import AuditError


def _is_url(target: str) -> bool:
    return resolve_target(target) == target and not Path(target).is_absolute()


@contextlib.contextmanager
def open_audit_repository(target: str, branch: str) -> Iterator[pygit2.Repository]:
    """Yield a repository whose ``refs/heads/<branch>`` is the audit branch of ``target`` (with its
    ``refs/gitopsq/*`` anchor and recovery refs)."""
    if not _is_url(target):
        try:
            yield pygit2.Repository(str(Path(target).resolve()))
        except pygit2.GitError as err:
            raise AuditError(f"cannot open repository {target}: {err}") from err
        return
    with tempfile.TemporaryDirectory(prefix="gitopsq-audit-") as tmp:
        pygit2.init_repository(tmp, bare=True)
        # the anchor and recovery refs too (a glob that matches nothing fetches nothing, without error)
        fetched = git(["fetch", "--no-tags", "--quiet", target, f"+refs/heads/{branch}:refs/heads/{branch}",
                       "+refs/gitopsq/*:refs/gitopsq/*"], cwd=Path(tmp))
        if fetched.returncode != 0:
            detail = fetched.stderr.decode("utf-8", "replace").strip().splitlines()
            reason = redact_text(detail[-1] if detail else "failed")
            raise AuditError(f"cannot fetch {branch} from {redact_text(target)}: {reason}")
        yield pygit2.Repository(tmp)
