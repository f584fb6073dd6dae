"""One controller per cluster (docs/fleet.md "One controller per cluster"): `gitopsq controller --cluster NAME`
syncs only cluster NAME's revision of the repository, the objects under that cluster's ``paths`` in
``gitopsq.yaml``'s ``clusters:``.

- At start, a name the followed branch does not declare is a usage error that lists the declared names
  (`check_cluster`): a typo never syncs an empty revision and prunes the cluster.
- At every revision, `cluster_validator` judges the revision as the cluster sees it: a revision that no longer
  declares the cluster is rejected (nothing written, the last good revision stays applied), and of an accepted
  one only the objects from files under the cluster's paths are kept.
- ``""`` is the implicit single cluster: the whole repository, as before clusters existed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from gitopsq.errors import GitopsqError, UsageError
from gitopsq.source.port import Source
from gitopsq.sync.model import Validated, Validator
from gitopsq.sync.plan import key_of_document
from gitopsq.sync.repo_config import repo_config

UNDECLARED = "cluster-undeclared"


def declared_clusters(config: Any) -> tuple[str, ...]:
    """The names ``clusters:`` declares (empty for a configuration without it, or one that did not parse)."""
    names = getattr(config, "cluster_names", None)
    return tuple(names()) if callable(names) else ()


def check_cluster(source: Source, branch: str, cluster: str) -> None:
    """Refuse to start for a cluster the branch's gitopsq.yaml does not declare (UsageError, exit 2)."""
    if not cluster:
        return
    try:
        head = source.resolve(branch)
    except GitopsqError:  # the remote is down at start: the first pass decides, revision by revision
        return
    config = repo_config(source, head)
    if config is None:  # an unparsable gitopsq.yaml: the sync rejects it with findings
        return
    names = declared_clusters(config)
    if cluster not in names:
        listed = ", ".join(names) if names else "none: gitopsq.yaml has no clusters: list"
        raise UsageError(f"--cluster {cluster}: gitopsq.yaml at {branch} ({head[:12]}) does not declare it "
                         f"(declared clusters: {listed})")


def cluster_validator(inner: Validator, cluster: str) -> Validator:
    """``inner`` narrowed to ``cluster``'s revision; ``inner`` itself for the implicit cluster ``""``."""
    if not cluster:
        return inner

    def validate(source: Source, commit: str, previous: str | None) -> Validated:
        validated = inner(source, commit, previous)
        config = repo_config(source, commit)
        if config is None:  # gitopsq.yaml does not parse: ``inner`` rejected the revision on its findings
            return validated
        names = declared_clusters(config)
        if cluster not in names:
            return undeclared(validated, cluster, commit, names)
        return within_cluster(validated, config.for_cluster(cluster))

    return validate


def undeclared(validated: Validated, cluster: str, commit: str, names: tuple[str, ...]) -> Validated:
    """The revision rejected because its gitopsq.yaml no longer declares ``cluster``."""
    listed = ", ".join(names) if names else "none"
    message = (f"gitopsq.yaml at {commit[:12]} does not declare cluster {cluster!r} (declared: {listed}); "
               "the last applied revision stays in place")
    finding = {"severity": "error", "code": UNDECLARED, "reason": UNDECLARED, "message": message,
               "path": "gitopsq.yaml", "line": None, "object": None}
    return replace(validated, documents=(), findings=(finding, *validated.findings), rejected=True,
                   reason=message, reason_code="ValidationFailed")


def within_cluster(validated: Validated, view: Any) -> Validated:
    """Only the objects from files the cluster's view selects (its ``paths``). Objects without a known file
    (none in practice) are kept out: a cluster applies what its paths say, nothing else."""
    where: Mapping[Any, tuple[str, int]] = validated.locations

    def inside(doc: Mapping[str, Any]) -> bool:
        place = where.get(key_of_document(doc))
        return place is not None and bool(view.selects(place[0]))

    return replace(validated, documents=tuple(d for d in validated.documents if inside(d)))
