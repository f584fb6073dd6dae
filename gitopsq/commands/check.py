"""`gitopsq check REPO [--rev REV] [--output text|json]` (docs/check.md).

The shell around `gitopsq.manifests.check_revision`: open the repository through gitopsq.source, keep parsed
files on disk between runs (keyed by blob id, path and gitopsq version), print findings grouped by file.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import pickle
import tempfile
from collections.abc import Iterator, MutableMapping
from pathlib import Path
from typing import Any

import click

from gitopsq.errors import EXIT_OK, EXIT_REJECTED
from gitopsq.manifests import FileResult, Report, check_revision
from gitopsq.manifests.pipeline import CACHE_VERSION

NOTE_PLAIN_DIRECTORY = ("note: {repo} is not the root of a Git repository; checking the files on disk as revision WORKTREE "
                        "(commit them to check what the controller will see)")


class DiskCache(MutableMapping[str, FileResult]):
    """Parsed files of the last revision checked in one repository, as one pickle under the source cache.

    Reading one file per run keeps a warm check cheap; only entries used by the latest check are written back,
    so the file never grows past one revision's worth. A damaged or foreign file is ignored.
    """

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self.loaded: dict[str, FileResult] = {}
        self.used: dict[str, FileResult] = {}
        self.dirty = False
        if path is not None and path.is_file():
            with contextlib.suppress(Exception):  # any unreadable cache is as good as none
                data = pickle.loads(path.read_bytes())
                if isinstance(data, dict) and data.get("version") == CACHE_VERSION:
                    self.loaded = data["entries"]

    def __getitem__(self, key: str) -> FileResult:
        value = self.used.get(key) or self.loaded[key]
        self.used[key] = value
        return value

    def __setitem__(self, key: str, value: FileResult) -> None:
        self.used[key] = value
        self.dirty = True

    def __delitem__(self, key: str) -> None:
        self.used.pop(key, None)
        self.loaded.pop(key, None)

    def __iter__(self) -> Iterator[str]:
        return iter({**self.loaded, **self.used})

    def __len__(self) -> int:
        return len({**self.loaded, **self.used})

    def save(self) -> None:
        if self.path is None or (not self.dirty and len(self.used) == len(self.loaded)):
            return
        with contextlib.suppress(OSError):
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=".parsed-", dir=self.path.parent)
            with os.fdopen(fd, "wb") as handle:
                pickle.dump({"version": CACHE_VERSION, "entries": self.used}, handle, protocol=pickle.HIGHEST_PROTOCOL)
            Path(tmp).replace(self.path)


def cache_file(display: str) -> Path | None:
    """Where the parsed-file cache of repository ``display`` lives (under the Git source's cache root)."""
    from gitopsq.source.cache import cache_root

    try:
        root = cache_root()
    except (OSError, RuntimeError):
        return None
    digest = hashlib.sha256(display.encode()).hexdigest()[:32]
    return root / "parsed" / f"{digest}.pickle"


def load_report(repo: str, rev: str, *, worktree: bool = False, use_cache: bool = True) -> tuple[Report, str]:
    """Check REPO at REV; returns the report and how to name the repository. Source failures raise SourceError."""
    from gitopsq.source import DirectorySource, open_any, open_directory

    source = open_directory(repo) if worktree else open_any(repo)
    if isinstance(source, DirectorySource) and not worktree:
        click.echo(NOTE_PLAIN_DIRECTORY.format(repo=repo), err=True)
    commit = source.resolve(rev)
    cache = DiskCache(cache_file(str(Path(repo).resolve()) if Path(repo).exists() else source.display)
                      if use_cache else None)
    report = check_revision(source, commit, cache=cache)
    cache.save()
    return report, source.display


def format_text(report: Report, display: str) -> str:
    """Findings grouped by file (a blank line between files), then one summary line."""
    lines: list[str] = []
    previous: str | None = None
    for finding in report.findings:
        path = finding.location.path if finding.location else ""
        if previous is not None and path != previous:
            lines.append("")
        previous = path
        lines.append(str(finding))
    errors, warnings = len(report.errors), len(report.warnings)
    objects = len(report.entries) + len(report.passthrough)
    where = f"{display} at {_short(report.revision)}"
    counted = f"{objects} object{'s' * (objects != 1)} in {len(report.files)} file{'s' * (len(report.files) != 1)}"
    if errors:
        summary = (f"✗ {where}: {errors} error{'s' * (errors != 1)}, {warnings} warning{'s' * (warnings != 1)} "
                   f"({counted})")
    else:
        tail = f", {warnings} warning{'s' * (warnings != 1)}" if warnings else ""
        summary = f"✓ {where}: {counted} valid{tail}"
    if lines:
        lines.append("")
    lines.append(summary)
    return "\n".join(lines)


def _short(revision: str | None) -> str:
    if revision is None:
        return "?"
    return revision[:12] if len(revision) == 40 else revision


def report_json(report: Report, display: str) -> dict[str, Any]:
    return {"repository": display, **report.to_json()}


@click.command(name="check")
@click.argument("repo")
@click.option("--rev", default="HEAD", show_default=True, help="Branch, tag or commit to check.")
@click.option("--output", "-o", type=click.Choice(["text", "json"]), default="text", show_default=True)
@click.option("--worktree", is_flag=True, help="Check the files on disk in REPO (a directory), not a commit.")
@click.option("--no-cache", is_flag=True, help="Parse every file again instead of reusing earlier results.")
@click.pass_context
def command(ctx: click.Context, *, repo: str, rev: str, output: str, worktree: bool, no_cache: bool) -> None:
    """Validate REPO at REV: gitopsq.yaml, YAML, Kueue's schema and rules, references.

    REPO is a local path (Git repository or plain directory) or a URL. Exit 0 when there is no error (warnings
    allowed), 1 when there is, 2 for a usage error, 3 when the repository or revision cannot be read.
    """
    report, display = load_report(repo, rev, worktree=worktree, use_cache=not no_cache)
    if output == "json":
        click.echo(json.dumps(report_json(report, display), indent=2, ensure_ascii=False))
    else:
        click.echo(format_text(report, display))
    ctx.exit(EXIT_OK if report.ok else EXIT_REJECTED)
