"""The audit branch: commits built with pygit2 on a bare cache repository, moved with the git CLI.

Branch layout (docs/audit.md)::

    HEAD.json                                         {"schemaVersion", "seq", "hash", "file", "writer", "time"}
    records/YYYY/MM/DD/<first seq>-<last seq>.jsonl   one chained entry per line, 12-digit zero-padded seqs

Each commit adds exactly one records file and rewrites HEAD.json; its message states the chain head. The
target (the source repository or a separate one) is always reached through ``git fetch`` / ``git push`` from a
private bare cache under the WAL directory, so a local path and a remote URL behave the same, and the
receiving side refuses non-fast-forward updates: a lost race shows up as a rejected push, never a fork.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pygit2

from gitopsq.audit.canonical import ChainHead, canonical_json, link_all
from gitopsq.audit.redact import redact_text
from gitopsq.audit.signing import SshSigner
from gitopsq.errors import AuditError

DEFAULT_BRANCH = "gitopsq/audit"
HEAD_FILE = "HEAD.json"
RECORDS_DIR = "records"
ANCHOR_PREFIX = "refs/gitopsq/audit-anchor/"


def anchor_ref(branch: str) -> str:
    """The ref in the audit repository that names the commit the writer last pushed (its anchor)."""
    return f"{ANCHOR_PREFIX}{branch}"


class RemoteUnreachableError(AuditError):
    """The audit repository cannot be reached; records stay in the WAL."""


class PushRejectedError(AuditError):
    """The remote refused a non-fast-forward update: someone else moved the branch. Rebuild and retry."""


class PushRefusedError(AuditError):
    """The remote refused the update for another reason (a hook, a protected branch): retrying will not help."""


@dataclass(frozen=True, slots=True)
class BranchTip:
    """What the branch holds at a commit: the commit id (None for a missing branch) and the chain head."""

    commit: str | None
    head: ChainHead


def resolve_target(target: str) -> str:
    """A URL stays as it is; a local path becomes absolute so git does not read it relative to the cache."""
    if "://" in target or (":" in target and not target.startswith("/") and "@" in target.split(":", maxsplit=1)[0]):
        return target
    return str(Path(target).resolve())


# A credential helper that hands git the source's https token (GITOPSQ_GIT_TOKEN_FILE, else GITOPSQ_GIT_TOKEN),
# read when git asks: the token itself never appears in an argument or in git's configuration.
TOKEN_HELPER = ('!f() { test "$1" = get || exit 0; printf "username=%s\\n" "${GITOPSQ_GIT_USERNAME:-git}"; '
                'if [ -n "$GITOPSQ_GIT_TOKEN_FILE" ]; then printf "password=%s\\n" "$(cat "$GITOPSQ_GIT_TOKEN_FILE")"; '
                'else printf "password=%s\\n" "$GITOPSQ_GIT_TOKEN"; fi; }; f')


def git_env(environ: Mapping[str, str]) -> dict[str, str]:
    """The environment for the git CLI: the same credentials as the Git source (gitopsq/source/credentials.py:
    GITOPSQ_GIT_TOKEN[_FILE], GITOPSQ_GIT_USERNAME, GITOPSQ_SSH_KEY_FILE, GITOPSQ_SSH_KNOWN_HOSTS) turned into a
    credential helper and an ssh command, unless git's own settings (a credential.helper in GIT_CONFIG_*,
    GIT_SSH_COMMAND) already say otherwise. Variables that would point git at another repository are dropped."""
    env = {k: v for k, v in environ.items() if k not in ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE")}
    env["GIT_TERMINAL_PROMPT"] = "0"
    if environ.get("GITOPSQ_GIT_TOKEN_FILE") or environ.get("GITOPSQ_GIT_TOKEN"):
        count = int(environ.get("GIT_CONFIG_COUNT") or 0)
        if not any(environ.get(f"GIT_CONFIG_KEY_{i}") == "credential.helper" for i in range(count)):
            env.update({"GIT_CONFIG_COUNT": str(count + 1), f"GIT_CONFIG_KEY_{count}": "credential.helper",
                        f"GIT_CONFIG_VALUE_{count}": TOKEN_HELPER})
    ssh = ["ssh", "-o", "BatchMode=yes", "-o", "ConnectTimeout=10"]
    key, known = environ.get("GITOPSQ_SSH_KEY_FILE"), environ.get("GITOPSQ_SSH_KNOWN_HOSTS")
    if key:
        ssh += ["-i", shlex.quote(key), "-o", "IdentitiesOnly=yes"]
    if known:
        ssh += ["-o", f"UserKnownHostsFile={shlex.quote(known)}"]
    env["GIT_SSH_COMMAND"] = environ.get("GIT_SSH_COMMAND") or " ".join(ssh)
    return env


def git(args: list[str], *, cwd: Path, input_bytes: bytes | None = None,
        timeout: float = 60) -> subprocess.CompletedProcess[bytes]:
    try:
        return subprocess.run(["git", *args], cwd=cwd, input=input_bytes, capture_output=True,
                              env=git_env(os.environ), timeout=timeout, check=False)
    except subprocess.TimeoutExpired as err:
        raise RemoteUnreachableError(f"git {args[0]} timed out after {timeout:.0f}s") from err
    except FileNotFoundError as err:  # no git on PATH: a clear error for the writer's retry loop, not a traceback
        raise AuditError("the git command is not installed (or not on PATH): the audit trail is written with it; "
                         "install git (README: requirements)") from err


def blob_data(repo: pygit2.Repository, oid: pygit2.Oid) -> bytes:
    blob = repo[oid]
    if not isinstance(blob, pygit2.Blob):
        raise AuditError(f"object {oid} is not a file")
    return blob.data


def read_head(repo: pygit2.Repository, commit_id: str | None) -> ChainHead:
    """The chain head a commit's HEAD.json states (an empty chain when there is no commit or no file)."""
    if commit_id is None:
        return ChainHead()
    tree = repo[commit_id].peel(pygit2.Commit).tree
    if HEAD_FILE not in tree:
        return ChainHead()
    data = json.loads(blob_data(repo, tree[HEAD_FILE].id))
    return ChainHead(int(data["seq"]), str(data["hash"]))


def read_head_json(repo: pygit2.Repository, commit: pygit2.Commit) -> dict[str, Any] | None:
    if HEAD_FILE not in commit.tree:
        return None
    value = json.loads(blob_data(repo, commit.tree[HEAD_FILE].id))
    return value if isinstance(value, dict) else None


def first_parent_history(repo: pygit2.Repository, commit_id: str) -> Iterator[pygit2.Commit]:
    """The branch's own commits, newest first, following first parents only."""
    commit: pygit2.Commit | None = repo[commit_id].peel(pygit2.Commit)
    while commit is not None:
        yield commit
        commit = commit.parents[0] if commit.parent_ids else None


class AuditBranch:
    """Appends chained batches to the audit branch of ``target``. Not thread-safe: one owner thread."""

    def __init__(self, cache_dir: Path, target: str, branch: str = DEFAULT_BRANCH, *,
                 identity: tuple[str, str] = ("gitopsq", "gitopsq@localhost"),
                 signer: SshSigner | None = None) -> None:
        self.target = resolve_target(target)
        self.branch = branch
        self.identity = identity
        self.signer = signer
        self.cache_dir = cache_dir
        self.repo = (pygit2.Repository(str(cache_dir)) if (cache_dir / "HEAD").exists()
                     else pygit2.init_repository(str(cache_dir), bare=True))
        self.tracking = f"refs/audit-remote/{branch}"
        self.anchor_tracking = f"refs/audit-remote-anchor/{branch}"
        self.kept = f"refs/audit-pushed/{branch}"  # keeps the last pushed commit's objects in the cache
        self.tip = BranchTip(None, ChainHead())
        self.remote_anchor: str | None = None  # the anchor ref's commit as last fetched

    def fetch(self) -> BranchTip:
        """Bring the remote branch (and the writer's anchor ref, when there is one) into the cache; a missing
        branch is an empty chain. The tracking ref follows the remote even when it went backwards: whether
        that is acceptable is decided against the writer's known tip (gitopsq/audit/known_tip.py)."""
        anchor = anchor_ref(self.branch)
        listed = git(["ls-remote", self.target, f"refs/heads/{self.branch}", anchor], cwd=self.cache_dir)
        if listed.returncode != 0:
            raise RemoteUnreachableError(f"cannot reach audit repository: {_last_line(listed.stderr)}")
        names = {line.split("\t", 1)[-1] for line in listed.stdout.decode("utf-8", "replace").splitlines()}
        refspecs = [f"+refs/heads/{self.branch}:{self.tracking}"] if f"refs/heads/{self.branch}" in names else []
        if anchor in names:
            refspecs.append(f"+{anchor}:{self.anchor_tracking}")
        if refspecs:
            fetched = git(["fetch", "--no-tags", "--quiet", self.target, *refspecs], cwd=self.cache_dir)
            if fetched.returncode != 0:
                raise RemoteUnreachableError(f"cannot fetch audit branch: {_last_line(fetched.stderr)}")
        self.remote_anchor = (str(self.repo.references[self.anchor_tracking].target)
                              if anchor in names else None)
        if f"refs/heads/{self.branch}" not in names:
            self.tip = BranchTip(None, ChainHead())
            return self.tip
        commit_id = str(self.repo.references[self.tracking].target)
        self.tip = BranchTip(commit_id, read_head(self.repo, commit_id))
        return self.tip

    def fetch_ref(self, ref: str) -> str | None:
        """The commit ``ref`` names in the audit repository, brought into the cache (None when there is no such
        ref)."""
        listed = git(["ls-remote", self.target, ref], cwd=self.cache_dir)
        if listed.returncode != 0:
            raise RemoteUnreachableError(f"cannot reach audit repository: {_last_line(listed.stderr)}")
        if not any(line.endswith(f"\t{ref}") for line in listed.stdout.decode("utf-8", "replace").splitlines()):
            return None
        local = f"refs/audit-remote-ref/{ref.removeprefix('refs/')}"
        fetched = git(["fetch", "--no-tags", "--quiet", self.target, f"+{ref}:{local}"], cwd=self.cache_dir)
        if fetched.returncode != 0:
            raise RemoteUnreachableError(f"cannot fetch {ref}: {_last_line(fetched.stderr)}")
        return str(self.repo.references[local].target)

    def build(self, records: Sequence[Mapping[str, Any]], *, writer: dict[str, Any],
              now: datetime) -> tuple[str, ChainHead]:
        """A commit on the current tip that appends ``records`` (chained after the tip's head); no ref moves."""
        entries, head = link_all(records, self.tip.head)
        first = entries[0]["seq"]
        day = now.astimezone(UTC)
        directory = f"{RECORDS_DIR}/{day:%Y/%m/%d}"
        filename = f"{first:012d}-{head.seq:012d}.jsonl"
        blob = self.repo.create_blob("".join(canonical_json(e) + "\n" for e in entries).encode("utf-8"))
        head_doc = {"schemaVersion": 1, "seq": head.seq, "hash": head.hash, "file": f"{directory}/{filename}",
                    "writer": writer, "time": day.isoformat().replace("+00:00", "Z")}
        head_blob = self.repo.create_blob((json.dumps(head_doc, indent=2, sort_keys=True) + "\n").encode())
        parent_tree = self.repo[self.tip.commit].peel(pygit2.Commit).tree if self.tip.commit else None
        tree = self._insert(parent_tree, directory.split("/"), filename, blob)
        tree = self._with_entry(tree, HEAD_FILE, head_blob)
        message = (f"audit: records {first}-{head.seq}\n\nChain-Head: {head.seq} sha256:{head.hash}\n"
                   f"Records: {len(entries)}\n")
        name, email = self.identity
        signature = pygit2.Signature(name, email, int(day.timestamp()), 0)
        parents: list[str | pygit2.Oid] = [self.tip.commit] if self.tip.commit else []
        if self.signer is None:
            oid = self.repo.create_commit(None, signature, signature, message, tree, parents)
        else:
            payload = str(self.repo.create_commit_string(signature, signature, message, tree, parents))
            oid = self.repo.create_commit_with_signature(payload, self.signer.sign(payload.encode("utf-8")))
        return str(oid), head

    def _with_entry(self, tree_id: pygit2.Oid, name: str, blob: pygit2.Oid) -> pygit2.Oid:
        builder = self.repo.TreeBuilder(self.repo[tree_id].peel(pygit2.Tree))
        builder.insert(name, blob, pygit2.enums.FileMode.BLOB)
        return builder.write()

    def _insert(self, tree: pygit2.Tree | None, parts: list[str], filename: str, blob: pygit2.Oid) -> pygit2.Oid:
        builder = self.repo.TreeBuilder(tree) if tree is not None else self.repo.TreeBuilder()
        if not parts:
            builder.insert(filename, blob, pygit2.enums.FileMode.BLOB)
            return builder.write()
        child = None
        if tree is not None and parts[0] in tree:
            child = self.repo[tree[parts[0]].id].peel(pygit2.Tree)
        builder.insert(parts[0], self._insert(child, parts[1:], filename, blob), pygit2.enums.FileMode.TREE)
        return builder.write()

    def push(self, commit_id: str, *, ref: str | None = None, expected: str | None = None) -> None:
        """Move the remote ``ref`` (default: the branch) to ``commit_id`` if it is still at ``expected`` (default:
        the commit we built on; ``None`` there means the ref must not exist yet). Raises PushRejectedError when
        the ref moved (a lost race, or someone rewound it), PushRefusedError or RemoteUnreachableError."""
        target_ref = ref or f"refs/heads/{self.branch}"
        old = self.tip.commit if ref is None else expected
        result = git(["push", "--porcelain", "--quiet", f"--force-with-lease={target_ref}:{old or ''}",
                      self.target, f"{commit_id}:{target_ref}"], cwd=self.cache_dir)
        out = result.stdout.decode("utf-8", "replace")
        if result.returncode == 0:
            if ref is None:
                self.repo.references.create(self.tracking, pygit2.Oid(hex=commit_id), force=True)
            self.repo.references.create(self.kept, pygit2.Oid(hex=commit_id), force=True)
            self.tip = BranchTip(commit_id, read_head(self.repo, commit_id))
            return
        reason = _rejection(out)
        if "[rejected]" in out or ("[remote rejected]" in out and any(m in reason for m in _LOST_RACE)):
            raise PushRejectedError(f"audit push to {target_ref} rejected: {reason}")
        if "[remote rejected]" in out:
            raise PushRefusedError(f"audit push to {target_ref} refused by the remote: {reason}")
        raise RemoteUnreachableError(f"cannot push audit branch: {_last_line(result.stderr)}")

    def push_anchor(self, commit_id: str) -> str | None:
        """Point the repository's anchor ref at ``commit_id`` (fast-forward only, never backwards); None when
        done, else why not. After the branch push: an anchor never names a commit the branch has not held."""
        anchor = anchor_ref(self.branch)
        result = git(["push", "--porcelain", "--quiet", self.target, f"{commit_id}:{anchor}"], cwd=self.cache_dir)
        if result.returncode == 0:
            self.repo.references.create(self.anchor_tracking, pygit2.Oid(hex=commit_id), force=True)
            self.remote_anchor = commit_id
            return None
        out = result.stdout.decode("utf-8", "replace")
        return _rejection(out) if "rejected]" in out else _last_line(result.stderr)

    def writer_watermark(self, writer_id: str, *, max_commits: int = 100_000) -> int:
        """The highest WAL sequence number of ``writer_id`` already on the branch (0 when none)."""
        if self.tip.commit is None:
            return 0
        for count, commit in enumerate(first_parent_history(self.repo, self.tip.commit)):
            if count >= max_commits:
                break
            doc = read_head_json(self.repo, commit)
            writer = doc.get("writer") if doc else None
            if isinstance(writer, dict) and writer.get("id") == writer_id:
                return int(writer.get("walSeq", 0))
        return 0

    def recent_ids(self, *, limit: int) -> set[str]:
        """Ids of about the last ``limit`` records on the branch (for dropping re-emitted records)."""
        ids: set[str] = set()
        if self.tip.commit is None:
            return ids
        for commit in first_parent_history(self.repo, self.tip.commit):
            doc = read_head_json(self.repo, commit)
            if doc is None or len(ids) >= limit:
                break
            path = str(doc.get("file", ""))
            try:
                data = blob_data(self.repo, commit.tree[path].id)
            except KeyError:
                continue
            for line in data.splitlines():
                ids.add(str(json.loads(line).get("id")))
        return ids


# What a receiving git says when another push updated the ref between our look and our update.
_LOST_RACE = ("failed to update ref", "cannot lock ref", "incorrect old value", "failed to lock")


def _last_line(stderr: bytes) -> str:
    """git's last words, with any credential in a URL masked (they end up in logs and status)."""
    lines = [line for line in stderr.decode("utf-8", "replace").splitlines() if line.strip()]
    return redact_text(lines[-1].strip()) if lines else "no detail from git"


def _rejection(out: str) -> str:
    for line in out.splitlines():
        if line.startswith("!"):
            return redact_text(line.split("\t")[-1].strip())
    return redact_text(out.strip()) or "rejected"
