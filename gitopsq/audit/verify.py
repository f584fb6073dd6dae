"""``audit verify``: check an audit branch from its own content alone.

Checks, in this order (the first problem found names the record, file and line, or the commit):
1. every file under ``records/`` is named ``<first seq>-<last seq>.jsonl`` and holds exactly that range;
2. walking the files in seq order, every line parses, passes the schema envelope check, has the next ``seq``
   (a jump is a gap: a removed record; a repeat is an inserted or reordered one), carries the previous entry's
   hash as ``prevHash``, and hashes to its own ``hash`` (an edited record fails here);
3. ``HEAD.json`` names the last entry's seq and hash;
4. along the branch's first-parent history, every commit only adds one records file and rewrites HEAD.json
   (anything else is rewritten history), and the chain head its message and HEAD.json state is in the chain;
5. with ``since_head``, the previously verified head is still in the chain (else the branch was rewritten);
6. with ``allowed_signers``, every audit commit carries a good SSH signature by its committer;
7. every anchor (the repository's anchor ref, read by itself, and any given, e.g. from the GitSource status) names
   a head the chain still holds; one it does not is a rewind (state ``rewound``), however consistent the rest is.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pygit2

from gitopsq.audit.anchor import Anchor, recovery_refs, repository_anchor
from gitopsq.audit.canonical import GENESIS_HASH, entry_hash
from gitopsq.audit.gitstore import HEAD_FILE, RECORDS_DIR, blob_data, first_parent_history, read_head_json
from gitopsq.audit.records import validate_record
from gitopsq.audit.signing import verify_ssh_signature
from gitopsq.progress import NullProgress, Progress

_FILE_NAME = re.compile(r"^(\d{12})-(\d{12})\.jsonl$")
_STATED = re.compile(r"^Chain-Head:\s*(\d+)\s+sha256:([0-9a-f]{64})\s*$", re.MULTILINE)


@dataclass(frozen=True, slots=True)
class Problem:
    kind: str                 # edited, gap, reordered, inserted, unreadable, invalid, misnamed, head, rewritten…
    message: str
    file: str | None = None
    line: int | None = None
    seq: int | None = None
    commit: str | None = None

    def where(self) -> str:
        if self.file is not None:
            spot = f"{self.file}:{self.line}" if self.line else self.file
            return f"{spot} (seq {self.seq})" if self.seq is not None else spot
        return f"commit {self.commit[:12]}" if self.commit else "branch"

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "message": self.message, "file": self.file, "line": self.line,
                "seq": self.seq, "commit": self.commit}


@dataclass(frozen=True, slots=True)
class StoredEntry:
    file: str
    line: int
    entry: dict[str, Any]


@dataclass(slots=True)
class Verification:
    branch: str
    tip: str | None
    records: int = 0
    commits: int = 0
    head_seq: int = 0
    head_hash: str = GENESIS_HASH
    problems: list[Problem] = field(default_factory=list)
    entries: list[StoredEntry] = field(default_factory=list)
    absent: bool = False      # no audit branch at all: nothing to verify, which is not tampering evidence

    @property
    def ok(self) -> bool:
        return not self.problems

    @property
    def state(self) -> str:
        """``intact``, ``broken``, ``rewound`` (a sound chain lacking an anchored head) or ``absent``."""
        if self.absent or self.ok:
            return "absent" if self.absent else "intact"
        return "rewound" if all(p.kind == "rewound" for p in self.problems) else "broken"

    def summary(self) -> str:
        if self.absent:
            return (f"no audit branch {self.branch}: nothing to verify (gitopsq creates it with its first audit "
                    "record; check the repository and --branch)")
        if self.ok:
            return (f"audit branch {self.branch} intact: {self.records} records in {self.commits} commits, "
                    f"chain head {self.head_seq} sha256:{self.head_hash}")
        first = self.problems[0]
        if self.state == "rewound":
            return f"audit branch {self.branch} REWOUND: {first.message}"
        return f"audit branch {self.branch} BROKEN at {first.where()}: {first.message}"

    def to_json(self) -> dict[str, Any]:
        return {"ok": self.ok, "state": self.state, "branch": self.branch, "tip": self.tip, "records": self.records,
                "commits": self.commits, "head": {"seq": self.head_seq, "hash": self.head_hash},
                "problems": [p.to_json() for p in self.problems]}


def verify_branch(repo: pygit2.Repository, branch: str, *, since_head: str | None = None,
                  allowed_signers: str | None = None, progress: Progress | None = None,
                  anchors: Sequence[Anchor] = ()) -> Verification:
    """Verify ``branch`` of ``repo``; ``progress`` (if given) advances once per record checked. The repository's
    anchor ref is checked by itself, ``anchors`` (e.g. from the GitSource status) as well."""
    own = repository_anchor(repo, branch)
    anchors = [*([own] if own else []), *anchors]
    ref = repo.references.get(f"refs/heads/{branch}") or repo.references.get(f"refs/remotes/origin/{branch}")
    if ref is None:
        result = Verification(branch, None, absent=not anchors)
        result.problems.append(Problem("missing", f"no branch {branch!r} in the repository"))
        _check_anchors(repo, anchors, result, allowed_signers)
        return result
    tip = ref.peel(pygit2.Commit)
    result = Verification(branch, str(tip.id))
    history = Verification(branch, str(tip.id))
    stated = _check_history(repo, tip, history, allowed_signers)
    result.commits = history.commits
    _check_records(repo, tip.tree, result, stated, progress or NullProgress())
    if not result.problems:  # a broken chain already explains a head mismatch
        _check_head(repo, tip.tree, result)
    if since_head:
        _check_since(since_head, result)
    result.problems.extend(history.problems)  # records first: they name the first bad record
    _check_anchors(repo, anchors, result, allowed_signers)
    return result


def _on_branch(repo: pygit2.Repository, tip: str | None, commit: str) -> bool:
    return tip is not None and (tip == commit or repo.descendant_of(tip, commit))


def _check_anchors(repo: pygit2.Repository, anchors: Sequence[Anchor], result: Verification,
                   allowed_signers: str | None) -> None:
    """Every anchored head must be in the chain; a missing branch with an anchor was deleted, i.e. rewound."""
    held = {s.entry["seq"]: s.entry["hash"] for s in result.entries}
    recovery = recovery_refs(repo)
    kept = f"; the writer's records since are on {', '.join(recovery)}" if recovery else ""
    for anchor in anchors:
        if allowed_signers and anchor.commit and anchor.source.startswith("refs/") and anchor.commit in repo \
                and not _on_branch(repo, result.tip, anchor.commit):  # the branch's own commits are checked
            _check_signature(repo, repo[anchor.commit].peel(pygit2.Commit), allowed_signers, result)
        if anchor.seq == 0 or held.get(anchor.seq) == anchor.hash:
            continue
        where = f" (commit {anchor.commit[:12]})" if anchor.commit else ""
        ends = f"the branch ends at {result.head_seq} sha256:{result.head_hash[:12]}…" if result.tip else \
            "the branch is gone"
        result.problems.append(Problem("rewound", f"{anchor.source} names chain head {anchor.seq} "
                                       f"sha256:{anchor.hash}{where}, which the branch no longer holds ({ends}): "
                                       f"it was rewound or rewritten{kept}", commit=anchor.commit))
    if result.tip is None and result.problems[1:]:
        result.problems.pop(0)  # a deleted branch with an anchor: the rewind says it all


def _records_files(repo: pygit2.Repository, tree: pygit2.Tree, result: Verification) -> list[tuple[int, str, bytes]]:
    files: list[tuple[int, str, bytes]] = []

    def walk(subtree: pygit2.Tree, prefix: str) -> None:
        for item in subtree:
            path = f"{prefix}/{item.name}"
            if item.type_str == "tree":
                walk(repo[item.id].peel(pygit2.Tree), path)
                continue
            match = _FILE_NAME.match(item.name or "")
            if match is None:
                result.problems.append(Problem("misnamed", "unexpected file in the records directory", path))
                continue
            files.append((int(match[1]), path, blob_data(repo, item.id)))

    if RECORDS_DIR in tree:
        walk(repo[tree[RECORDS_DIR].id].peel(pygit2.Tree), RECORDS_DIR)
    return sorted(files)


def _parse_files(files: list[tuple[int, str, bytes]]) -> list[tuple[str, int, str, Any]]:
    """Every line as (file, line number, text, parsed JSON or None)."""
    out = []
    for _, path, data in files:
        for number, text in enumerate(data.decode("utf-8", "replace").splitlines(), start=1):
            try:
                value = json.loads(text)
            except ValueError:
                value = None
            out.append((path, number, text, value))
    return out


def _check_records(repo: pygit2.Repository, tree: pygit2.Tree, result: Verification,
                   stated: dict[int, list[tuple[str, str]]], progress: Progress) -> None:
    files = _records_files(repo, tree, result)
    lines = _parse_files(files)
    progress.start("gitopsq: verifying audit records", len(lines))
    all_seqs = {v.get("seq") for *_, v in lines if isinstance(v, dict)}
    ranges = {path: (first, int(path.rsplit("-", 1)[1].removesuffix(".jsonl"))) for first, path, _ in files}
    last_line = {path: number for path, number, _, _ in lines}
    expected, prev = 1, GENESIS_HASH
    seen: set[int] = set()
    for path, number, _text, entry in lines:
        progress.advance()
        problem = _check_line(path, number, entry, expected=expected, prev=prev, seen=seen, all_seqs=all_seqs)
        if problem is None:
            first, last = ranges[path]
            seq = entry["seq"]
            if (number == 1 and seq != first) or (number == last_line[path] and seq != last):
                problem = Problem("misnamed", f"file name says {first}-{last} but the file holds seq {seq} "
                                  f"on line {number}", path, number, seq)
            for commit, claimed in stated.get(seq, ()):
                if problem is None and claimed != entry["hash"]:
                    problem = Problem("rewritten", f"commit {commit[:12]} stated chain head {seq} "
                                      f"sha256:{claimed}, the chain now has sha256:{entry['hash']}",
                                      path, number, seq)
        if problem is not None:
            result.problems.append(problem)
            return
        result.entries.append(StoredEntry(path, number, entry))
        seen.add(entry["seq"])
        expected, prev = entry["seq"] + 1, entry["hash"]
    result.records, result.head_seq, result.head_hash = expected - 1, expected - 1, prev
    beyond = [s for s in stated if s > result.head_seq]
    if beyond:
        commit = stated[max(beyond)][0][0]
        result.problems.append(Problem("removed", f"commit {commit[:12]} stated chain head {max(beyond)} but the "
                                       f"chain ends at {result.head_seq}: records were removed", commit=commit))


def _check_line(path: str, number: int, entry: Any, *, expected: int, prev: str, seen: set[int],
                all_seqs: set[Any]) -> Problem | None:
    if not isinstance(entry, dict) or not isinstance(entry.get("seq"), int):
        return Problem("unreadable", "line is not a chained JSON record", path, number)
    seq = entry["seq"]
    if seq > expected:
        if expected in all_seqs:
            return Problem("reordered", f"expected seq {expected}, found {seq}: seq {expected} comes later, "
                           "records are out of order", path, number, seq)
        return Problem("gap", f"expected seq {expected}, found {seq}: "
                       f"{seq - expected} record(s) missing before this one", path, number, seq)
    if seq < expected:
        kind = "inserted" if seq in seen else "reordered"
        return Problem(kind, f"expected seq {expected}, found {seq} again: a record was inserted or repeated"
                       if seq in seen else f"expected seq {expected}, found {seq}: out of order", path, number, seq)
    if entry.get("prevHash") != prev:
        return Problem("chain", "prevHash does not match the previous record's hash: a record before this "
                       "one was inserted, removed or replaced", path, number, seq)
    if entry.get("hash") != entry_hash(entry):
        return Problem("edited", "content does not match its hash: the record was edited", path, number, seq)
    envelope = validate_record(entry)
    if envelope:
        return Problem("invalid", "; ".join(envelope), path, number, seq)
    return None


def _check_head(repo: pygit2.Repository, tree: pygit2.Tree, result: Verification) -> None:
    if HEAD_FILE not in tree:
        if result.records:
            result.problems.append(Problem("head", "HEAD.json is missing", HEAD_FILE))
        return
    try:
        head = json.loads(blob_data(repo, tree[HEAD_FILE].id))
        seq, digest = int(head["seq"]), str(head["hash"])
    except (ValueError, KeyError, TypeError):
        result.problems.append(Problem("head", "HEAD.json is unreadable", HEAD_FILE))
        return
    if (seq, digest) != (result.head_seq, result.head_hash):
        result.problems.append(Problem("head", f"HEAD.json says {seq} sha256:{digest}, the chain ends at "
                                       f"{result.head_seq} sha256:{result.head_hash}", HEAD_FILE))


def _check_history(repo: pygit2.Repository, tip: pygit2.Commit, result: Verification,
                   allowed_signers: str | None) -> dict[int, list[tuple[str, str]]]:
    """Append-only commits, stated heads, signatures; returns seq → [(commit, stated hash)]."""
    stated: dict[int, list[tuple[str, str]]] = {}
    for commit in first_parent_history(repo, str(tip.id)):
        result.commits += 1
        sha = str(commit.id)
        match = _STATED.search(commit.message)
        doc = read_head_json(repo, commit)
        if match is None or doc is None:
            result.problems.append(Problem("rewritten", "commit does not state a chain head: not written by "
                                           "the audit writer", commit=sha))
            continue
        seq, digest = int(match[1]), match[2]
        if (int(doc.get("seq", -1)), doc.get("hash")) != (seq, digest):
            result.problems.append(Problem("head", "commit message and HEAD.json state different chain heads",
                                           commit=sha))
        stated.setdefault(seq, []).append((sha, digest))
        diff = (commit.parents[0].tree.diff_to_tree(commit.tree) if commit.parent_ids
                else commit.tree.diff_to_tree(swap=True))
        for delta in diff.deltas:
            path = delta.new_file.path if delta.status_char() == "A" else delta.old_file.path
            if path == HEAD_FILE and delta.status_char() in "AM":
                continue
            if delta.status_char() == "A" and path.startswith(f"{RECORDS_DIR}/"):
                continue
            verb = {"M": "modified", "D": "deleted", "R": "renamed"}.get(delta.status_char(), "changed")
            result.problems.append(Problem("rewritten", f"commit {verb} {path}: audit commits only append",
                                           path, commit=sha))
        if allowed_signers:
            _check_signature(repo, commit, allowed_signers, result)
    return stated


def _check_signature(repo: pygit2.Repository, commit: pygit2.Commit, allowed_signers: str,
                     result: Verification) -> None:
    signature, payload = commit.gpg_signature
    sha = str(commit.id)
    if signature is None:
        result.problems.append(Problem("unsigned", "audit commit is not signed", commit=sha))
    elif not verify_ssh_signature(payload, signature.decode("ascii", "replace"),
                                  allowed_signers=allowed_signers, principal=commit.committer.email):
        result.problems.append(Problem("signature", f"bad or unknown signature for {commit.committer.email}",
                                       commit=sha))


def _check_since(since_head: str, result: Verification) -> None:
    text = since_head.strip().removeprefix("sha256:")
    seq_text, _, digest = text.rpartition(":")
    seq = int(seq_text) if seq_text.isdigit() else None
    for stored in result.entries:
        if stored.entry["hash"] == digest and (seq is None or stored.entry["seq"] == seq):
            return
    result.problems.append(Problem("rewritten", f"previously verified head {since_head} is not in the chain: "
                                   "the audit branch history was rewritten"))
