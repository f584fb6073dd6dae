"""The evidence bundle: one zip an auditor can take away.

Contents (fixed names, stored in this order):
1. ``README.txt``          what each file is and how to check the checksums;
2. ``report.html``         the readable report;
3. ``records.jsonl``       the chained records of the period, exactly as on the audit branch;
4. ``records.csv``, ``changes.csv``, ``queues.csv``   the same evidence as spreadsheets;
5. ``verification.json``   the result of ``audit verify`` on the whole branch;
6. ``manifest.json``       file names, sizes and SHA-256 checksums, plus the chain head;
7. ``SHA256SUMS``          the same checksums in ``sha256sum -c`` format.
"""

from __future__ import annotations

import hashlib
import json
import zipfile
from pathlib import Path
from typing import Any

from gitopsq.audit import evidence_formats
from gitopsq.audit.evidence import Evidence

_README = """gitopsq audit evidence bundle

report.html        open in any browser: the change log, changes without a required approval,
                   rejected revisions, drift corrections and admission evidence per ClusterQueue.
records.jsonl      the audit records of the period, one JSON object per line, exactly as stored on the
                   audit branch (seq, prevHash and hash link each record to the one before it).
records.csv        the same records as a spreadsheet; changes.csv and queues.csv: the report's tables.
verification.json  the result of checking the whole audit branch when this bundle was made.
manifest.json      every file's size and SHA-256; SHA256SUMS holds the same for `sha256sum -c SHA256SUMS`.
"""

# zip entries carry a fixed timestamp so the same evidence gives the same bytes.
_FIXED_TIME = (1980, 1, 1, 0, 0, 0)


def bundle_files(evidence: Evidence, verification: dict[str, Any]) -> dict[str, bytes]:
    files = {
        "README.txt": _README.encode(),
        "report.html": evidence_formats.to_html(evidence, verification).encode(),
        "records.jsonl": evidence_formats.to_jsonl(evidence).encode(),
        "records.csv": evidence_formats.records_csv(evidence).encode(),
        "changes.csv": evidence_formats.changes_csv(evidence).encode(),
        "queues.csv": evidence_formats.queues_csv(evidence).encode(),
        "verification.json": (json.dumps(verification, indent=2, sort_keys=True) + "\n").encode(),
    }
    sums = {name: hashlib.sha256(data).hexdigest() for name, data in files.items()}
    manifest = {"schemaVersion": 1, "period": {"since": evidence.since, "until": evidence.until},
                "chainHead": verification.get("head"), "verified": bool(verification.get("ok")),
                "files": [{"name": n, "bytes": len(files[n]), "sha256": sums[n]} for n in files]}
    files["manifest.json"] = (json.dumps(manifest, indent=2, sort_keys=True) + "\n").encode()
    sums["manifest.json"] = hashlib.sha256(files["manifest.json"]).hexdigest()
    files["SHA256SUMS"] = "".join(f"{digest}  {name}\n" for name, digest in sums.items()).encode()
    return files


def write_bundle(path: Path, evidence: Evidence, verification: dict[str, Any]) -> list[str]:
    """Write the zip; returns the names it holds."""
    files = bundle_files(evidence, verification)
    tmp = path.with_name(path.name + ".tmp")
    with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for name, data in files.items():
            info = zipfile.ZipInfo(name, date_time=_FIXED_TIME)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            archive.writestr(info, data)
    tmp.replace(path)
    return list(files)
