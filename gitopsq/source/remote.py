"""Keep a remote's bare cache up to date, fetching only what a revision needs.

How a revision is found on a remote (git's own order for ambiguous names):
1. Ask the remote for its refs (one round trip, no objects).
2. ``HEAD`` → the branch the remote's HEAD points to; a full ref name → itself; a full commit id → that commit
   (never a ref); else ``refs/heads/<rev>`` or ``refs/tags/<rev>``, refused when the remote has both
   (gitopsq.source.refnames).
3. A matched ref whose object the cache already holds needs no fetch; else that single ref is fetched, with
   ``depth`` while the cache is shallow or empty (never over file://, whose libgit2 transport cannot).
4. Anything else (a commit id, possibly abbreviated): looked up in the cache, and when absent, every branch and
   tag is fetched with full history before looking again.
History questions (ancestry, merge base, commit ranges) first unshallow the cache, so a shallow boundary is
never mistaken for unrelated histories.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pygit2

from gitopsq.source.cache import HEADS_REFSPEC, locked
from gitopsq.source.credentials import Credentials, GitCallbacks
from gitopsq.source.failures import git_errors
from gitopsq.source.locations import RepoLocation
from gitopsq.source.refnames import pick_ref

UNSHALLOW = 2_147_483_647  # libgit2's GIT_FETCH_DEPTH_UNSHALLOW
TAGS_REFSPEC = "+refs/tags/*:refs/tags/*"


@dataclass(frozen=True, slots=True)
class RemoteRef:
    """A ref as the remote advertises it, and where the cache keeps its copy."""

    name: str
    oid: str
    local_name: str


def local_name_for(remote_ref: str) -> str:
    if remote_ref.startswith("refs/heads/"):
        return "refs/remotes/origin/" + remote_ref.removeprefix("refs/heads/")
    if remote_ref.startswith("refs/tags/"):
        return remote_ref
    return "refs/gitopsq/" + remote_ref.removeprefix("refs/")


@dataclass(frozen=True, slots=True)
class FetchStats:
    """What the last fetch did (for callers that log it: only credential-free data here)."""

    refspecs: tuple[str, ...]
    depth: int
    objects: int
    bytes: int
    seconds: float


class RemoteMirror:
    """Fetch logic for one cached remote. Counts fetches so tests and logs can see cache reuse."""

    def __init__(
        self,
        repo: pygit2.Repository,
        location: RepoLocation,
        root: Path,
        credentials: Credentials,
        *,
        depth: int,
        timeout_seconds: float,
    ) -> None:
        self.repo = repo
        self.location = location
        self.root = root
        self.credentials = credentials.with_url_userinfo(location.username, location.password)
        self.depth = 0 if location.scheme == "file" else max(depth, 0)
        self.timeout_seconds = timeout_seconds
        self.fetch_count = 0
        self.last_fetch: FetchStats | None = None

    @property
    def secrets(self) -> tuple[str, ...]:
        return self.credentials.secrets()

    def _callbacks(self) -> GitCallbacks:
        return GitCallbacks(self.credentials, timeout_seconds=self.timeout_seconds)

    def _apply_timeouts(self) -> None:
        millis = int(self.timeout_seconds * 1000)
        pygit2.settings.server_connect_timeout = min(millis, 30_000)
        pygit2.settings.server_timeout = millis

    @contextmanager
    def _known_hosts(self) -> Iterator[None]:
        """For ssh with GITOPSQ_SSH_KNOWN_HOSTS: point libgit2's home at a copy of that file for this operation.

        libgit2 reads ``<home>/.ssh/known_hosts`` and we reject any host it does not vouch for; the home directory
        is process-wide, so it is restored at once.
        """
        known = self.credentials.ssh_known_hosts
        if known is None or self.location.scheme not in ("ssh", "git+ssh", "ssh+git"):
            yield
            return
        home = Path(tempfile.mkdtemp(prefix="gitopsq-ssh-"))
        previous = pygit2.settings.homedir
        try:
            (home / ".ssh").mkdir(mode=0o700)
            shutil.copyfile(known, home / ".ssh" / "known_hosts")
            pygit2.settings.homedir = str(home)
            yield
        finally:
            pygit2.settings.homedir = previous or str(Path.home())
            shutil.rmtree(home, ignore_errors=True)

    def advertised(self, rev: str | None = None) -> tuple[dict[str, str], str | None]:
        """The remote's refs (name → object id, peeled tags as ``name^{}``) and the branch its HEAD names."""
        self._apply_timeouts()
        refs: dict[str, str] = {}
        head_target: str | None = None
        with git_errors("list the refs of", self.location.display, ref=rev, secrets=self.secrets), \
                self._known_hosts():
            for head in self.repo.remotes["origin"].list_heads(callbacks=self._callbacks()):
                refs[str(head.name)] = str(head.oid)
                if head.name == "HEAD" and head.symref_target:
                    head_target = str(head.symref_target)
        return refs, head_target

    def find_ref(self, rev: str, refs: dict[str, str], head_target: str | None) -> RemoteRef | None:
        """The ref ``rev`` names among the advertised ``refs`` (gitopsq.source.refnames); raises AmbiguousRefError."""
        if rev == "HEAD":
            if head_target and head_target in refs:
                return RemoteRef(head_target, refs[head_target], local_name_for(head_target))
            if "HEAD" in refs:
                return RemoteRef("HEAD", refs["HEAD"], "refs/gitopsq/HEAD")
            return None
        name = pick_ref(rev, frozenset(n for n in refs if not n.endswith("^{}")), remote=True)
        return None if name is None else RemoteRef(name, refs[name], local_name_for(name))

    def ensure_ref(self, ref: RemoteRef) -> None:
        """Make the cache hold ``ref``'s object under its local name, fetching it only when missing."""
        oid = pygit2.Oid(hex=ref.oid)
        if oid not in self.repo.odb:
            depth = self.depth if (self.repo.is_empty or self.repo.is_shallow) else 0
            self.fetch([f"+{ref.name}:{ref.local_name}"], depth=depth, rev=ref.name)
        if oid in self.repo.odb:
            with locked(self.root, self.location):
                self.repo.references.create(ref.local_name, oid, force=True)

    def fetch_everything(self, rev: str | None = None) -> None:
        """Every branch and tag with full history: for commit ids and history questions."""
        depth = UNSHALLOW if self.repo.is_shallow else 0
        self.fetch([HEADS_REFSPEC, TAGS_REFSPEC], depth=depth, rev=rev)

    def unshallow(self) -> None:
        if self.repo.is_shallow:
            self.fetch_everything()

    def fetch(self, refspecs: list[str], *, depth: int, rev: str | None) -> None:
        self._apply_timeouts()
        started = time.monotonic()
        with locked(self.root, self.location), git_errors(
            "fetch", self.location.display, ref=rev, secrets=self.secrets
        ), self._known_hosts():
            stats = self.repo.remotes["origin"].fetch(refspecs, callbacks=self._callbacks(), depth=depth)
            # libgit2 keeps the shallow grafts it read at open time: reopen to see the new boundary.
            self.repo = pygit2.Repository(self.repo.path, pygit2.enums.RepositoryOpenFlag.NO_SEARCH)
        self.fetch_count += 1
        self.last_fetch = FetchStats(tuple(refspecs), depth, stats.received_objects, stats.received_bytes,
                                     round(time.monotonic() - started, 3))
