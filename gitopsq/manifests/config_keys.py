"""The keys of one gitopsq.yaml entry, inline and from key files (docs/config.md rules 10, 13 and 16).

An entry (a maintainer, a forge key, an approval recorder) lists keys inline (``signingKeys`` / ``keys``) and/or
names files holding them (``signingKeyFiles`` / ``keyFiles``). Both end up in one tuple of key texts, so
validation, the policies and the audit trail verify with one key map whichever way a key was given. Every problem
is a ``config-invalid-key`` finding at gitopsq.yaml's line naming the file; a file that cannot be read contributes
no key (fail closed).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from gitopsq.api.reader import FieldPath, Reader
from gitopsq.errors import GitopsqError
from gitopsq.manifests.keyfiles import KeyFileError, KeyFileReader, key_file_path_problem, keys_in_file

KeyProblem = Callable[[str], str | None]
_READ_FAILURES = (KeyFileError, GitopsqError, OSError, ValueError, KeyError, AttributeError, TypeError)


def entry_keys(r: Reader, body: Mapping[str, Any], path: FieldPath, *, inline: str, files: str,
               reader: KeyFileReader | None, problem: KeyProblem, named: list[str]) -> tuple[str, ...]:
    """The inline keys of ``body[inline]`` and those of the files ``body[files]`` names, each checked by
    ``problem``; every file path is appended to ``named`` (the platform's files, whatever its key holds)."""
    keys = list(r.string_list(body.get(inline), (*path, inline)))
    for j, key in enumerate(keys):
        why = problem(key)
        if why:
            r.error((*path, inline, j), "config-invalid-key", why)
    out = list(keys)
    for j, name in enumerate(r.string_list(body.get(files), (*path, files))):
        where = (*path, files, j)
        bad_path = key_file_path_problem(name)
        if bad_path:
            r.error(where, "config-invalid-key", f"key file {name!r} {bad_path}")
            continue
        if name not in named:
            named.append(name)
        out.extend(_file_keys(r, where, name, reader, problem))
    return tuple(out)


def _file_keys(r: Reader, where: FieldPath, name: str, reader: KeyFileReader | None,
               problem: KeyProblem) -> list[str]:
    if reader is None:
        r.error(where, "config-invalid-key", f"key file {name!r} cannot be read: gitopsq.yaml was given without "
                "the repository revision it belongs to")
        return []
    try:
        data = reader(name)
    except _READ_FAILURES as err:
        r.error(where, "config-invalid-key", f"key file {name!r} cannot be read: {err}")
        return []
    if data is None:
        r.error(where, "config-invalid-key", f"key file {name!r} does not exist at this revision (or is not a "
                "regular file)")
        return []
    try:
        text = data.decode("ascii")
    except UnicodeDecodeError:
        r.error(where, "config-invalid-key", f"key file {name!r} is not text (a binary `gpg --export`? use "
                "`gpg --armor --export`)")
        return []
    keys = keys_in_file(text)
    if not keys:
        r.error(where, "config-invalid-key", f"key file {name!r} holds no key")
        return []
    good = []
    for key in keys:
        why = problem(key)
        if why:
            r.error(where, "config-invalid-key", f"key file {name!r}: {why}")
        else:
            good.append(key)
    return good if len(good) == len(keys) else []
