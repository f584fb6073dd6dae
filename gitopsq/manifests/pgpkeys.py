"""OpenPGP public keys as gitopsq.yaml holds them (ASCII-armored blocks): which key a block holds, without gpg.

Pure: the v4 fingerprint is SHA-1 over 0x99, the two-byte length and the body of the primary key packet
(RFC 4880 §12.2), so config checks and policies can bind a signature's fingerprint to the maintainer who lists
the block.
"""

from __future__ import annotations

import base64
import binascii
import hashlib

_BEGIN = "-----BEGIN PGP PUBLIC KEY BLOCK-----"
_END = "-----END PGP PUBLIC KEY BLOCK-----"


def is_armored_public_key(text: str) -> bool:
    return text.strip().startswith(_BEGIN)


def pgp_fingerprint(armored: str) -> str | None:
    """The upper-case v4 fingerprint of the primary key of an ASCII-armored public key block; None when the
    block is not one (or holds a key version other than 4)."""
    packet = _first_packet(_dearmor(armored))
    if packet is None:
        return None
    tag, body = packet
    if tag != 6 or not body or body[0] != 4:
        return None
    return hashlib.sha1(b"\x99" + len(body).to_bytes(2, "big") + body, usedforsecurity=False).hexdigest().upper()


def _dearmor(text: str) -> bytes:
    lines = text.strip().splitlines()
    if not lines or lines[0].strip() != _BEGIN:
        return b""
    body: list[str] = []
    in_headers = True
    for raw in lines[1:]:
        line = raw.strip()
        if line == _END:
            break
        if in_headers:
            if not line:
                in_headers = False
            elif ":" not in line:  # no armor headers at all: this is data already
                in_headers = False
                body.append(line)
            continue
        if line.startswith("="):  # the CRC-24 checksum line
            break
        body.append(line)
    try:
        return base64.b64decode("".join(body), validate=True)
    except (binascii.Error, ValueError):
        return b""


def _first_packet(data: bytes) -> tuple[int, bytes] | None:
    if len(data) < 2 or not data[0] & 0x80:
        return None
    head = data[0]
    if head & 0x40:  # new-format packet header
        tag, first = head & 0x3F, data[1]
        if first < 192:
            length, start = first, 2
        elif first < 224 and len(data) > 2:
            length, start = ((first - 192) << 8) + data[2] + 192, 3
        elif first == 255 and len(data) > 5:
            length, start = int.from_bytes(data[2:6], "big"), 6
        else:
            return None
    else:  # old format: length type in the low two bits
        tag, kind = (head >> 2) & 0x0F, head & 0x03
        size = {0: 1, 1: 2, 2: 4}.get(kind)
        if size is None or len(data) < 1 + size:
            return None
        length, start = int.from_bytes(data[1:1 + size], "big"), 1 + size
    body = data[start:start + length]
    return (tag, body) if len(body) == length else None
