"""Builds a corpus case into a real Git repository: the valid base repository, then the case's overlay.

A case is a directory ``tests/corpus/<case>/`` holding ``files/`` (laid over ``_base/``) and ``expect.yaml``:

    description: what is broken
    delete: [gitopsq.yaml]                            # optional: base files to remove
    generate: {path: queues/deep.yaml, content: deep} # optional: content too large or odd to keep as a file
    findings:                                         # each must appear in `gitopsq check`'s text output
      - {code: duplicate-key, file: queues/dup.yaml, line: 5, message: appears twice}
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pygit2
import yaml

CORPUS = Path(__file__).resolve().parent
BASE = CORPUS / "_base"

GENERATORS = {
    "deep": lambda: b"apiVersion: v1\nkind: Namespace\nmetadata: {name: deep}\nx: " + b"[" * 100_000
    + b"]" * 100_000 + b"\n",
    "huge": lambda: b"apiVersion: v1\nkind: Namespace\nmetadata:\n  name: huge\n  annotations:\n"
    + b"".join(b"    example.com/k%06d: value\n" % i for i in range(100_000)),
    "latin1": lambda: "apiVersion: kueue.x-k8s.io/v1beta2\nkind: WorkloadPriorityClass\nmetadata:\n  name: low\n"
    "value: 1\ndescription: Priorité basse\n".encode("latin-1"),
}


def cases() -> list[str]:
    return sorted(p.name for p in CORPUS.iterdir() if (p / "expect.yaml").is_file())


def expectation(case: str) -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load((CORPUS / case / "expect.yaml").read_text(encoding="utf-8"))
    return data


def build(case: str, target: Path) -> Path:
    """Write the case's files into ``target``, commit them on ``main``, and return ``target``."""
    expect = expectation(case)
    shutil.copytree(BASE, target)
    overlay = CORPUS / case / "files"
    if overlay.is_dir():
        shutil.copytree(overlay, target, dirs_exist_ok=True)
    for rel in expect.get("delete", []):
        (target / rel).unlink()
    generate = expect.get("generate")
    if generate:
        path = target / generate["path"]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(GENERATORS[generate["content"]]())
    repo = pygit2.init_repository(str(target), initial_head="main")
    repo.index.add_all()
    repo.index.write()
    tree = repo.index.write_tree()
    author = pygit2.Signature("Corpus", "corpus@example.com", 1_700_000_000, 0)
    repo.create_commit("refs/heads/main", author, author, f"corpus case {case}\n", tree, [])
    return target
