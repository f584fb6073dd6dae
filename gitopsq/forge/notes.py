"""Approvals recorded in the repository itself: a signed git note on the merged commit (docs/audit.md "Approvals
recorded in the repository").

When a pull request is merged, the PR workflow (`gitopsq approvals record`) asks the forge for its standing
approvals and writes them as a note under ``refs/notes/gitopsq/approvals`` on the merge or squash commit: one
line of canonical JSON (forge, repository, PR, the commit it is about, when it was recorded, and each approval:
login, e-mail when the forge showed it, the commit approved, the time) followed by an SSH signature of that line
(``ssh-keygen -Y sign``, namespace ``gitopsq-approvals``) made with the recorder's key. The note names the commit
it describes, so it cannot be moved to another one.

A note counts only when its signature verifies with a key gitopsq.yaml declares under ``approvalRecorders`` (the
trusted revision's) and it names the commit it hangs on; anything else — unsigned, edited, signed by another key,
moved, unparseable — counts for nothing, and the reason is reported (`NoteVerdict`).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gitopsq.errors import RuntimeFailure

NOTES_REF = "refs/notes/gitopsq/approvals"
NAMESPACE = "gitopsq-approvals"
KIND = "gitopsq-approvals"
MAX_NOTE_BYTES = 256 * 1024
_SIG_BEGIN = "-----BEGIN SSH SIGNATURE-----"
TIMEOUT = 30.0


class NoteError(RuntimeFailure):
    """Signing failed (no ssh-keygen, an unusable key): the message says why (exit 3, one line)."""


@dataclass(frozen=True, slots=True)
class NoteVerdict:
    """What a note on ``commit`` is worth: ``state`` ``verified`` (``recorder`` signed it; ``payload`` holds the
    approvals) or ``absent``, ``unsigned``, ``malformed``, ``bad``, ``unknown-key``; ``reason`` says why."""

    commit: str
    state: str
    reason: str = ""
    recorder: str | None = None
    payload: Mapping[str, Any] | None = None

    @property
    def verified(self) -> bool:
        return self.state == "verified"


def payload_line(*, commit: str, forge: str, repository: str, pull_request: int, recorded_at: str,
                 approvals: Sequence[Mapping[str, Any]]) -> str:
    """The signed line: canonical JSON (sorted keys, no spaces), newline-terminated."""
    body = {"kind": KIND, "version": 1, "commit": commit, "forge": forge, "repository": repository,
            "pullRequest": pull_request, "recordedAt": recorded_at,
            "approvals": [{"login": str(a.get("login") or ""), "email": str(a.get("email") or ""),
                           "approvedCommit": a.get("approvedCommit"), "at": a.get("at")} for a in approvals]}
    return json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=True) + "\n"


def check_key(key_file: str | Path) -> str:
    """The public key of the private key in ``key_file`` (``ssh-keygen -y``), so a recorder learns of an unusable
    key before it asks the forge anything; NoteError when it is not one ssh-keygen can sign with."""
    keygen = shutil.which("ssh-keygen")
    if keygen is None:
        raise NoteError("ssh-keygen is not installed (Debian package openssh-client)")
    done = subprocess.run([keygen, "-y", "-f", str(key_file)], capture_output=True, timeout=TIMEOUT, check=False,
                          stdin=subprocess.DEVNULL)
    if done.returncode != 0:
        raise NoteError(f"{key_file} is not a private SSH key ssh-keygen can sign with (without a passphrase): "
                        f"{done.stderr.decode('utf-8', 'replace').strip() or 'unreadable'}")
    return done.stdout.decode("ascii", "replace").strip()


def sign(line: str, key_file: str | Path) -> str:
    """The note's text: ``line`` and its SSH signature by the private key in ``key_file``."""
    keygen = shutil.which("ssh-keygen")
    if keygen is None:
        raise NoteError("ssh-keygen is not installed (Debian package openssh-client)")
    done = subprocess.run([keygen, "-q", "-Y", "sign", "-f", str(key_file), "-n", NAMESPACE], input=line.encode(),
                          capture_output=True, timeout=TIMEOUT, check=False)
    if done.returncode != 0 or _SIG_BEGIN not in done.stdout.decode("ascii", "replace"):
        raise NoteError(f"ssh-keygen could not sign with {key_file}: "
                        f"{done.stderr.decode('utf-8', 'replace').strip() or 'no signature produced'}")
    return line + done.stdout.decode("ascii")


def verify(text: bytes | None, commit: str, recorders: Mapping[str, Sequence[str]]) -> NoteVerdict:
    """Judge the note ``text`` found on ``commit`` against the recorders' SSH public keys (name → keys)."""
    if text is None:
        return NoteVerdict(commit, "absent", "no approvals note on this commit")
    if len(text) > MAX_NOTE_BYTES:
        return NoteVerdict(commit, "malformed", f"the note is {len(text):,} bytes (limit {MAX_NOTE_BYTES:,})")
    decoded = text.decode("utf-8", "replace")
    line, _, rest = decoded.partition("\n")
    try:
        payload = json.loads(line)
    except json.JSONDecodeError:
        return NoteVerdict(commit, "malformed", "the note's first line is not JSON")
    if not isinstance(payload, dict) or payload.get("kind") != KIND or not isinstance(payload.get("approvals"), list):
        return NoteVerdict(commit, "malformed", f"the note's first line is not a {KIND} record")
    if _SIG_BEGIN not in rest:
        return NoteVerdict(commit, "unsigned", "the note carries no SSH signature")
    if payload.get("commit") != commit:
        return NoteVerdict(commit, "bad", f"the note describes commit {str(payload.get('commit'))[:12]}, not the "
                                          "commit it is attached to")
    if not recorders:
        return NoteVerdict(commit, "unknown-key", "gitopsq.yaml declares no approvalRecorders")
    return _check_signature(commit, (line + "\n").encode(), rest[rest.index(_SIG_BEGIN):].encode(), recorders,
                            payload)


def _check_signature(commit: str, signed: bytes, signature: bytes, recorders: Mapping[str, Sequence[str]],
                     payload: Mapping[str, Any]) -> NoteVerdict:
    keygen = shutil.which("ssh-keygen")
    if keygen is None:
        return NoteVerdict(commit, "unknown-key", "ssh-keygen is not installed")
    names: dict[str, str] = {}
    lines: list[str] = []
    for index, (name, keys) in enumerate(recorders.items()):
        principal = f"recorder-{index}"
        names[principal] = name
        lines.extend(f'{principal} namespaces="{NAMESPACE}" {" ".join(k.split()[:2])}' for k in keys if k.strip())
    with tempfile.TemporaryDirectory(prefix="gitopsq-note-") as work:
        allowed, sig = Path(work, "allowed_signers"), Path(work, "note.sig")
        allowed.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
        sig.write_bytes(signature)
        found = subprocess.run([keygen, "-Y", "find-principals", "-s", str(sig), "-f", str(allowed)],
                               capture_output=True, timeout=TIMEOUT, check=False)
        principals = [p for p in found.stdout.decode("ascii", "replace").split() if p in names]
        if not principals:
            return NoteVerdict(commit, "unknown-key", "the note is signed by a key no approvalRecorders entry lists")
        checked = subprocess.run([keygen, "-Y", "verify", "-f", str(allowed), "-I", principals[0], "-n", NAMESPACE,
                                  "-s", str(sig)], input=signed, capture_output=True, timeout=TIMEOUT, check=False)
    if checked.returncode != 0:
        return NoteVerdict(commit, "bad", "the note's signature does not verify (its content changed after signing)")
    return NoteVerdict(commit, "verified", "", names[principals[0]], payload)


def recorder_keys(config: Any) -> dict[str, list[str]]:
    """name → SSH public keys of every ``approvalRecorders`` entry of ``config`` (inline and from key files)."""
    return {r.name: list(r.keys) for r in getattr(config, "approval_recorders", ()) or () if r.keys}
