"""Kustomize overlays in a revision: which directories are built, and their objects located at the lines people edit.

Pure: the build itself goes through the `KustomizeRenderer` port (the real one is `gitopsq.kustomize`, which runs
the kustomize binary in a private directory). Rules (docs/kustomize.md):

1. An included directory holding a kustomization file is an *overlay root*, unless another root's chain reads it
   (then it is a base). Its files, and every file its chain reads, are not read one by one.
2. A root is scanned (`kustomize_scan`); a refused chain is never built. Otherwise it is built once, and once more
   per patch with that patch left out, to learn which fields each patch set (`kustomize_origins`).
3. Objects are decoded and validated like a file's, then placed: every finding names the base or patch line.
4. A patch may change an object only when the team owning the patch file owns the object's base file, or is
   the platform team; otherwise the revision is refused, naming the patch (``kustomize-patch-owner``).
5. Builds are cached by the blob ids of every file they read (an overlay renders once per process).
"""

from __future__ import annotations

import hashlib
import json
import posixpath
import re
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, replace
from typing import Any, Final, Protocol

from gitopsq.api import findings
from gitopsq.api.findings import Finding
from gitopsq.api.reader import FieldPath
from gitopsq.errors import Location
from gitopsq.manifests import paths
from gitopsq.manifests.check_report import LoadedObject
from gitopsq.manifests.config_model import RepoConfig
from gitopsq.manifests.kustomize_origins import Located, locate, strip_origin
from gitopsq.manifests.kustomize_scan import PatchEntry, Scan, is_kustomization, scan
from gitopsq.manifests.loader import FileResult, LoadSettings, load_documents
from gitopsq.manifests.yamldoc import YamlDocument, YamlLimits, load_yaml

MAX_TREE_BYTES: Final = 64 * 1024 * 1024       # every file one build reads
OUTPUT_LIMITS: Final = YamlLimits(max_bytes=32 * 1024 * 1024, max_lines=2_000_000, max_nodes=5_000_000)
_SENTINEL: Final = "\0kustomize"
_CACHE_SIZE: Final = 256


@dataclass(frozen=True, slots=True)
class BuildResult:
    """kustomize's standard output, or why there is none (its own error message, a limit, a missing binary)."""

    output: bytes | None
    error: str | None = None
    transient: bool = False  # a runner limit (time, output size), not the input's fault: never cached


class KustomizeRenderer(Protocol):
    """Builds one directory of a set of files (repository paths → bytes) with no network and no plugins."""

    @property
    def version(self) -> str: ...

    def build(self, files: Mapping[str, bytes], directory: str) -> BuildResult: ...


@dataclass(frozen=True, slots=True)
class Overlay:
    """One built root: its objects as a file's would be, plus which patches touched which object (rule 4)."""

    result: FileResult
    touched: tuple[tuple[str, Location, tuple[tuple[str, Location], ...]], ...] = ()
    transient: bool = False


_CACHE: dict[str, Overlay] = {}


def overlay_roots(files: Collection[str], include: tuple[str, ...], exclude: tuple[str, ...],
                  read: Callable[[str], bytes]) -> dict[str, Scan]:
    """Every overlay root (rule 1) with its scanned chain."""
    files = frozenset(files)
    candidates = sorted({posixpath.dirname(f) for f in files if is_kustomization(f)
                         and any(paths.matches(f, p) for p in include)
                         and not any(paths.matches(f, p) for p in exclude)})
    scans = {root: scan(root, files, read) for root in candidates}
    consumed = {posixpath.dirname(k) for root, s in scans.items() for k in s.kustomizations
                if posixpath.dirname(k) != root}
    return {root: s for root, s in scans.items() if root not in consumed}


def overlay_owned(roots: Mapping[str, Scan]) -> Callable[[str], bool]:
    """Whether a selected file belongs to an overlay (read by a chain, or inside a root directory)."""
    read = frozenset(f for s in roots.values() for f in s.files)
    prefixes = tuple(root + "/" for root in roots)
    everything = "" in roots
    return lambda path: everything or path in read or path.startswith(prefixes)


def render_overlay(chain: Scan, read: Callable[[str], bytes], blob_id: Callable[[str], str], *,
                   renderer: KustomizeRenderer | None, settings: LoadSettings, config: RepoConfig) -> FileResult:
    """The objects and findings of one overlay root (module rules 2 to 5)."""
    root_file = chain.kustomizations[-1] if chain.kustomizations else chain.root
    if chain.refused:
        return FileResult(root_file, (), (), chain.findings)
    if renderer is None:
        return FileResult(root_file, (), (), (findings.error(
            "kustomize-unavailable", f"{chain.root or '.'}/ is a kustomize overlay, and this command has no "
            "kustomize renderer", location=Location(root_file, None)),))
    key = "|".join((renderer.version, chain.root, settings.fingerprint(),
                    *sorted(f"{p}={blob_id(p)}" for p in chain.files)))
    key = hashlib.sha256(key.encode()).hexdigest()
    overlay = _CACHE.get(key)
    if overlay is None:
        overlay = _build(chain, read, renderer, settings, root_file)
        while len(_CACHE) >= _CACHE_SIZE:
            del _CACHE[next(iter(_CACHE))]
        if not overlay.transient:
            _CACHE[key] = overlay
    result = overlay.result
    return replace(result, findings=(*result.findings, *_ownership(overlay, config)))


def _build(chain: Scan, read: Callable[[str], bytes], renderer: KustomizeRenderer, settings: LoadSettings,
           root_file: str) -> Overlay:
    tree = {p: read(p) for p in chain.files}
    size = sum(len(b) for b in tree.values())
    if size > MAX_TREE_BYTES:
        return Overlay(FileResult(root_file, (), (), (findings.error(
            "kustomize-too-large", f"the overlay reads {size:,} bytes; the limit is {MAX_TREE_BYTES:,}",
            location=Location(root_file, None)),)))
    original = dict(tree)
    docs = {k: dict(d.data) for k, d in chain.documents.items()}
    docs[root_file] = json.loads(_with_origins(docs[root_file]))
    tree.update((k, json.dumps(d).encode()) for k, d in docs.items())
    full = _run(renderer, tree, chain.root)
    if isinstance(full, tuple):
        return Overlay(FileResult(root_file, (), (), (_placed(full[0], chain, original),)), transient=full[1])
    variants = []
    transient = False
    for patch in chain.patches:
        without = dict(tree)
        without[patch.kustomization] = _without(docs[patch.kustomization], patch)
        found = _run(renderer, without, chain.root)
        transient = transient or (isinstance(found, tuple) and found[1])
        variants.append(None if isinstance(found, tuple) else [d for d, _ in found])
    located = locate(chain, full, variants, read)
    result = _load(root_file, located, settings)
    touched = tuple((_label(item.data), item.home,
                     tuple((p.where, _patch_place(item, p)) for p in item.patches)) for item in located if item.patches)
    return Overlay(result, touched, transient)


def _run(renderer: KustomizeRenderer, tree: Mapping[str, bytes],
         root: str) -> list[tuple[dict[str, Any], str | None]] | tuple[Finding, bool]:
    """The rendered documents with their origin annotations, or (the finding, whether it may pass later)."""
    built = renderer.build(tree, root)
    if built.output is None:
        return findings.error("kustomize-failed", f"kustomize build {root or '.'} failed: {built.error}"), \
            built.transient
    parsed = load_yaml("kustomize output", built.output, OUTPUT_LIMITS)
    if parsed.findings:
        return findings.error("kustomize-failed", f"kustomize build {root or '.'} printed output that cannot be "
                              f"read: {parsed.findings[0].message}"), False
    return [strip_origin(d.data) for d in parsed.documents]


def _placed(problem: Finding, chain: Scan, tree: Mapping[str, bytes]) -> Finding:
    """kustomize's error at the kustomization line it is about, when that can be told: the entry of a patch whose
    target it names (``.../NAME.[ns]``), else a line naming a file (or directory) the message names."""
    for name in re.findall(r"/([\w.-]+?)\.\[", problem.message):
        for patch in chain.patches:
            text = patch.inline if patch.inline is not None else tree.get(patch.file or "", b"").decode(
                "utf-8", errors="replace")
            if re.search(r"name:\s*['\"]?" + re.escape(name) + r"['\"]?\s*$", text, re.MULTILINE):
                return replace(problem, location=Location(patch.kustomization, patch.line))
    for kfile in reversed(chain.kustomizations):
        lines = tree.get(kfile, b"").decode("utf-8", errors="replace").splitlines()
        for number, line in enumerate(lines, 1):
            for ref in re.findall(r"[\w./-]+\.ya?ml|[\w.-]+/", line):
                if ref.rstrip("/") and re.search(re.escape(posixpath.basename(ref.rstrip("/"))) + r"\b",
                                                 problem.message) and not line.lstrip().startswith("#"):
                    return replace(problem, location=Location(kfile, number))
    root_file = chain.kustomizations[-1] if chain.kustomizations else chain.root
    return replace(problem, location=Location(root_file, None))


def _with_origins(doc: Mapping[str, Any]) -> bytes:
    """The root kustomization asking for origin annotations (removed again from what is applied). Written as
    JSON from the checked document, so no value changes type on the way."""
    out = dict(doc)
    meta = out.get("buildMetadata")
    meta = list(meta) if isinstance(meta, list) else []
    if "originAnnotations" not in meta:
        out["buildMetadata"] = [*meta, "originAnnotations"]
    return json.dumps(out).encode()


def _without(doc: Mapping[str, Any], patch: PatchEntry) -> bytes:
    out = dict(doc)
    items = list(out.get(patch.field) or [])
    if patch.index < len(items):
        del items[patch.index]
    out[patch.field] = items
    return json.dumps(out).encode()


def _load(root_file: str, located: list[Located], settings: LoadSettings) -> FileResult:
    """Decode and validate like a file (`load_documents`), through synthetic line numbers that index ``table``."""
    table: list[Location] = []

    def number(where: Location) -> int:
        table.append(where)
        return len(table)

    documents = []
    for index, item in enumerate(located):
        lines = {path: number(where) for path, where in item.sources.items()}
        lines[()] = number(item.home)
        documents.append(YamlDocument(_SENTINEL, index, lines[()], item.data, lines))
    loaded = load_documents(_SENTINEL, documents, settings)

    def real(line: int | None) -> Location:
        return table[line - 1] if line is not None and 0 < line <= len(table) else Location(root_file, None)

    def sources(lines: Mapping[FieldPath, int]) -> dict[FieldPath, Location]:
        return {path: real(line) for path, line in lines.items()}

    entries = []
    for e in loaded.entries:
        if e.path != _SENTINEL:
            entries.append(e)
            continue
        home = real(e.line)
        entries.append(LoadedObject(e.obj, home.path, home.line or 1, e.api_version, {}, sources(e.lines),
                                    root_file))
    passthrough = [replace(p, path=real(p.line).path, line=real(p.line).line or 1, overlay=root_file)
                   if p.path == _SENTINEL else p for p in loaded.passthrough]
    budgets = [replace(b, path=real(b.line).path, line=real(b.line).line or 1,
                       lines={k: real(v).line or 1 for k, v in b.lines.items() if real(v).path == real(b.line).path},
                       sources=sources(b.lines))
               if b.path == _SENTINEL else b for b in loaded.budgets]
    problems = [replace(f, location=real(f.location.line)) if f.location and f.location.path == _SENTINEL else f
                for f in loaded.findings]
    return FileResult(root_file, tuple(entries), tuple(passthrough), tuple(problems), tuple(budgets))


def _label(data: Mapping[str, Any]) -> str:
    meta = data.get("metadata")
    name = meta.get("name") if isinstance(meta, Mapping) else None
    namespace = meta.get("namespace") if isinstance(meta, Mapping) else None
    return "/".join(str(p) for p in (data.get("kind"), namespace, name) if p)


def _patch_place(item: Located, patch: PatchEntry) -> Location:
    """The first line of ``patch`` that set a field of this object, else the patch's own entry."""
    mine = sorted((w for w in item.sources.values() if w.path == patch.where and w.line is not None),
                  key=lambda w: w.line or 0)
    if mine:
        return mine[0]
    return Location(patch.file, 1) if patch.file else Location(patch.kustomization, patch.line)


def _ownership(overlay: Overlay, config: RepoConfig) -> list[Finding]:
    out = []
    for label, home, patches in overlay.touched:
        owner = config.owner_of(home.path)
        for where, place in patches:
            patcher = config.owner_of(where)
            if patcher == owner or (patcher is not None and patcher == config.platform_team):
                continue
            out.append(findings.error(
                "kustomize-patch-owner",
                f"patch {where} ({_team(patcher)}) changes {label}, whose base {home} belongs to {_team(owner)}; "
                "a patch may change only objects its team owns (or the platform team's patches)",
                location=place))
    return out


def _team(name: str | None) -> str:
    return f"team {name}" if name else "no team"
