"""Canonical JSON, record hashing and the hash chain (pure).

A chained entry is a record (a JSON object) plus three fields: ``seq`` (1, 2, 3, …), ``prevHash`` (the hash of
entry ``seq - 1``, or 64 zeros for the first) and ``hash``::

    hash = sha256_hex( prevHash + canonical(entry without "hash") )

``canonical`` is JSON with sorted keys, no spaces, UTF-8, no NaN: the same object always hashes the same.
Because ``seq`` and ``prevHash`` are inside the hashed text, editing, dropping, inserting or reordering any entry
breaks the chain at that entry.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

GENESIS_HASH = "0" * 64


def canonical_json(value: Any) -> str:
    """The one serialisation used for hashing and storage: sorted keys, no whitespace, no NaN."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def canonical_bytes(value: Any) -> bytes:
    return canonical_json(value).encode("utf-8")


def sha256_hex(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def entry_hash(entry: Mapping[str, Any]) -> str:
    """The hash an entry must carry: over its prevHash and its canonical form without ``hash``."""
    body = {k: v for k, v in entry.items() if k != "hash"}
    return sha256_hex(str(entry.get("prevHash", "")) + canonical_json(body))


@dataclass(frozen=True, slots=True)
class ChainHead:
    """The last link of a chain: its seq (0 for an empty chain) and hash."""

    seq: int = 0
    hash: str = GENESIS_HASH

    def to_json(self) -> dict[str, Any]:
        return {"seq": self.seq, "hash": self.hash}


def link(record: Mapping[str, Any], head: ChainHead) -> tuple[dict[str, Any], ChainHead]:
    """Chain one record after ``head``; returns the stored entry and the new head."""
    entry = {k: v for k, v in record.items() if k not in ("seq", "prevHash", "hash")}
    entry["seq"] = head.seq + 1
    entry["prevHash"] = head.hash
    digest = entry_hash(entry)
    entry["hash"] = digest
    return entry, ChainHead(head.seq + 1, digest)


def link_all(records: Sequence[Mapping[str, Any]], head: ChainHead) -> tuple[list[dict[str, Any]], ChainHead]:
    """Chain records in order after ``head``."""
    out = []
    for record in records:
        entry, head = link(record, head)
        out.append(entry)
    return out, head
