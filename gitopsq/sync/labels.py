"""How a GitSource marks the objects it applies, and its default name."""

from __future__ import annotations

import hashlib
import re

from gitopsq.cluster.status import SourceRef

SOURCE_LABEL = "gitopsq.dev/source"  # on every applied object: <namespace>.<name> of its GitSource


def default_source_name(repo: str) -> str:
    """A GitSource name from the repository's last path component (``…/queues.git`` → ``queues``)."""
    tail = re.split(r"[/:]", repo.rstrip("/"))[-1].removesuffix(".git").lower()
    name = re.sub(r"[^a-z0-9-]+", "-", tail).strip("-")[:63].strip("-")
    return name or "gitopsq"


def source_label_value(ref: SourceRef) -> str:
    """``<namespace>.<name>`` of the GitSource, or a digest of it when longer than a label value may be."""
    value = f"{ref.namespace}.{ref.name}"
    if len(value) <= 63:
        return value
    return "h" + hashlib.sha256(value.encode()).hexdigest()[:40]
