"""Benchmark the Git source: list + read a 1,000-file / 5,000-object revision, cold and warm.

Run: .venv/bin/python benchmarks/source_bench.py [--files 1000] [--objects-per-file 5]
Prints one line per measurement (median of --repeat runs). Transports: a local repository read in place,
file:// (full fetch) and git:// through `git daemon` on 127.0.0.1 (shallow fetch). "cold" starts from an empty
cache; "warm" reopens the cache and finds the revision without fetching.
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import pygit2

from gitopsq.source import open_source

QUEUE = """apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata:
  name: {name}
  namespace: team-{team}
spec:
  clusterQueue: cq-{team}
"""


def build_repository(path: Path, files: int, per_file: int) -> tuple[str, str]:
    """A bare repository with `files` YAML files of `per_file` documents each; returns (base, head) ids where
    head changes 20 files."""
    repo = pygit2.init_repository(str(path), bare=True)
    signature = pygit2.Signature("bench", "bench@example.com", 1_700_000_000, 0)

    def commit(changed: int, parents: list[pygit2.Oid], tag: str) -> pygit2.Oid:
        index = pygit2.Index()
        for i in range(files):
            team = i % 50
            docs = "---\n".join(QUEUE.format(name=f"q{i}-{d}", team=team) for d in range(per_file))
            if i < changed:
                docs += f"# {tag}\n"
            blob = repo.create_blob(docs.encode())
            index.add(pygit2.IndexEntry(f"teams/team-{team}/queues-{i}.yaml", blob, pygit2.enums.FileMode.BLOB))
        tree = index.write_tree(repo)
        return repo.create_commit("refs/heads/main", signature, signature, tag, tree, parents)

    base = commit(0, [], "base")
    head = commit(20, [base], "head")
    repo.set_head("refs/heads/main")
    # Pack the objects, as a real repository's history mostly is.
    subprocess.run(["git", "-C", str(path), "repack", "-adq"], check=True)
    return str(base), str(head)


def read_revision(repo: str, cache: Path, rev: str) -> tuple[int, int]:
    source = open_source(repo, cache_dir=cache)
    sha = source.resolve(rev)
    files = source.list_files(sha, ["teams/"])
    size = sum(len(source.read_blob(f.blob_id)) for f in files)
    return len(files), size


def timed(fn: Callable[[], object], repeat: int, setup: Callable[[], None] | None = None) -> float:
    samples = []
    for _ in range(repeat):
        if setup is not None:
            setup()
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=1000)
    parser.add_argument("--objects-per-file", type=int, default=5)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="gitopsq-bench-") as scratch:
        root = Path(scratch)
        served = root / "served"
        served.mkdir()
        bare = served / "queues.git"
        start = time.perf_counter()
        base, head = build_repository(bare, args.files, args.objects_per_file)
        print(f"built {args.files} files / {args.files * args.objects_per_file} objects in "
              f"{time.perf_counter() - start:.2f} s (cores: {os.cpu_count()})")
        port = free_port()
        daemon = subprocess.Popen(
            ["git", "daemon", "--reuseaddr", "--export-all", f"--base-path={served}", "--listen=127.0.0.1",
             f"--port={port}", str(served)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True)
        try:
            time.sleep(0.5)
            cache = root / "cache"

            def wipe() -> None:
                subprocess.run(["rm", "-rf", str(cache)], check=True)

            count, size = read_revision(str(bare), cache, "main")
            print(f"revision: {count} files, {size / 1e6:.2f} MB of YAML")
            for label, repo in (("local path", str(bare)), ("file://", bare.as_uri()),
                                ("git daemon", f"git://127.0.0.1:{port}/queues.git")):
                cold = timed(lambda repo=repo: read_revision(repo, cache, "main"), args.repeat, wipe)
                warm = timed(lambda repo=repo: read_revision(repo, cache, "main"), args.repeat)
                print(f"{label:11s} open+resolve+list+read all: cold {cold * 1000:7.1f} ms"
                      f"   warm {warm * 1000:7.1f} ms")
            source = open_source(str(bare))
            listing = timed(lambda: source.list_files(head, ["teams/"]), args.repeat)
            fresh = timed(lambda: open_source(str(bare)).list_files(head, ["teams/"]), args.repeat)
            changes = timed(lambda: open_source(str(bare)).changed_paths(base, head), args.repeat)
            print(f"list_files: {fresh * 1000:.1f} ms on a fresh source, {listing * 1000:.3f} ms memoised")
            print(f"changed_paths base→head (20 files changed): {changes * 1000:.1f} ms")
        finally:
            os.killpg(daemon.pid, signal.SIGTERM)
            daemon.wait(timeout=10)


if __name__ == "__main__":
    main()
