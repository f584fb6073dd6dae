"""Read a kustomization chain before kustomize runs: what it reads, which patches it applies, what it may not do.

Pure: takes the repository's file list and a reader of bytes. Rules (docs/kustomize.md):

1. Every reference (``resources``, ``bases``, ``components``, patch and generator files, ``crds``,
   ``configurations``, ``replacements``, ``openapi``) must name a regular file of the repository, or a directory
   of it holding a kustomization file; ``..`` may climb at most to the repository root.
2. A reference that looks remote (a URL, ``git@``, ``?ref=``, a host name) is refused: renders never use the
   network. So are ``helmCharts``/``helmGlobals``/``helmChartInflationGenerator`` and any ``generators``,
   ``transformers`` or ``validators`` (plugin configurations may run programs).
3. A refused chain is never run; each refusal is an error naming the kustomization file and line.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Callable, Collection, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Final

from gitopsq.api import findings
from gitopsq.api.findings import Finding
from gitopsq.errors import Location
from gitopsq.manifests.yamldoc import YamlDocument, load_yaml

KUSTOMIZATION_FILES: Final = ("kustomization.yaml", "kustomization.yml", "Kustomization")
MAX_CHAIN: Final = 200  # kustomization files in one chain
MAX_PATCHES: Final = 64  # patches in one chain: each costs one more build
_REFUSED: Final = {
    "helmCharts": "Helm charts are not rendered (they fetch charts and run Helm); commit the rendered manifests",
    "helmGlobals": "Helm charts are not rendered; commit the rendered manifests",
    "helmChartInflationGenerator": "Helm charts are not rendered; commit the rendered manifests",
    "generators": "generator plugins may run programs (exec or KRM functions); only built-in fields are rendered",
    "transformers": "transformer plugins may run programs (exec or KRM functions); only built-in fields are "
                    "rendered",
    "validators": "validator plugins may run programs (exec or KRM functions); only built-in fields are rendered",
}
_REMOTE = re.compile(r"^[a-z][a-z0-9+.-]*://|^git@|[?&](ref|version|submodules|timeout)=|^[^/]+\.[a-z]{2,}/",
                     re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class PatchEntry:
    """One patch of a kustomization: a file, or text written inline in the kustomization."""

    kustomization: str          # repository path of the kustomization file
    field: str                  # patches | patchesStrategicMerge | patchesJson6902
    index: int
    line: int                   # the entry's line in the kustomization
    file: str | None = None     # repository path of the patch file
    inline: str | None = None   # the patch text when written inline
    inline_line: int = 0        # the kustomization line where the inline text starts

    @property
    def where(self) -> str:
        return self.file or self.kustomization


@dataclass(frozen=True, slots=True)
class Scan:
    """A kustomization chain: its files (root first), every file it reads, its patches and refusals."""

    root: str                               # the directory kustomize builds
    kustomizations: tuple[str, ...]
    documents: Mapping[str, YamlDocument]   # kustomization file -> its parsed document
    files: tuple[str, ...]                  # every file the build reads, kustomization files included
    patches: tuple[PatchEntry, ...]         # innermost kustomization first, in the order kustomize applies them
    findings: tuple[Finding, ...]

    @property
    def refused(self) -> bool:
        return any(f.is_error for f in self.findings)


def kustomization_in(directory: str, files: Collection[str]) -> str | None:
    """The kustomization file of ``directory`` ("" is the repository root), or None."""
    for name in KUSTOMIZATION_FILES:
        path = f"{directory}/{name}" if directory else name
        if path in files:
            return path
    return None


def is_kustomization(path: str) -> bool:
    return posixpath.basename(path) in KUSTOMIZATION_FILES


def scan(root: str, files: Collection[str], read: Callable[[str], bytes]) -> Scan:
    """Walk the chain that building ``root`` reads (see the module rules)."""
    dirs = {posixpath.dirname(f) for f in files}
    state = _State(files, dirs, read)
    state.visit(root, None)
    if len(state.patches) > MAX_PATCHES:
        where = state.patches[MAX_PATCHES]
        state.refuse("kustomize-too-large", f"the chain applies {len(state.patches)} patches; the limit is "
                     f"{MAX_PATCHES} (each patch costs one more build)", where.kustomization, where.line)
    return Scan(root, tuple(state.order), state.docs, tuple(sorted(state.reads)), tuple(state.patches),
                tuple(state.problems))


class _State:
    def __init__(self, files: Collection[str], dirs: set[str], read: Callable[[str], bytes]) -> None:
        self.files, self.read = files, read
        self.dirs = dirs | {d for f in dirs for d in _parents(f)} | {""}
        self.order: list[str] = []
        self.docs: dict[str, YamlDocument] = {}
        self.reads: set[str] = set()
        self.patches: list[PatchEntry] = []
        self.problems: list[Finding] = []
        self.seen: set[str] = set()

    def refuse(self, code: str, message: str, path: str, line: int | None) -> None:
        self.problems.append(findings.error(code, message, location=Location(path, line)))

    def visit(self, directory: str, referrer: tuple[str, int | None] | None) -> None:
        kfile = kustomization_in(directory, self.files)
        if kfile is None:
            where = referrer or (directory or ".", None)
            self.refuse("kustomize-missing", f"directory {directory or '.'}/ holds no kustomization file "
                        f"({', '.join(KUSTOMIZATION_FILES)})", *where)
            return
        if kfile in self.seen:
            return
        self.seen.add(kfile)
        if len(self.seen) > MAX_CHAIN:
            self.refuse("kustomize-too-large", f"the chain reads more than {MAX_CHAIN} kustomizations", kfile, None)
            return
        loaded = load_yaml(kfile, self.read(kfile))
        self.problems.extend(loaded.findings)
        self.reads.add(kfile)
        if len(loaded.documents) != 1 or not isinstance(loaded.documents[0].data, Mapping):
            if not loaded.findings:
                self.refuse("kustomize-invalid", "a kustomization file holds exactly one mapping", kfile, None)
            return
        doc = loaded.documents[0]
        self.docs[kfile] = doc
        data: Mapping[str, Any] = doc.data
        for key, reason in _REFUSED.items():
            if data.get(key):
                self.refuse("kustomize-refused", f"{key}: {reason}", kfile, doc.line_of((key,)))
        for key in ("resources", "bases", "components"):
            for i, ref in _strings(data.get(key)):
                self.reference(doc, (key, i), ref, directories=True)
        for key in ("crds", "configurations"):
            for i, ref in _strings(data.get(key)):
                self.reference(doc, (key, i), ref, directories=False)
        for key in ("replacements",):
            for i, item in _items(data.get(key)):
                if isinstance(item.get("path"), str):
                    self.reference(doc, (key, i, "path"), item["path"], directories=False)
        if isinstance(data.get("openapi"), Mapping) and isinstance(data["openapi"].get("path"), str):
            self.reference(doc, ("openapi", "path"), data["openapi"]["path"], directories=False)
        for key in ("configMapGenerator", "secretGenerator"):
            for i, item in _items(data.get(key)):
                for sub in ("files", "envs"):
                    for j, ref in _strings(item.get(sub)):
                        self.reference(doc, (key, i, sub, j), ref.rpartition("=")[2], directories=False)
                if isinstance(item.get("env"), str):
                    self.reference(doc, (key, i, "env"), item["env"], directories=False)
        self.order.append(kfile)  # after its bases: innermost first
        self.collect_patches(doc)

    def collect_patches(self, doc: YamlDocument) -> None:
        data, kfile = doc.data, doc.path
        # kustomize's built-in order: strategic-merge patches, then `patches`, then JSON 6902 patches.
        for i, text in _strings(data.get("patchesStrategicMerge")):
            line = doc.line_of(("patchesStrategicMerge", i)) or doc.line
            if "\n" in text or ":" in text:
                self.patches.append(PatchEntry(kfile, "patchesStrategicMerge", i, line, inline=text,
                                               inline_line=line + 1 if "\n" in text else line))
            elif (path := self.reference(doc, ("patchesStrategicMerge", i), text, directories=False)):
                self.patches.append(PatchEntry(kfile, "patchesStrategicMerge", i, line, file=path))
        for key in ("patches", "patchesJson6902"):
            for i, item in _items(data.get(key)):
                line = doc.line_of((key, i)) or doc.line
                if isinstance(item.get("path"), str):
                    path = self.reference(doc, (key, i, "path"), item["path"], directories=False)
                    if path:
                        self.patches.append(PatchEntry(kfile, key, i, line, file=path))
                elif isinstance(item.get("patch"), str):
                    text = item["patch"]
                    start = doc.line_of((key, i, "patch")) or line
                    self.patches.append(PatchEntry(kfile, key, i, line, inline=text,
                                                   inline_line=start + 1 if "\n" in text else start))

    def reference(self, doc: YamlDocument, field: tuple[str | int, ...], ref: str, *, directories: bool) -> str | None:
        """The repository path ``ref`` names (recorded as read), or None after a refusal."""
        kfile, line = doc.path, doc.line_of(field) or doc.line
        target = posixpath.normpath(posixpath.join(posixpath.dirname(kfile), ref))
        target = "" if target == "." else target
        if not ref.startswith("/") and target in self.files:
            self.reads.add(target)
            return target
        if directories and not ref.startswith("/") and not target.startswith("../") and target in self.dirs:
            self.visit(target, (kfile, line))
            return target
        if _REMOTE.search(ref):
            self.refuse("kustomize-remote", f"{ref!r} is a remote resource; renders never use the network "
                        "(vendor it into the repository)", kfile, line)
            return None
        if ref.startswith("/") or target == ".." or target.startswith("../"):
            self.refuse("kustomize-outside", f"{ref!r} points outside the repository", kfile, line)
            return None
        what = "a file or a kustomization directory" if directories else "a file"
        self.refuse("kustomize-missing", f"{ref!r} is not {what} of the repository (symbolic links are not "
                    "followed)", kfile, line)
        return None


def _parents(path: str) -> Iterator[str]:
    while path:
        path = posixpath.dirname(path)
        yield path


def _strings(value: Any) -> list[tuple[int, str]]:
    return [(i, v) for i, v in enumerate(value) if isinstance(v, str)] if isinstance(value, list) else []


def _items(value: Any) -> list[tuple[int, Mapping[str, Any]]]:
    return [(i, v) for i, v in enumerate(value) if isinstance(v, Mapping)] if isinstance(value, list) else []
