"""Where inside a patch a field was set: the line of a strategic-merge patch's field or of a JSON 6902 operation.

Pure. Patches are parsed once per file (or inline text) into ``(data, {field path: line})`` per document, with
lines counted in the file a person edits: an inline patch's lines are offset to its kustomization file.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import yaml

from gitopsq.api.reader import FieldPath
from gitopsq.errors import Location
from gitopsq.manifests.kustomize_scan import PatchEntry
from gitopsq.manifests.yamldoc import YamlLimits, load_yaml

_Loader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@dataclass(frozen=True, slots=True)
class PatchDoc:
    data: Any
    lines: Mapping[FieldPath, int]


def parse_patch(entry: PatchEntry, text: bytes) -> tuple[PatchDoc, ...]:
    """The documents of a patch with their field lines (nothing when the text is not safe, plain YAML)."""
    path = entry.file or entry.kustomization
    # The same size, depth and alias limits as any file (a mapping-only reader: lists are fine here).
    checked = load_yaml(path, text, YamlLimits())
    if any(f.code not in ("not-a-mapping",) for f in checked.findings):
        return ()
    offset = entry.inline_line - 1 if entry.file is None else 0
    out = []
    try:
        for node in yaml.compose_all(text.decode("utf-8-sig"), Loader=_Loader):
            if node is None:
                continue
            lines: dict[FieldPath, int] = {}
            out.append(PatchDoc(_walk(node, (), lines, offset), lines))
    except (yaml.YAMLError, UnicodeDecodeError, RecursionError):
        return ()
    return tuple(out)


def _walk(node: yaml.Node, path: FieldPath, lines: dict[FieldPath, int], offset: int) -> Any:
    lines[path] = node.start_mark.line + 1 + offset
    if isinstance(node, yaml.MappingNode):
        out: dict[Any, Any] = {}
        for key, value in node.value:
            name = str(key.value) if isinstance(key, yaml.ScalarNode) else "?"
            out[name] = _walk(value, (*path, name), lines, offset)
            lines[(*path, name)] = key.start_mark.line + 1 + offset
        return out
    if isinstance(node, yaml.SequenceNode):
        return [_walk(item, (*path, i), lines, offset) for i, item in enumerate(node.value)]
    return node.value


def pointer(text: str) -> FieldPath:
    """A JSON pointer (``/spec/resourceGroups/0``) as a field path."""
    out: list[str | int] = []
    for raw in text.split("/")[1:]:
        part = raw.replace("~1", "/").replace("~0", "~")
        out.append(int(part) if part.isdigit() else part)
    return tuple(out)


def patch_location(entry: PatchEntry, docs: tuple[PatchDoc, ...], kind: str, name: str,
                   field_path: FieldPath) -> Location:
    """The file and line in the patch that set ``field_path`` of object ``kind``/``name`` (its nearest part)."""
    where = entry.file or entry.kustomization
    fallback = Location(where, entry.inline_line if entry.file is None else 1)
    if entry.file is None and entry.inline is None:
        return Location(entry.kustomization, entry.line)
    for doc in docs:
        if isinstance(doc.data, list):  # JSON 6902 operations
            return _operation_line(where, doc, field_path) or fallback
    chosen = _smp_doc(docs, kind, name)
    if chosen is None:
        return fallback
    probe = field_path
    while probe:
        line = chosen.lines.get(probe)
        if line is not None:
            return Location(where, line)
        probe = probe[:-1]
    return Location(where, chosen.lines.get((), fallback.line))


def _smp_doc(docs: tuple[PatchDoc, ...], kind: str, name: str) -> PatchDoc | None:
    mappings = [d for d in docs if isinstance(d.data, Mapping)]
    for doc in mappings:
        meta = doc.data.get("metadata")
        doc_name = meta.get("name") if isinstance(meta, Mapping) else None
        if doc.data.get("kind") == kind and isinstance(doc_name, str) and doc_name and doc_name in name:
            return doc
    same_kind = [d for d in mappings if d.data.get("kind") == kind]
    chosen = same_kind or mappings
    return chosen[0] if chosen else None


def _operation_line(where: str, doc: PatchDoc, field_path: FieldPath) -> Location | None:
    best: tuple[int, int] | None = None
    for i, op in enumerate(doc.data):
        if not isinstance(op, Mapping) or not isinstance(op.get("path"), str):
            continue
        target = pointer(op["path"])
        if field_path[: len(target)] == target:  # the operation wrote this field or a parent of it
            rest = field_path[len(target):]
            probe: FieldPath = (i, "value", *rest)
            while len(probe) > 2 and probe not in doc.lines:
                probe = probe[:-1]
            line = doc.lines.get(probe) or doc.lines.get((i,))
            if line is not None and (best is None or len(target) >= best[0]):
                best = (len(target), line)
        elif target[: len(field_path)] == field_path and best is None:
            best = (0, doc.lines.get((i,), 1))
    return Location(where, best[1]) if best else None
