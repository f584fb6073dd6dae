"""`gitopsq check REPO [--rev REV] [--output text|json]` (docs/check.md).

The shell around `gitopsq.manifests.check_revision`: open the repository through gitopsq.source, keep parsed
files on disk between runs (keyed by blob id, path and gitopsq version), print findings grouped by file.
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import hashlib
import json
import marshal
import os
import pickle
import tempfile
from collections.abc import Iterator, Mapping, MutableMapping
from pathlib import Path
from typing import Any, ClassVar

import click

from gitopsq.commands.repo import locate, warn_if_dirty, why_plain
from gitopsq.commands.review import ReviewTarget, read_reviews, review_options, review_target
from gitopsq.errors import EXIT_OK, EXIT_REJECTED, SourceError, UsageError
from gitopsq.manifests import DEFAULT_CACHE, FileResult, LoadedObject, Report
from gitopsq.manifests.pipeline import CACHE_VERSION
from gitopsq.progress import CountingCache, for_stderr

NOTE_PLAIN_DIRECTORY = ("note: {why}; checking the files on disk as revision WORKTREE (commit them to check what "
                        "the controller will see)")


def _construct(cls: type, fields: dict[str, Any]) -> Any:
    return cls(**fields)


class _MarshalledLines(Mapping[Any, int]):
    """An object's field-line index, kept as marshal bytes until a finding needs a line (most checks: never)."""

    __slots__ = ("_blob", "_data")

    def __init__(self, blob: bytes) -> None:
        self._blob = blob
        self._data: dict[Any, int] | None = None

    def _lines(self) -> dict[Any, int]:
        if self._data is None:
            self._data = marshal.loads(self._blob)
        return self._data

    def __getitem__(self, key: Any) -> int:
        return self._lines()[key]

    def __iter__(self) -> Iterator[Any]:
        return iter(self._lines())

    def __len__(self) -> int:
        return len(self._lines())

    def __reduce__(self) -> tuple[Any, ...]:
        return _MarshalledLines, (self._blob,)


class _FastPickler(pickle.Pickler):
    """Pickles slotted dataclasses as a call of the class with their fields: unpickling them runs the generated
    ``__init__``, several times faster than the dataclasses module's generic ``__setstate__``."""

    _fields: ClassVar[dict[type, tuple[str, ...]]] = {}

    def reducer_override(self, obj: Any) -> Any:
        cls = type(obj)
        names = self._fields.get(cls)
        if names is None:
            if not (dataclasses.is_dataclass(obj) and not isinstance(obj, type) and hasattr(cls, "__slots__")
                    and all(f.init for f in dataclasses.fields(obj))):
                return NotImplemented
            names = tuple(f.name for f in dataclasses.fields(obj))
            self._fields[cls] = names
        fields = {n: getattr(obj, n) for n in names}
        if cls is LoadedObject and not isinstance(obj.lines, _MarshalledLines):
            fields["lines"] = _MarshalledLines(marshal.dumps(dict(obj.lines)))
        return _construct, (cls, fields)


_IN_MEMORY: set[Path] = set()  # disk caches whose entries this process holds in DEFAULT_CACHE


class DiskCache(MutableMapping[str, FileResult]):
    """Parsed files of one repository, in memory (the process-wide cache) and on disk under the source cache.

    The disk file is a sequence of pickle frames: a header, a compacted frame, then one frame per later check
    that parsed something new, so a warm check appends one small frame instead of rewriting every object. It is
    compacted (rewritten with only the entries the latest check used) when the appended frames pile up. The disk
    file is read only on the first miss in memory. A damaged or foreign file is ignored and replaced.
    """

    MAX_FRAMES = 24

    def __init__(self, path: Path | None, memory: MutableMapping[str, FileResult] | None = None) -> None:
        self.path = path
        self.memory: MutableMapping[str, FileResult] = DEFAULT_CACHE if memory is None else memory
        self._loaded: dict[str, FileResult] | None = None
        self._frames = 0
        self.used: dict[str, FileResult] = {}
        self.new: dict[str, FileResult] = {}

    @property
    def loaded(self) -> dict[str, FileResult]:
        if self._loaded is None:
            self._loaded = {}
            # Once read (or written) by this process, its entries are in memory already.
            if self.path is not None and self.path not in _IN_MEMORY and self.path.is_file():
                self._read(self.path)
                _IN_MEMORY.add(self.path)
        return self._loaded

    def _read(self, path: Path) -> None:
        assert self._loaded is not None
        collecting = gc.isenabled()
        gc.disable()  # unpickling builds many small objects: no cycle collection passes meanwhile
        try:
            with contextlib.suppress(Exception), path.open("rb") as handle:  # unreadable: as good as none
                if pickle.load(handle) != CACHE_VERSION:
                    return
                while True:
                    try:
                        frame = pickle.load(handle)
                    except EOFError:
                        break
                    self._loaded.update(frame)
                    self._frames += 1
        finally:
            if collecting:
                gc.enable()

    def __getitem__(self, key: str) -> FileResult:
        value = self.memory.get(key)
        if value is None:
            value = self.loaded[key]
            self.memory[key] = value
        self.used[key] = value
        return value

    def __setitem__(self, key: str, value: FileResult) -> None:
        self.used[key] = value
        self.memory[key] = value
        self.new[key] = value

    def __delitem__(self, key: str) -> None:
        for store in (self.used, self.memory, self.loaded, self.new):
            store.pop(key, None)

    def __iter__(self) -> Iterator[str]:
        return iter({**self.loaded, **self.used})

    def __len__(self) -> int:
        return len({**self.loaded, **self.used})

    def save(self) -> None:
        """Append what this check parsed; compact when the file holds too many frames or was unreadable."""
        if self.path is None or not self.new:
            return
        with contextlib.suppress(OSError):
            loaded = self.loaded
            if loaded and self._frames < self.MAX_FRAMES:
                with self.path.open("ab") as handle:
                    _FastPickler(handle, protocol=pickle.HIGHEST_PROTOCOL).dump(self.new)
                return
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=".parsed-", dir=self.path.parent)
            with os.fdopen(fd, "wb") as handle:
                pickle.dump(CACHE_VERSION, handle)
                _FastPickler(handle, protocol=pickle.HIGHEST_PROTOCOL).dump(self.used)
            Path(tmp).replace(self.path)
            _IN_MEMORY.add(self.path)


def cache_file(display: str) -> Path | None:
    """Where the parsed-file cache of repository ``display`` lives (under the Git source's cache root)."""
    # Imported on use for CLI start-up time: gitopsq.source loads pygit2, not needed for --help.
    from gitopsq.source.cache import cache_root

    try:
        root = cache_root()
    except (OSError, RuntimeError):
        return None
    digest = hashlib.sha256(display.encode()).hexdigest()[:32]
    return root / "parsed" / f"{digest}.pickle"


def load_report(repo: str, rev: str, *, worktree: bool = False, use_cache: bool = True,
                base: str | None = None, cluster: str | None = None,
                review: ReviewTarget | None = None) -> tuple[Report, str]:
    """Check REPO at REV and judge it with the CEL policies (gitopsq.validation, the path every caller shares);
    returns the report and how to name the repository. Source failures raise SourceError.

    Policies judge the change since ``base`` (a branch, tag or commit), by default the change REV itself brings
    (against its first parent); a root commit or a plain directory is judged whole. A repository declaring
    several clusters needs ``cluster`` (UsageError listing them otherwise; `load_reports` judges them all).
    ``review`` names the pull request whose approvals at REV count (gitopsq.commands.review).
    """
    reports, display = load_reports(repo, rev, worktree=worktree, use_cache=use_cache, base=base, cluster=cluster,
                                    single=True, review=review)
    return reports[0][1], display


def load_reports(repo: str, rev: str, *, worktree: bool = False, use_cache: bool = True, base: str | None = None,
                 cluster: str | None = None, single: bool = False,
                 review: ReviewTarget | None = None) -> tuple[list[tuple[str, Report]], str]:
    """`load_report` for every cluster judged (docs/fleet.md): ``[(cluster name, report)]`` in gitopsq.yaml's
    order, one ``("", report)`` for a repository without clusters; ``single`` requires one cluster."""
    # Imported on use for CLI start-up time: pygit2 and the policy stack wait until a check runs.
    from gitopsq.commands.clusters import choose, declared_clusters
    from gitopsq.commands.policy import backend_from_env
    from gitopsq.source import DirectorySource, open_any, open_directory
    from gitopsq.validation import refused_trees, validate_revision

    repo = locate(repo)  # from a subdirectory: its repository's root, as git does
    source = open_directory(repo) if worktree else open_any(repo)
    if isinstance(source, DirectorySource) and not worktree:
        click.echo(NOTE_PLAIN_DIRECTORY.format(why=why_plain(repo)), err=True)
    commit = source.resolve(rev)
    refused = refused_trees(source, commit)
    if refused:  # a tree Git would refuse is not read at all, not even its gitopsq.yaml
        return [("", Report(commit, None, (), tuple(refused)))], source.display
    names = choose(declared_clusters(source, commit), cluster)
    if single and len(names) > 1:
        raise UsageError(f"{repo} declares {len(names)} clusters in gitopsq.yaml ({', '.join(names)}): choose one "
                         "with --cluster NAME")
    if not isinstance(source, DirectorySource):
        warn_if_dirty(repo, source.display, commit, _head(source))
    cache = DiskCache(cache_file(str(Path(repo).resolve()) if Path(repo).exists() else source.display)
                      if use_cache else None)
    base_sha: str | bool = source.resolve(base) if base is not None else True
    reviews = read_reviews(review, commit) if review is not None else None
    progress = for_stderr()
    progress.start("gitopsq: reading files")
    reports = []
    try:
        for name in names:
            reports.append((name, validate_revision(
                source, commit, base=base_sha, cache=CountingCache(cache, progress), backend=backend_from_env(),
                cluster=name or None, review_approvals=reviews).report))
    finally:
        progress.done()
    cache.save()
    return reports, source.display


def _head(source: Any) -> str | None:
    try:
        head: str = source.resolve("HEAD")
    except SourceError:
        return None
    return head


def format_text(report: Report, display: str, cluster: str = "") -> str:
    """Findings grouped by file (a blank line between files), then one summary line (naming ``cluster``)."""
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
    where = f"{display} at {_short(report.revision)}" + (f" (cluster {cluster})" if cluster else "")
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


def report_json(report: Report, display: str, cluster: str = "") -> dict[str, Any]:
    return {"repository": display, **report.to_json(), **({"cluster": cluster} if cluster else {})}


def format_clusters(reports: list[tuple[str, Report]], display: str) -> str:
    """Each cluster's findings and summary (`format_text`), then a line over all of them when there are several."""
    if len(reports) == 1:
        return format_text(reports[0][1], display, reports[0][0])
    parts = [f"── cluster {name} ──\n" + format_text(report, display, name) for name, report in reports]
    bad = [name for name, report in reports if not report.ok]
    last = (f"✗ {len(bad)} of {len(reports)} clusters rejected: {', '.join(bad)}" if bad
            else f"✓ all {len(reports)} clusters valid: {', '.join(n for n, _ in reports)}")
    return "\n\n".join([*parts, last])


def clusters_json(reports: list[tuple[str, Report]], display: str) -> dict[str, Any]:
    """One cluster: `report_json`; several: ``{repository, ok, clusters: [report_json…]}`` (docs/check.md)."""
    if len(reports) == 1:
        return report_json(reports[0][1], display, reports[0][0])
    return {"repository": display, "ok": all(r.ok for _, r in reports),
            "clusters": [report_json(r, display, name) for name, r in reports]}


@click.command(name="check")
@click.argument("repo")
@click.option("--rev", default="HEAD", show_default=True, help="Branch, tag or commit to check.")
@click.option("--output", "-o", type=click.Choice(["text", "json"]), default="text", show_default=True)
@click.option("--base", default=None, help="Judge the changes since this revision with the policies "
              "(default: the change REV itself brings, against its first parent).")
@click.option("--worktree", is_flag=True, help="Check the files on disk in REPO (a directory), not a commit.")
@click.option("--no-cache", is_flag=True, help="Parse every file again instead of reusing earlier results.")
@click.option("--cluster", metavar="NAME", help="Judge only this cluster of gitopsq.yaml (default: every one).")
@review_options
@click.pass_context
def command(ctx: click.Context, *, repo: str, rev: str, base: str | None, output: str, worktree: bool,
            no_cache: bool, cluster: str | None, forge: str | None = None, forge_url: str | None = None,
            forge_repo: str | None = None, forge_token_file: str | None = None, pr: int | None = None) -> None:
    """Validate REPO at REV: gitopsq.yaml, YAML, Kueue's schema and rules, references, signatures, CEL policies.

    REPO is a local path (Git repository or plain directory; a subdirectory stands for its repository, as in
    git) or a URL. A Git repository's commit is checked, not its uncommitted files (a note names them; add
    --worktree for the files on disk). Exit 0 when there is no error (warnings allowed), 1 when there is, 2 for
    a usage error, 3 when the repository or revision cannot be read. A repository declaring clusters is
    judged cluster by cluster (docs/fleet.md); exit 1 when any is rejected.
    """
    review = review_target(forge=forge, url=forge_url, slug=forge_repo, pr=pr, token_file=forge_token_file)
    if review is not None and worktree:
        raise UsageError("--pr judges a pull request's commits; the files on disk (--worktree) have none")
    reports, display = load_reports(repo, rev, worktree=worktree, use_cache=not no_cache, base=base,
                                    cluster=cluster, review=review)
    if output == "json":
        click.echo(json.dumps(clusters_json(reports, display), indent=2, ensure_ascii=False))
    else:
        click.echo(format_clusters(reports, display))
    ctx.exit(EXIT_OK if all(r.ok for _, r in reports) else EXIT_REJECTED)
