"""Helpers that tamper with an audit branch the way an attacker with push access could."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pygit2

from gitopsq.audit.canonical import ChainHead, canonical_json, link_all

from .conftest import BRANCH

Files = dict[str, bytes]


def read_files(repo: pygit2.Repository, tree: pygit2.Tree, prefix: str = "") -> Files:
    out: Files = {}
    for item in tree:
        path = f"{prefix}{item.name}"
        obj = repo[item.id]
        if isinstance(obj, pygit2.Tree):
            out.update(read_files(repo, obj, f"{path}/"))
        else:
            out[path] = obj.peel(pygit2.Blob).data
    return out


def write_tree(repo: pygit2.Repository, files: Files) -> pygit2.Oid:
    index = pygit2.Index()
    for path, data in files.items():
        index.add(pygit2.IndexEntry(path, repo.create_blob(data), pygit2.enums.FileMode.BLOB))
    return index.write_tree(repo)


def record_files(files: Files) -> list[str]:
    return sorted(p for p in files if p.startswith("records/"))


def commit_on_tip(remote: Path, mutate: Callable[[Files], None], *, amend: bool = False,
                  message: str | None = None) -> None:
    """Commit the mutated tip tree on top of the tip (or in its place with ``amend``) and move the branch."""
    repo = pygit2.Repository(str(remote))
    tip = repo.references[f"refs/heads/{BRANCH}"].peel(pygit2.Commit)
    files = read_files(repo, tip.tree)
    mutate(files)
    who = pygit2.Signature("mallory", "mallory@example.com")
    parents = tip.parent_ids if amend else [tip.id]
    oid = repo.create_commit(None, who, who, message or (tip.message if amend else "tidy up"),
                             write_tree(repo, files), parents)
    repo.references.create(f"refs/heads/{BRANCH}", oid, force=True)


def edit_lines(path: str, change: Callable[[list[str]], list[str]]) -> Callable[[Files], None]:
    def mutate(files: Files) -> None:
        lines = files[path].decode().splitlines()
        files[path] = ("\n".join(change(lines)) + "\n").encode()
    return mutate


def rechain(files: Files, path: str, head: ChainHead, change: Callable[[dict[str, object]], None]) -> ChainHead:
    """Edit every record of one file and recompute its chain from ``head`` (a careful forger)."""
    entries = [json.loads(line) for line in files[path].decode().splitlines()]
    for entry in entries:
        change(entry)
    rebuilt, new_head = link_all(entries, head)
    files[path] = "".join(canonical_json(e) + "\n" for e in rebuilt).encode()
    return new_head
