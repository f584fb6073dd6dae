"""Which clusters of gitopsq.yaml a command judges (``--cluster NAME``; docs/fleet.md).

Without ``--cluster`` every declared cluster is judged; a repository without ``clusters:`` is one implicit
cluster, named ``""``, judged exactly as before. A name gitopsq.yaml does not declare is a usage error that
lists the names it does.
"""

from __future__ import annotations

from typing import Any

from gitopsq.errors import UsageError
from gitopsq.manifests.config import parse_config
from gitopsq.manifests.config_model import CONFIG_PATH


def declared_clusters(source: Any, commit: str) -> tuple[str, ...]:
    """The cluster names gitopsq.yaml declares at ``commit`` (empty without ``clusters:`` or a readable file)."""
    data = source.read_file(commit, CONFIG_PATH)
    config = parse_config(data).config if data is not None else None
    return config.cluster_names() if config is not None else ()


def choose(declared: tuple[str, ...], requested: str | None) -> tuple[str, ...]:
    """The clusters to judge: ``requested`` alone, every declared one, or ``("",)`` for the implicit cluster."""
    declared = tuple(dict.fromkeys(declared))  # a name declared twice is a finding already; judged once
    if requested is None:
        return declared or ("",)
    if requested in declared:
        return (requested,)
    if not declared:
        raise UsageError(f"--cluster {requested}: {CONFIG_PATH} declares no clusters (one implicit cluster: "
                         "leave --cluster out; docs/fleet.md)")
    raise UsageError(f"--cluster {requested}: {CONFIG_PATH} declares no such cluster (declared: "
                     f"{', '.join(declared)})")


def label(cluster: str) -> str:
    """``cluster prod-eu`` for a declared cluster, empty for the implicit one."""
    return f"cluster {cluster}" if cluster else ""
