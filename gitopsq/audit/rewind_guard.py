"""``RewindGuard``: the writer's side of "the audit branch is append-only as its writer knows it".

After every fetch the guard compares the branch with the commit the writer last pushed (``KnownTip``, kept in
``pushed.json`` beside the WAL). While the branch descends from it by audit appends, commits are built on the
branch and pushed to it. Otherwise (rewound, rebuilt, deleted, or edited on top) the guard raises the incident
once: it logs both tips, records the recovery ref it will use in ``pushed.json`` before pushing there (so a
crash never scatters records over two refs), and from then on commits are built on the known history and pushed
to that ref, fast-forward only. The incident ends when the branch holds the known history again.

Not thread-safe: the trail's commit thread owns it (``incident`` is read by ``status()`` as one reference).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

from gitopsq import logs
from gitopsq.audit import known_tip
from gitopsq.audit.gitstore import AuditBranch, BranchTip
from gitopsq.audit.known_tip import KnownTip, RewindIncident, has_commit, lineage
from gitopsq.errors import AuditError

_log = logs.get("audit")


class RewindGuard:
    def __init__(self, branch: AuditBranch, wal_dir: Path, writer_id: str, known: KnownTip | None,
                 clock: Callable[[], datetime]) -> None:
        self._branch, self._dir, self._writer_id, self._clock = branch, wal_dir, writer_id, clock
        self.known = known          # the commit this writer last pushed (or the branch as first found)
        self.incident: RewindIncident | None = None
        self._recovery_tip: str | None = None  # the recovery ref's commit on the remote, as last seen

    def watermark(self) -> int:
        """The highest WAL number this writer pushed anywhere (the branch, or the recovery ref)."""
        known = self.known
        return known.wal_seq if known is not None and known.writer_id == self._writer_id else 0

    def settle(self) -> None:
        """Judge the branch just fetched: build on it, or on the known history if it was rewound."""
        found, known = self._branch.tip, self.known
        if known is None:  # no push of ours yet: the anchor the repository keeps, else the branch as found
            known = self.known = known_tip.first_known(self._branch.repo, self._branch.branch,
                                                       self._branch.remote_anchor, found.commit)
            if known is None:
                return
        verdict, reason = lineage(self._branch.repo, known.commit, found.commit)
        if verdict != "rewound":
            if self.incident is not None:
                _log.warning("audit_branch_restored", branch=self._branch.branch, commit=found.commit,
                             recovery_ref=self.incident.recovery_ref)
                self.incident = None
            return
        if self.incident is None:
            incident = known_tip.incident(known, found.commit, found.head, reason, now=self._clock(),
                                          writer_id=self._writer_id)
            _log.error("audit_branch_rewound", branch=incident.branch, known_commit=known.commit,
                       known_seq=known.seq, known_hash=known.hash, found_commit=found.commit,
                       found_seq=found.head.seq, reason=reason, recovery_ref=incident.recovery_ref)
            if not known.recovering:  # durable before the first push there: a restart resumes the same ref
                known = self.known = dataclasses.replace(known, ref=incident.recovery_ref)
                known_tip.save_known_tip(self._dir, known)
            self.incident = incident
        self._adopt_landed(known)

    def _adopt_landed(self, known: KnownTip) -> None:
        """Build on the recovery ref as the remote holds it: pushes of ours that landed before a crash first."""
        remote = self._recovery_tip = self._branch.fetch_ref(known.ref)
        repo = self._branch.repo
        if remote is not None and remote != known.commit:
            if not has_commit(repo, known.commit) or lineage(repo, known.commit, remote)[0] != "extended":
                raise AuditError(f"{known.ref} in the audit repository was moved by someone else "
                                 f"(it is at {remote[:12]}, not on {known.commit[:12]}); records wait in the WAL")
            head = known_tip.tip_head(repo, remote)
            known = self.known = dataclasses.replace(known, commit=remote, seq=head.seq, hash=head.hash)
        base = known.commit if has_commit(repo, known.commit) else None
        self._branch.tip = BranchTip(base, known.head)  # the history we know (or its head alone, if lost)

    def push(self, commit_id: str) -> str:
        """Push to the branch, or during an incident to the recovery ref; returns the ref pushed to."""
        if self.incident is None:
            self._branch.push(commit_id)
            return f"refs/heads/{self._branch.branch}"
        self._branch.push(commit_id, ref=self.incident.recovery_ref, expected=self._recovery_tip)
        self._recovery_tip = commit_id
        return self.incident.recovery_ref

    def pushed(self, commit_id: str, ref: str, writer: dict[str, Any]) -> None:
        """Keep the commit just pushed as the known tip (durably), then move the repository's anchor to it."""
        head = self._branch.tip.head
        known = KnownTip(self._branch.branch, commit_id, head.seq, head.hash, self._writer_id,
                         int(writer["walSeq"]), ref)
        known_tip.save_known_tip(self._dir, known)
        self.known = known
        problem = self._branch.push_anchor(commit_id)
        if problem is not None:
            _log.warning("audit_anchor_not_moved", commit=commit_id, reason=problem)
