"""What the writer knows of the audit branch: the commit it last pushed (``pushed.json`` beside its WAL), how a
fetched branch relates to it, and the incident it raises when the branch no longer holds it.

Only audit writers move the audit branch, and they only append: every commit after the one we last pushed must
state a chain head and only add one records file and rewrite ``HEAD.json`` (another gitopsq writer sharing the
branch, docs/fleet.md). A branch that no longer contains our last commit (rewound, rebuilt, deleted), or that
reaches it through anything but such appends, is an incident: the writer does not append to it (docs/audit.md).
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

import pygit2

from gitopsq.audit.canonical import ChainHead
from gitopsq.audit.gitstore import HEAD_FILE, RECORDS_DIR, read_head
from gitopsq.errors import AuditError

KNOWN_TIP_FILE = "pushed.json"
RECOVERY_PREFIX = "refs/gitopsq/audit-recovery/"
_STATED = re.compile(r"^Chain-Head:\s*\d+\s+sha256:[0-9a-f]{64}\s*$", re.MULTILINE)

Lineage = Literal["same", "extended", "rewound"]


def recovery_ref(now: datetime, writer_id: str) -> str:
    """Where a writer that found its branch rewound pushes its records: named by time (UTC) and writer."""
    return f"{RECOVERY_PREFIX}{now.astimezone(UTC):%Y%m%dT%H%M%SZ}-{writer_id[:8]}"


@dataclass(frozen=True, slots=True)
class KnownTip:
    """The last commit this writer pushed: its chain head, the WAL number it carried, and the ref it went to."""

    branch: str
    commit: str
    seq: int
    hash: str
    writer_id: str
    wal_seq: int
    ref: str          # refs/heads/<branch>, or the recovery ref while the branch is rewound

    @property
    def head(self) -> ChainHead:
        return ChainHead(self.seq, self.hash)

    @property
    def recovering(self) -> bool:
        return self.ref.startswith(RECOVERY_PREFIX)


def load_known_tip(directory: Path, branch: str) -> KnownTip | None:
    """The tip kept for ``branch`` (None when this writer never pushed to it). A damaged file is an error:
    the writer must not forget what it pushed and append to whatever it finds."""
    path = directory / KNOWN_TIP_FILE
    if not path.exists():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        tip = KnownTip(**data["branches"][branch]) if branch in data["branches"] else None
    except (ValueError, KeyError, TypeError) as err:
        raise AuditError(f"{path}: unreadable record of the last pushed audit commit ({err}); restore it or, "
                         "to trust the branch as it is now, remove it (docs/audit.md)") from err
    if tip is not None and not (isinstance(tip.commit, str) and isinstance(tip.seq, int)):
        raise AuditError(f"{path}: the last pushed audit commit of {branch} is malformed")
    return tip


def save_known_tip(directory: Path, tip: KnownTip) -> None:
    """Replace ``pushed.json`` atomically and durably (write, fsync, rename, fsync the directory)."""
    path = directory / KNOWN_TIP_FILE
    branches: dict[str, object] = {}
    if path.exists():
        try:
            branches = dict(json.loads(path.read_text(encoding="utf-8"))["branches"])
        except (ValueError, KeyError, TypeError):
            branches = {}
    branches[tip.branch] = asdict(tip)
    tmp = path.with_suffix(".tmp")
    with tmp.open("w", encoding="utf-8") as handle:
        json.dump({"schemaVersion": 1, "branches": branches}, handle, sort_keys=True, indent=2)
        handle.flush()
        os.fsync(handle.fileno())
    tmp.replace(path)
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def has_commit(repo: pygit2.Repository, commit_id: str) -> bool:
    try:
        return isinstance(repo.get(commit_id), pygit2.Commit)
    except (ValueError, pygit2.GitError):
        return False


def lineage(repo: pygit2.Repository, known: str, tip: str | None) -> tuple[Lineage, str]:
    """How the fetched branch ``tip`` relates to the ``known`` commit, and why (for the log and the Event).

    ``same``: unchanged; ``extended``: only audit appends were made on top of it; ``rewound``: anything else
    (the branch lost it, was deleted, or reaches it through a commit that is not an audit append)."""
    if tip is None:
        return "rewound", "the branch no longer exists"
    if tip == known:
        return "same", ""
    if not has_commit(repo, known) or not repo.descendant_of(tip, known):
        return "rewound", f"the branch no longer contains commit {known[:12]}"
    commit = repo[tip].peel(pygit2.Commit)
    while str(commit.id) != known:
        if not commit.parent_ids:
            return "rewound", f"commit {known[:12]} is no longer on the branch's first-parent history"
        problem = _not_an_append(commit)
        if problem:
            return "rewound", f"commit {str(commit.id)[:12]} after {known[:12]} {problem}"
        commit = commit.parents[0]
    return "extended", ""


def _not_an_append(commit: pygit2.Commit) -> str:
    """Why ``commit`` is not an audit writer's append (empty when it is one)."""
    if len(commit.parent_ids) != 1 or _STATED.search(commit.message) is None:
        return "was not written by an audit writer"
    added = 0
    for delta in commit.parents[0].tree.diff_to_tree(commit.tree).deltas:
        status, path = delta.status_char(), delta.new_file.path
        if path == HEAD_FILE and status in "AM":
            continue
        if status == "A" and path.startswith(f"{RECORDS_DIR}/"):
            added += 1
            continue
        return f"changed {path} (audit commits only append)"
    return "" if added == 1 else "does not add exactly one records file"


@dataclass(frozen=True, slots=True)
class RewindIncident:
    """The branch does not hold what this writer last pushed: where each stands, and where records go now."""

    branch: str
    known_commit: str
    known_head: ChainHead
    found_commit: str | None
    found_head: ChainHead
    reason: str
    recovery_ref: str
    since: str         # RFC 3339, when the writer found it

    def message(self) -> str:
        found = (f"is at {self.found_commit[:12]} (chain head {self.found_head.seq})" if self.found_commit
                 else "is gone")
        return (f"audit branch {self.branch} was rewound or rewritten: it {found}, but the writer last pushed "
                f"{self.known_commit[:12]} (chain head {self.known_head.seq} sha256:{self.known_head.hash[:12]}): "
                f"{self.reason}; records are not appended to it and go to {self.recovery_ref}")


def tip_head(repo: pygit2.Repository, commit_id: str | None) -> ChainHead:
    """The chain head a commit states, or an empty chain for no commit (or one this cache does not hold)."""
    if commit_id is None or not has_commit(repo, commit_id):
        return ChainHead()
    return read_head(repo, commit_id)


def first_known(repo: pygit2.Repository, branch: str, anchor: str | None, found: str | None) -> KnownTip | None:
    """A writer that never pushed to ``branch`` starts from the repository's anchor, else trusts the branch."""
    base = anchor if anchor and has_commit(repo, anchor) else found
    if base is None:
        return None
    head = tip_head(repo, base)
    return KnownTip(branch, base, head.seq, head.hash, "", 0, f"refs/heads/{branch}")


def incident(known: KnownTip, found: str | None, found_head: ChainHead, reason: str, *, now: datetime,
             writer_id: str) -> RewindIncident:
    """The incident for a branch found rewound; a writer already recovering keeps its recovery ref."""
    ref = known.ref if known.recovering else recovery_ref(now, writer_id)
    return RewindIncident(known.branch, known.commit, known.head, found, found_head, reason, ref,
                          now.astimezone(UTC).isoformat().replace("+00:00", "Z"))
