"""One controller per cluster (docs/fleet.md "One controller per cluster"): `gitopsq controller --cluster NAME`
syncs only cluster NAME's revision of the repository, the objects under that cluster's ``paths`` in
``gitopsq.yaml``'s ``clusters:``.

- At start, a name the followed branch does not declare is a usage error that lists the declared names
  (`check_cluster`): a typo never syncs an empty revision and prunes the cluster.
- At every revision, `cluster_validator` judges the revision as the cluster sees it (its paths, capacity and
  trust zones: gitopsq.validation.validate_revision with ``cluster``); a revision that no longer declares the
  cluster is rejected (nothing written, the last good revision stays applied).
- ``""`` is the implicit single cluster: the whole repository, as before clusters existed. It is for a repository
  that declares no ``clusters:``; one that does needs ``--cluster`` (refused at start, and a later revision that
  starts declaring clusters is rejected): syncing the union of every cluster's paths into one cluster would
  apply objects meant for others.
"""

from __future__ import annotations

from gitopsq.errors import GitopsqError, UsageError
from gitopsq.manifests.config_model import CONFIG_PATH, RepoConfig
from gitopsq.source.port import Source
from gitopsq.sync.repo_config import repo_config
from gitopsq.sync.revision_validation import check_pipeline_validator
from gitopsq.sync.values import Validated, Validator
from gitopsq.trust import ForgeApprovals

UNDECLARED = "cluster-undeclared"
REQUIRED = "cluster-required"


def declared_clusters(config: RepoConfig | None) -> tuple[str, ...]:
    """The names ``clusters:`` declares (empty for a configuration without it, or one that did not parse)."""
    names = getattr(config, "cluster_names", None)
    return tuple(names()) if callable(names) else ()


def check_cluster(source: Source, branch: str, cluster: str) -> None:
    """Refuse to start for a cluster the branch's gitopsq.yaml does not declare, or without a cluster when it
    declares some (UsageError, exit 2)."""
    try:
        head = source.resolve(branch)
    except GitopsqError:  # the remote is down at start: the first pass decides, revision by revision
        return
    config = repo_config(source, head)
    if config is None:  # an unparsable gitopsq.yaml: the sync rejects it with findings
        return
    names = declared_clusters(config)
    if not cluster and names:
        raise UsageError(f"gitopsq.yaml at {branch} ({head[:12]}) declares clusters ({', '.join(names)}): run one "
                         "controller per cluster with --cluster NAME (the chart's cluster: value)")
    if cluster and cluster not in names:
        listed = ", ".join(names) if names else "none: gitopsq.yaml has no clusters: list"
        raise UsageError(f"--cluster {cluster}: gitopsq.yaml at {branch} ({head[:12]}) does not declare it "
                         f"(declared clusters: {listed})")


def cluster_validator(cluster: str, forge_approvals: ForgeApprovals | None = None) -> Validator:
    """The sync's validator for ``cluster`` (the check pipeline judging its paths with its capacity and trust
    zones, gitopsq.validation.validate_revision); for ``""`` the whole repository's."""
    inner = check_pipeline_validator(forge_approvals, cluster=cluster or None)

    def validate(source: Source, commit: str, previous: str | None) -> Validated:
        config = repo_config(source, commit)
        names = declared_clusters(config) if config is not None else ()
        allowed = names or ("",)  # without clusters: only the implicit one; with them: only theirs
        if config is not None and cluster not in allowed:
            return undeclared(cluster, commit, names)
        return inner(source, commit, previous)  # an unparsable gitopsq.yaml is rejected there, on its findings

    return validate


def undeclared(cluster: str, commit: str, names: tuple[str, ...]) -> Validated:
    """The revision rejected because its gitopsq.yaml no longer declares ``cluster`` (or, for the implicit
    cluster, because it now declares clusters)."""
    if cluster:
        code, listed = UNDECLARED, ", ".join(names) if names else "none"
        message = (f"gitopsq.yaml at {commit[:12]} does not declare cluster {cluster!r} (declared: {listed}); "
                   "the last applied revision stays in place")
    else:
        code = REQUIRED
        message = (f"gitopsq.yaml at {commit[:12]} declares clusters ({', '.join(names)}): this controller runs "
                   "without --cluster, so it applies none of them; the last applied revision stays in place")
    finding = {"severity": "error", "code": code, "reason": code, "message": message,
               "path": CONFIG_PATH, "line": None, "object": None}
    return Validated((), (finding,), True, message, "ValidationFailed")
