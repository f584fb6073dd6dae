"""Rendered kustomize output → each object with the file and line every field was written at.

Pure. Inputs: the chain (`Scan`), the full render and one render per patch with that patch left out. Rules
(docs/kustomize.md):

1. An object's home is its ``config.kubernetes.io/origin`` file (relative to the built directory), at the
   document of the same kind whose name the rendered name contains (``namePrefix``/``nameSuffix`` only add).
2. A field is set by a patch when leaving the patch out changes or removes it; the last such patch in
   kustomize's order wins. Its place is the patch's line for that field (a strategic-merge field, a JSON 6902
   operation), or the inline patch's line inside the kustomization.
3. Otherwise a field that the home document holds with the same value is placed there; a field a
   kustomization transformer set (``namespace``, ``namePrefix``, ``labels``...) is placed at that key of the
   outermost kustomization that has it; anything else takes its nearest placed parent.
4. The origin annotation is removed from what is rendered and applied.
"""

from __future__ import annotations

import posixpath
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

import yaml

from gitopsq.api.reader import FieldPath
from gitopsq.errors import Location
from gitopsq.manifests.kustomize_patches import PatchDoc, parse_patch, patch_location
from gitopsq.manifests.kustomize_scan import PatchEntry, Scan
from gitopsq.manifests.yamldoc import YamlDocument, load_yaml

ORIGIN: Final = "config.kubernetes.io/origin"
TRANSFORMATIONS: Final = "alpha.config.kubernetes.io/transformations"
_MISSING: Final = object()
# Which kustomization keys may have written a field the home document lacks.
_TRANSFORMER_KEYS: Final = {"namespace": ("namespace",), "name": ("namePrefix", "nameSuffix"),
                            "labels": ("labels", "commonLabels"), "annotations": ("commonAnnotations",)}


@dataclass(frozen=True, slots=True)
class Located:
    """One rendered object: its data (origin removed), its home, where each field was written, its patches."""

    data: dict[str, Any]
    home: Location
    sources: dict[FieldPath, Location]
    patches: tuple[PatchEntry, ...]


def strip_origin(doc: Mapping[str, Any]) -> tuple[dict[str, Any], str | None]:
    """A copy of ``doc`` without the build-metadata annotations, and the origin annotation's text."""
    out = dict(doc)
    meta = out.get("metadata")
    if not isinstance(meta, Mapping) or not isinstance(meta.get("annotations"), Mapping):
        return out, None
    annotations = dict(meta["annotations"])
    origin = annotations.pop(ORIGIN, None)
    annotations.pop(TRANSFORMATIONS, None)
    meta = dict(meta)
    if annotations:
        meta["annotations"] = annotations
    else:
        del meta["annotations"]
    out["metadata"] = meta
    return out, origin if isinstance(origin, str) else None


def identity(doc: Mapping[str, Any]) -> tuple[str, str, str, str]:
    meta = doc.get("metadata")
    meta = meta if isinstance(meta, Mapping) else {}
    return (str(doc.get("apiVersion")), str(doc.get("kind")), str(meta.get("namespace") or ""),
            str(meta.get("name") or ""))


def locate(scan: Scan, rendered: Sequence[tuple[dict[str, Any], str | None]],
           variants: Sequence[Sequence[Mapping[str, Any]] | None], read: Callable[[str], bytes]) -> list[Located]:
    """Place every rendered object (see the module rules); ``variants[i]`` leaves out ``scan.patches[i]``
    (None: that render failed, so the patch is taken to touch every object, without field lines)."""
    homes = _Homes(scan, read)
    indexed = [None if v is None else {identity(d): d for d in v} for v in variants]
    parsed = [parse_patch(p, p.inline.encode() if p.inline is not None else _read(read, p.file))
              for p in scan.patches]
    out = []
    for data, origin in rendered:
        kind, name = str(data.get("kind")), identity(data)[3]
        home, base = homes.find(origin, kind, name)
        set_by: dict[FieldPath, int] = {}
        touched: list[int] = []
        for i, variant in enumerate(indexed):
            if variant is None:
                touched.append(i)
                continue
            other = variant.get(identity(data))
            changed = [p for p, value in _nodes(data) if _get(other, p) != value] if other is not None \
                else [p for p, _ in _nodes(data)]
            if changed:
                touched.append(i)
                set_by.update((p, i) for p in changed)
        sources: dict[FieldPath, Location] = {}
        for path, value in _nodes(data):
            sources_at = _place(path, value, set_by.get(path), base, (scan, parsed, kind, name))
            if sources_at is not None:
                sources[path] = sources_at
        out.append(Located(data, home, sources, tuple(scan.patches[i] for i in touched)))
    return out


def _place(path: FieldPath, value: Any, patch: int | None, base: YamlDocument | None,
           target: tuple[Scan, Sequence[tuple[PatchDoc, ...]], str, str]) -> Location | None:
    scan, parsed, kind, name = target
    leaf = not isinstance(value, Mapping | list) or not value
    in_base = base is not None and path in base.lines and _get(base.data, path) == value
    if patch is not None and (leaf or not (base is not None and path in base.lines)):
        return patch_location(scan.patches[patch], parsed[patch], kind, name, path)
    if in_base or (not leaf and base is not None and path in base.lines):
        assert base is not None
        return Location(base.path, base.lines[path])
    if len(path) >= 2 and path[0] == "metadata" and isinstance(path[1], str) and path[1] in _TRANSFORMER_KEYS:
        for kfile in reversed(scan.kustomizations):  # outermost first
            doc = scan.documents.get(kfile)
            for key in _TRANSFORMER_KEYS[path[1]]:
                line = doc.line_of((key,)) if doc is not None else None
                if line is not None:
                    return Location(kfile, line)
    return None


class _Homes:
    def __init__(self, scan: Scan, read: Callable[[str], bytes]) -> None:
        self.scan, self.read = scan, read
        self.files: dict[str, tuple[YamlDocument, ...]] = {}

    def find(self, origin: str | None, kind: str, name: str) -> tuple[Location, YamlDocument | None]:
        root_file = self.scan.kustomizations[-1] if self.scan.kustomizations else self.scan.root
        fields = _origin_fields(origin)
        relative = fields.get("path") if not fields.get("repo") else None
        if fields.get("configuredIn"):  # generated: its generator's kustomization
            where = posixpath.normpath(posixpath.join(self.scan.root, str(fields["configuredIn"])))
            return Location(where, None), None
        if not isinstance(relative, str):
            return Location(root_file, None), None
        path = posixpath.normpath(posixpath.join(self.scan.root, relative))
        if path not in self.files:
            self.files[path] = load_yaml(path, _read(self.read, path)).documents if path in self.scan.files else ()
        docs = [d for d in self.files[path] if isinstance(d.data, Mapping) and d.data.get("kind") == kind]
        named = [d for d in docs if (n := identity(d.data)[3]) and n in name]
        chosen = max(named, key=lambda d: len(identity(d.data)[3])) if named else (docs[0] if docs else None)
        return Location(path, chosen.line if chosen else 1), chosen


def _origin_fields(origin: str | None) -> Mapping[str, Any]:
    if not origin:
        return {}
    try:
        found = yaml.safe_load(origin)
    except yaml.YAMLError:
        return {}
    return found if isinstance(found, Mapping) else {}


def _read(read: Callable[[str], bytes], path: str | None) -> bytes:
    return read(path) if path is not None else b""


def _nodes(value: Any, path: FieldPath = ()) -> Iterator[tuple[FieldPath, Any]]:
    """Every node below the document root, parents before children."""
    if isinstance(value, Mapping):
        for key, item in value.items():
            step = (*path, str(key))
            yield step, item
            yield from _nodes(item, step)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            step = (*path, index)
            yield step, item
            yield from _nodes(item, step)


def _get(value: Any, path: FieldPath) -> Any:
    for step in path:
        if isinstance(step, int):
            if not isinstance(value, list) or step >= len(value):
                return _MISSING
            value = value[step]
        else:
            if not isinstance(value, Mapping) or step not in value:
                return _MISSING
            value = value[step]
    return value
