"""Check one revision: gitopsq.yaml, every selected file, every object, every rule → a `Report`.

`check_files` is the pure pipeline over bytes. `check_revision` runs it over any object with the `Source` port's
``read_file`` / ``list_files`` / ``read_blob`` methods (passed in; this module never imports the Git layer), so
``check``, ``render``, the sync loop and the demo share one path.

Per-file work (YAML, decoding, per-object rules) is cached by blob id, path and load settings: re-checking a
revision that changes one file parses one file. Cross-object rules run on every check; they are cheap.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Iterator, Mapping, MutableMapping, Sequence
from typing import Final, Protocol

from gitopsq import __version__
from gitopsq.api import findings
from gitopsq.api.findings import Finding
from gitopsq.errors import Location, SourceError
from gitopsq.manifests.budget_checks import budget_findings
from gitopsq.manifests.budgets import LoadedBudget
from gitopsq.manifests.check_report import LoadedObject, PassThrough, Report, sort_findings
from gitopsq.manifests.config import CONFIG_PATH, parse_config
from gitopsq.manifests.keyfiles import KeyFileReader, revision_reader
from gitopsq.manifests.kustomize_build import KustomizeRenderer, overlay_owned, overlay_roots, render_overlay
from gitopsq.manifests.kustomize_scan import KUSTOMIZATION_FILES, is_kustomization
from gitopsq.manifests.loader import FileResult, LoadSettings, load_file
from gitopsq.manifests.references import validate_revision

CACHE_VERSION: Final = f"gitopsq-{__version__}-manifests-2"


class RevisionSource(Protocol):
    """The part of gitopsq.source.Source the pipeline reads through."""

    def read_file(self, commit: str, path: str) -> bytes | None: ...

    def list_files(self, commit: str, include: Sequence[str], exclude: Sequence[str] = (), *,
                   suffixes: Sequence[str] | None = ...) -> Sequence[_Entry]: ...

    def read_blob(self, blob_id: str) -> bytes: ...


class _Entry(Protocol):
    @property
    def path(self) -> str: ...

    @property
    def blob_id(self) -> str: ...


class ParseCache(MutableMapping[str, FileResult]):
    """A bounded in-memory cache of per-file results (oldest entries leave first)."""

    def __init__(self, max_entries: int = 50_000) -> None:
        self.max_entries = max_entries
        self._data: dict[str, FileResult] = {}

    def __getitem__(self, key: str) -> FileResult:
        return self._data[key]

    def __setitem__(self, key: str, value: FileResult) -> None:
        self._data[key] = value
        while len(self._data) > self.max_entries:
            del self._data[next(iter(self._data))]

    def __delitem__(self, key: str) -> None:
        del self._data[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)


DEFAULT_CACHE: Final = ParseCache()


def git_blob_id(data: bytes) -> str:
    """The id Git gives a blob with these bytes (so caches agree with the Git source's ids)."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data, usedforsecurity=False).hexdigest()


def cache_key(blob_id: str, path: str, settings: LoadSettings) -> str:
    return f"{CACHE_VERSION}|{blob_id}|{path}|{settings.fingerprint()}"


def check_files(files: Mapping[str, bytes], config_bytes: bytes | None, *, revision: str | None = None,
                blob_ids: Mapping[str, str] | None = None,
                cache: MutableMapping[str, FileResult] | None = None,
                renderer: KustomizeRenderer | None = None, cluster: str | None = None,
                read_file: KeyFileReader | None = None) -> Report:
    """Validate a revision given as ``{path: bytes}`` plus the bytes of its gitopsq.yaml (None: missing);
    ``read_file`` reads the key files gitopsq.yaml names at that same revision.

    ``files`` may hold paths outside the include set; they are ignored, except that a kustomize overlay reads
    them (its bases). With ``blob_ids`` a cached file's bytes are never read, so ``files`` may be a lazy mapping.
    Overlays are built through ``renderer`` (docs/kustomize.md); without one they are error findings.
    ``cluster`` names a cluster of gitopsq.yaml's ``clusters:`` (docs/fleet.md): its paths, capacity and trust
    zones judge the revision, and the report's config is that cluster's view; a revision that does not declare
    it has no objects for it.
    """
    if config_bytes is None:
        missing = findings.error("config-missing", f"{CONFIG_PATH} not found at the root of the repository: every "
                                 "queue-definition repository needs one (docs/config.md)",
                                 location=Location(CONFIG_PATH, None))
        return Report(revision, None, (), (missing,))
    parsed = parse_config(config_bytes, read_file=read_file)
    config = parsed.config
    if config is None:
        return Report(revision, None, (), sort_findings(parsed.findings))
    if cluster:
        if cluster not in config.cluster_names():  # e.g. the base of a change that adds the cluster
            return Report(revision, dataclasses.replace(config, include=(), cluster=cluster), (),
                          sort_findings(parsed.findings))
        config = config.for_cluster(cluster)
    settings = LoadSettings(allow_kinds=config.allow_kinds)
    cache = DEFAULT_CACHE if cache is None else cache
    entries: list[LoadedObject] = []
    passthrough: list[PassThrough] = []
    budgets: list[LoadedBudget] = []
    problems: list[Finding] = list(parsed.findings)
    roots = overlay_roots(list(files), config.include, config.exclude, files.__getitem__) \
        if any(is_kustomization(p) for p in files) else {}
    owned = overlay_owned(roots)
    selected = sorted(p for p in files if config.selects(p) and not owned(p))
    for path in selected:
        blob = blob_ids[path] if blob_ids is not None and path in blob_ids else None
        if blob is None:
            data = files[path]
            blob = git_blob_id(data)
        key = cache_key(blob, path, settings)
        result = cache.get(key)
        if result is None:
            size = files.size(path) if isinstance(files, _LazyBlobs) else None
            if size is not None and size > settings.limits.max_bytes:  # refused from the tree, never read
                result = FileResult(path, (), (), (findings.error(
                    "file-too-large", f"file is {size:,} bytes; the limit is {settings.limits.max_bytes:,} bytes "
                    "(split it into several files)", location=Location(path, None)),))
            else:
                result = load_file(path, files[path], settings)
            cache[key] = result
        entries.extend(result.entries)
        passthrough.extend(result.passthrough)
        budgets.extend(result.budgets)
        problems.extend(result.findings)
    for chain in roots.values():
        result = render_overlay(chain, files.__getitem__,
                                lambda p: blob_ids[p] if blob_ids is not None and p in blob_ids
                                else git_blob_id(files[p]), renderer=renderer, settings=settings,
                                config=config)
        entries.extend(result.entries)
        passthrough.extend(result.passthrough)
        budgets.extend(result.budgets)
        problems.extend(result.findings)
    problems.extend(budget_findings(entries, budgets, config, validate_revision(entries, passthrough)))
    listed = sorted({*selected, *(c.kustomizations[-1] for c in roots.values() if c.kustomizations)})
    return Report(revision, config, tuple(entries), sort_findings(problems), tuple(passthrough), tuple(listed),
                  tuple(budgets))


class _LazyBlobs(Mapping[str, bytes]):
    """``{path: bytes}`` over a source; a blob is read only when the pipeline asks for it."""

    def __init__(self, source: RevisionSource, blob_ids: Mapping[str, str]) -> None:
        self._source = source
        self._ids = blob_ids

    def __getitem__(self, path: str) -> bytes:
        return self._source.read_blob(self._ids[path])

    def __iter__(self) -> Iterator[str]:
        return iter(self._ids)

    def __len__(self) -> int:
        return len(self._ids)

    def size(self, path: str) -> int | None:
        """The blob's size from the object header when the source can tell (GitSource.blob_size), else None."""
        sizer = getattr(self._source, "blob_size", None)
        if sizer is None:
            return None
        try:
            return int(sizer(self._ids[path]))
        except (SourceError, ValueError, KeyError):
            return None


def check_revision(source: RevisionSource, commit: str, *,
                   cache: MutableMapping[str, FileResult] | None = None,
                   renderer: KustomizeRenderer | None = None, cluster: str | None = None) -> Report:
    """Validate revision ``commit`` of ``source`` (resolved already), as cluster ``cluster`` sees it when given.
    Source errors propagate as SourceError."""
    config_bytes = source.read_file(commit, CONFIG_PATH)
    include, exclude = _listing_patterns(config_bytes, cluster)
    keys = revision_reader(source, commit)
    if not include:
        return check_files({}, config_bytes, revision=commit, cache=cache, cluster=cluster, read_file=keys)
    listed = source.list_files(commit, include, exclude)
    overlays = source.list_files(commit, include, exclude, suffixes=KUSTOMIZATION_FILES)
    if any(is_kustomization(entry.path) for entry in overlays):
        # An overlay's bases and patches may lie outside the include paths: list the whole tree (cached by tree).
        listed = source.list_files(commit, ("**",), (), suffixes=None)
    blob_ids = {entry.path: entry.blob_id for entry in listed}
    return check_files(_LazyBlobs(source, blob_ids), config_bytes, revision=commit, blob_ids=blob_ids,
                       cache=cache, renderer=renderer, cluster=cluster, read_file=keys)


def _listing_patterns(config_bytes: bytes | None,
                      cluster: str | None = None) -> tuple[tuple[str, ...], tuple[str, ...]]:
    if config_bytes is None:
        return (), ()
    config = parse_config(config_bytes).config
    if config is not None and cluster:
        spec = config.cluster_spec(cluster)
        return (spec.paths, config.exclude) if spec is not None else ((), ())
    return (config.include, config.exclude) if config is not None else ((), ())
