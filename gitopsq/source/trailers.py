"""Parse the trailer block of a commit message (``Reviewed-by: …``), the way `git interpret-trailers` reads it.

Rules kept from git: the trailer block is the last paragraph, never the subject paragraph; each line is
``Token: value`` with a token of letters, digits and hyphens; a line starting with whitespace continues the
previous value; comment lines (``#``) are ignored. A paragraph with any other line is not a trailer block.
"""

from __future__ import annotations

import re

from gitopsq.source.facts import Trailer

_TRAILER_LINE = re.compile(r"^([A-Za-z0-9][A-Za-z0-9-]*)[ \t]*:[ \t]*(.*)$")


def parse_trailers(message: str) -> tuple[Trailer, ...]:
    """The trailers of ``message`` in order; empty when it has no trailer block."""
    paragraphs = _paragraphs(message)
    if len(paragraphs) < 2:
        return ()
    found: list[tuple[str, str]] = []
    for line in paragraphs[-1]:
        if line[:1] in (" ", "\t"):
            if not found:
                return ()
            key, value = found[-1]
            found[-1] = (key, f"{value} {line.strip()}".strip())
            continue
        match = _TRAILER_LINE.match(line)
        if match is None:
            return ()
        found.append((match.group(1), match.group(2).strip()))
    return tuple(Trailer(key, value) for key, value in found)


def _paragraphs(message: str) -> list[list[str]]:
    paragraphs: list[list[str]] = []
    current: list[str] = []
    for raw in message.replace("\r\n", "\n").split("\n"):
        if raw.startswith("#"):
            continue
        if raw.strip():
            current.append(raw.rstrip())
        elif current:
            paragraphs.append(current)
            current = []
    if current:
        paragraphs.append(current)
    return paragraphs
