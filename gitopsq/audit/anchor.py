"""Anchors: the chain head the writer last wrote, published where a rewind of the audit branch cannot take it along.

1. In the repository: the ref ``refs/gitopsq/audit-anchor/<branch>`` names the commit the writer last pushed
   (signed like every audit commit when the writer has a signing key). It only moves forward.
2. In the cluster: the GitSource's ``status.audit`` (written by the controller) states the same head.

``gitopsq audit verify`` reads the first by itself and the second with ``--anchor-from-cluster``; a head the
branch no longer holds is a rewind (docs/audit.md).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pygit2

from gitopsq.audit.gitstore import anchor_ref, read_head
from gitopsq.audit.known_tip import RECOVERY_PREFIX
from gitopsq.errors import AuditError

_HASH = re.compile(r"^[0-9a-f]{64}$")


@dataclass(frozen=True, slots=True)
class Anchor:
    """A chain head the writer wrote, and where it was read (a ref, or a GitSource)."""

    source: str
    seq: int
    hash: str
    commit: str | None = None


def repository_anchor(repo: pygit2.Repository, branch: str) -> Anchor | None:
    """The anchor ref's head, or None when the repository has none (a trail written before anchors existed)."""
    name = anchor_ref(branch)
    ref = repo.references.get(name) or repo.references.get(f"refs/remotes/origin/{name.removeprefix('refs/')}")
    if ref is None:
        return None
    commit = ref.peel(pygit2.Commit)
    head = read_head(repo, str(commit.id))
    return Anchor(name, head.seq, head.hash, str(commit.id))


def recovery_refs(repo: pygit2.Repository) -> list[str]:
    """The recovery refs a writer pushed after finding the branch rewound (where its records went)."""
    return sorted(name for name in repo.references if name.startswith(RECOVERY_PREFIX))


def status_anchor(status: Mapping[str, Any] | None, source: str, branch: str) -> Anchor:
    """The anchor in a GitSource's ``status.audit``; an error saying why when it has none or another branch's."""
    audit = (status or {}).get("audit")
    if not isinstance(audit, Mapping):
        raise AuditError(f"GitSource {source} has no status.audit: its controller runs without an audit trail "
                         "(--audit-wal-dir) or has not pushed a record yet")
    head = audit.get("head")
    if not isinstance(head, Mapping) or not isinstance(head.get("seq"), int) \
            or not _HASH.match(str(head.get("hash", ""))):
        raise AuditError(f"GitSource {source}: status.audit.head is not a chain head ({{seq, hash}})")
    if audit.get("branch") != branch:
        raise AuditError(f"GitSource {source} anchors audit branch {audit.get('branch')!r}, not {branch!r}")
    commit = audit.get("commit")
    return Anchor(f"GitSource {source}", int(head["seq"]), str(head["hash"]),
                  str(commit) if isinstance(commit, str) else None)
