"""The audit trail: hash-chained records, a local write-ahead log, batched commits to an audit branch.

Use from the rest of gitopsq (docs/audit.md has the full picture)::

    from gitopsq.audit import AuditTrail, records
    with AuditTrail.open(target, wal_dir, settings=settings_from_config(cfg["audit"])) as trail:
        trail.record(records.sync_attempt(time=now, source_url=url, revision=sha, ...))

Heavy modules (pygit2) load on first use, so ``import gitopsq.audit.records`` stays cheap.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from gitopsq.audit import records

if TYPE_CHECKING:
    from gitopsq.audit.sink import AuditSink, NullAuditTrail, TrailSettings, audit_target, settings_from_config
    from gitopsq.audit.trail import AuditTrail

__all__ = ["AuditSink", "AuditTrail", "NullAuditTrail", "TrailSettings", "audit_target", "records",
           "settings_from_config"]

_LAZY = {"AuditTrail": "gitopsq.audit.trail", "AuditSink": "gitopsq.audit.sink",
         "NullAuditTrail": "gitopsq.audit.sink", "TrailSettings": "gitopsq.audit.sink",
         "audit_target": "gitopsq.audit.sink", "settings_from_config": "gitopsq.audit.sink"}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(name)
    return getattr(importlib.import_module(module), name)
