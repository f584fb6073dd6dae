"""Key files named by gitopsq.yaml (``signingKeyFiles``, ``keyFiles``): reading them at the configuration's own
revision, and the keys a file holds (docs/config.md "Key files").

A key file is trust material, read exactly where gitopsq.yaml is read: the same commit (or the same work tree),
through the same source, so a change can never swap the key that judges it. The reader is duck-typed over the
Source port's reads (this module never imports the Git layer). A file is refused from its size in the tree before
it is read.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

MAX_KEY_FILE_BYTES: Final = 64 * 1024  # a few armored blocks; anything larger is not a public key file
KeyFileReader = Callable[[str], bytes | None]


class KeyFileError(Exception):
    """A key file that exists but cannot be used (too large, unreadable): the message says why."""


def key_file_path_problem(path: str) -> str | None:
    """Why ``path`` cannot name a key file in the repository (absolute, ``..``, backslash, wildcard), or None."""
    if not path or path.startswith("/") or "\\" in path:
        return "must be a path relative to the repository root"
    parts = path.split("/")
    if any(p in ("", ".", "..") for p in parts):
        return "must not contain empty, '.' or '..' segments"
    if any(c in path for c in "*?["):
        return "must name one file, not a pattern"
    return None


def revision_reader(source: Any, commit: str, limit: int = MAX_KEY_FILE_BYTES) -> KeyFileReader:
    """Read repository files at ``commit`` of ``source`` (None when absent); KeyFileError beyond ``limit`` bytes.

    Only a regular file counts (a symbolic link or submodule reads as absent). The size comes from the tree entry
    when the source can tell (a Git blob's header), so an oversized file is never read; otherwise the bytes read
    are measured."""

    def read(path: str) -> bytes | None:
        entry = next((e for e in source.list_files(commit, [path], [], suffixes=None) if e.path == path), None)
        sizer = getattr(source, "blob_size", None)
        if sizer is not None:  # the listing is authoritative: links and submodules are never listed
            if entry is None:
                return None
            size = int(sizer(entry.blob_id))
            if size > limit:
                raise KeyFileError(f"it is {size:,} bytes; a key file holds at most {limit:,}")
            return bytes(source.read_blob(entry.blob_id))
        data = source.read_file(commit, path)
        if data is not None and len(data) > limit:
            raise KeyFileError(f"it is {len(data):,} bytes; a key file holds at most {limit:,}")
        return None if data is None else bytes(data)

    return read


def keys_in_file(text: str) -> list[str]:
    """The public keys a key file holds: one ASCII-armored OpenPGP block (as ``gpg --armor --export`` writes it,
    the whole file), or SSH public keys one per line (``#`` comments and blank lines skipped)."""
    stripped = text.strip()
    if stripped.startswith("-----BEGIN PGP PUBLIC KEY BLOCK-----"):
        return [stripped]
    return [line.strip() for line in stripped.splitlines() if line.strip() and not line.lstrip().startswith("#")]
