"""Values the Git source hands out: plain frozen data, no pygit2 objects, safe to keep and compare."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Literal

ChangeStatus = Literal["added", "modified", "deleted", "renamed"]
SignatureState = Literal["unsigned", "good", "bad", "unknown-key"]
SignatureKind = Literal["ssh", "gpg"]
EntryKind = Literal["file", "executable", "link", "submodule"]


@dataclass(frozen=True, slots=True)
class FileEntry:
    """One file of a commit's tree: repository-relative POSIX path and the hex id of its blob."""

    path: str
    blob_id: str


@dataclass(frozen=True, slots=True)
class PathChange:
    """One file that differs between two commits.

    ``path`` is where the file is in the new commit (for a deletion: where it was). ``old_path`` is where it was
    in the old commit (None when added). Every entry type counts: a symbolic link or a submodule (gitlink) is a
    change to its path like a file, and so is a change of type or mode (``old_kind`` → ``new_kind``). Blob ids
    are set only on a side where the entry is a regular file (a link's or submodule's id is no file to read).
    """

    status: ChangeStatus
    path: str
    old_path: str | None
    old_blob_id: str | None
    new_blob_id: str | None
    old_kind: EntryKind | None = None
    new_kind: EntryKind | None = None


@dataclass(frozen=True, slots=True)
class Person:
    """An author or committer line: who, and when (epoch seconds plus the UTC offset they recorded)."""

    name: str
    email: str
    timestamp: int
    offset_minutes: int

    @property
    def when(self) -> datetime:
        """The time as an aware datetime in the offset the person recorded."""
        tz = timezone(timedelta(minutes=self.offset_minutes))
        return datetime.fromtimestamp(self.timestamp, tz)


@dataclass(frozen=True, slots=True)
class Trailer:
    """One ``Key: value`` line of a commit message's trailer block, key as written."""

    key: str
    value: str


@dataclass(frozen=True, slots=True)
class CommitInfo:
    """A commit's metadata.

    ``parents`` come from the commit object itself, so they are right even at a shallow-clone boundary.
    ``signature`` is the raw ``gpgsig`` header (SSH, PGP or X.509 armour) and ``signed_payload`` the exact bytes
    it signs; both None when the commit is unsigned.
    """

    sha: str
    parents: tuple[str, ...]
    author: Person
    committer: Person
    message: str
    trailers: tuple[Trailer, ...]
    signature: bytes | None
    signed_payload: bytes | None

    @property
    def is_merge(self) -> bool:
        return len(self.parents) > 1

    @property
    def summary(self) -> str:
        """The first line of the message."""
        return self.message.split("\n", 1)[0].strip()

    def trailer_values(self, key: str) -> tuple[str, ...]:
        """Values of every trailer whose key equals ``key``, compared case-insensitively, in message order."""
        wanted = key.lower()
        return tuple(t.value for t in self.trailers if t.key.lower() == wanted)

    @property
    def reviewed_by(self) -> tuple[str, ...]:
        return self.trailer_values("Reviewed-by")

    @property
    def approved_by(self) -> tuple[str, ...]:
        return self.trailer_values("Approved-by")

    @property
    def signed_off_by(self) -> tuple[str, ...]:
        return self.trailer_values("Signed-off-by")


@dataclass(frozen=True, slots=True)
class SignatureStatus:
    """What signature verification concluded about one commit.

    ``signer`` is the identity (a key of the mapping given to the verifier) whose key verified the signature;
    it never comes from the committer's or author's claimed name or email. ``fingerprint`` is the SSH
    ``SHA256:…`` fingerprint or the GPG primary-key fingerprint of the signing key, when known.
    """

    state: SignatureState
    kind: SignatureKind | None
    signer: str | None
    fingerprint: str | None
    reason: str

    @property
    def verified(self) -> bool:
        return self.state == "good"
