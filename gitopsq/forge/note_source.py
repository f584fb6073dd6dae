"""Signed approvals notes as a stand-in for the forge's reviews (docs/audit.md "Approvals recorded in the
repository").

`NoteApprovals` answers the two questions the sync asks a forge about a merge — which pull request did this
commit merge (`pull_request_of`), who approved it (`approvals`) — from the verified note on the commit, so
gitopsq.forge.reviews (validation's reader, the audit's merged reviews) works unchanged without a forge. The
recorder keys are those of the trusted gitopsq.yaml for that merge: its first parent's (the branch before the
merge), never the merge's own. `with_notes` puts it behind the real forge: asked when the forge is not
configured, or when it cannot be reached (connection failure, 5xx after retries); a refusal (401/403/404) is not
papered over. An unverifiable note counts for nothing and is logged with its reason.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from gitopsq import logs
from gitopsq.forge.http import ForgeError
from gitopsq.forge.notes import NOTES_REF, NoteVerdict, recorder_keys, verify
from gitopsq.forge.port import Approval, Comment, Forge, State, Status
from gitopsq.manifests.config import parse_config
from gitopsq.manifests.config_model import CONFIG_PATH
from gitopsq.manifests.keyfiles import revision_reader
from gitopsq.source.port import Source

_log = logs.get("controller")
MAX_KEPT = 256  # verdicts and forge answers kept per process (a merged commit's note and PR never change)
APPROVALS_TTL = 300.0  # seconds a PR's approvals are reused: one read serves validation and the record


class NoteApprovals:
    """Approvals of merged pull requests read from the signed notes of ``source``'s commits."""

    name = "note"

    def __init__(self, source: Source) -> None:
        self.source = source
        self._verdicts: dict[str, NoteVerdict] = {}
        self._by_pr: dict[int, NoteVerdict] = {}

    def verdict(self, sha: str) -> NoteVerdict:
        """The note on ``sha`` judged against the recorders of its first parent's gitopsq.yaml (cached)."""
        found = self._verdicts.get(sha)
        if found is None:
            recorders = self._recorders(sha)
            # without a declared recorder no note can count: do not even read one (no round trip to a remote)
            found = NoteVerdict(sha, "absent", "gitopsq.yaml declares no approvalRecorders") if not recorders \
                else verify(_read_note(self.source, sha), sha, recorders)
            if len(self._verdicts) >= MAX_KEPT:
                self._verdicts.pop(next(iter(self._verdicts)))
            self._verdicts[sha] = found
            if found.state not in ("verified", "absent"):
                _log.warning("approvals note refused: it counts for nothing", commit=sha, state=found.state,
                             reason=found.reason)
        return found

    def _recorders(self, sha: str) -> dict[str, list[str]]:
        return trusted_recorders(self.source, sha)

    def pull_request_of(self, sha: str) -> int | None:
        found = self.verdict(sha)
        if not found.verified or found.payload is None:
            return None
        pr = int(found.payload.get("pullRequest") or 0)
        self._by_pr[pr] = found
        return pr or None

    def approvals(self, pr: int) -> tuple[Approval, ...]:
        found = self._by_pr.get(pr)
        if found is None or found.payload is None:
            return ()
        forge = str(found.payload.get("forge") or "note")
        return tuple(Approval(reviewer=str(a.get("login") or ""), at=a.get("at"), commit=a.get("approvedCommit"),
                              forge=forge, email=str(a.get("email") or "") or None, via="note")
                     for a in found.payload["approvals"] if isinstance(a, dict) and a.get("login"))

    # the rest of the Forge interface: a note can say who approved, nothing else
    def set_status(self, sha: str, state: State, *, context: str, description: str,
                   target_url: str | None = None) -> None:
        raise ForgeError("approvals notes cannot hold commit statuses", forge="note", method="POST")

    def statuses(self, sha: str) -> tuple[Status, ...]:
        return ()

    def upsert_comment(self, pr: int, marker: str, body: str) -> Comment:
        raise ForgeError("approvals notes cannot hold comments", forge="note", method="POST")


class ForgeThenNotes:
    """The forge's reviews, and the signed notes when the forge cannot be reached."""

    def __init__(self, forge: Forge, notes: NoteApprovals, clock: Callable[[], float] = time.monotonic) -> None:
        self.forge = forge
        self.notes = notes
        self.name = forge.name
        self.clock = clock
        self._from_notes: set[int] = set()
        self._prs: dict[str, int] = {}  # merged sha → its PR: final once merged
        self._approvals: dict[int, tuple[float, tuple[Approval, ...]]] = {}

    def pull_request_of(self, sha: str) -> int | None:
        if sha in self._prs:
            return self._prs[sha]
        try:
            pr = self.forge.pull_request_of(sha)
        except ForgeError as err:
            if not _unreachable(err):
                raise
            pr = self.notes.pull_request_of(sha)
            if pr is None:
                raise  # no verified note either: the pass fails and retries, as without notes
            _log.warning("forge unreachable: approvals taken from the signed note", commit=sha, error=str(err))
            self._from_notes.add(pr)
            return pr
        if pr is not None:  # "no PR" is not kept: a forge may index a fresh merge a moment later
            if len(self._prs) >= MAX_KEPT:
                self._prs.pop(next(iter(self._prs)))
            self._prs[sha] = pr
        return pr

    def approvals(self, pr: int) -> tuple[Approval, ...]:
        """The PR's approvals, read once for validation and the audit record of the same merge (for
        `APPROVALS_TTL` seconds), or the note's when the forge could not be reached."""
        if pr in self._from_notes:
            return self.notes.approvals(pr)
        now = self.clock()
        kept = self._approvals.get(pr)
        if kept is not None and now - kept[0] < APPROVALS_TTL:
            return kept[1]
        given = self.forge.approvals(pr)
        if len(self._approvals) >= MAX_KEPT:
            self._approvals.pop(next(iter(self._approvals)))
        self._approvals[pr] = (now, given)
        return given

    def set_status(self, sha: str, state: State, *, context: str, description: str,
                   target_url: str | None = None) -> None:
        self.forge.set_status(sha, state, context=context, description=description, target_url=target_url)

    def statuses(self, sha: str) -> tuple[Status, ...]:
        return self.forge.statuses(sha)

    def upsert_comment(self, pr: int, marker: str, body: str) -> Comment:
        return self.forge.upsert_comment(pr, marker, body)


def with_notes(forge: Forge | None, source: Source) -> Forge:
    """What the sync asks about merges: the forge backed by the notes, or the notes alone without a forge."""
    notes = NoteApprovals(source)
    return notes if forge is None else ForgeThenNotes(forge, notes)


def _unreachable(err: ForgeError) -> bool:
    return err.status is None or err.status >= 500 or err.status == 429


def trusted_recorders(source: Source, sha: str) -> dict[str, list[str]]:
    """name → SSH public keys of the recorders the trusted gitopsq.yaml for ``sha`` (its first parent's) lists."""
    try:
        parents = source.commit_info(sha).parents
        base = parents[0] if parents else sha
        data = source.read_file(base, CONFIG_PATH)
    except Exception:  # an unreadable trust model trusts no recorder
        return {}
    if data is None:
        return {}
    return recorder_keys(parse_config(data, read_file=revision_reader(source, base)).config)


def _read_note(source: Source, sha: str) -> bytes | None:
    # a Git source holds notes; other sources (a plain directory) have none to read
    reader = getattr(source, "read_note", None)
    if reader is None:
        return None
    try:
        data = reader(NOTES_REF, sha)
    except Exception as err:  # a note that cannot be read is no evidence; the sync goes on without it
        _log.warning("approvals note not readable", commit=sha, error=str(err))
        return None
    return bytes(data) if data is not None else None
