"""The fleet view (`gitopsq status`, docs/fleet.md "Fleet status"): what each cluster's controller has applied,
read from the clusters themselves.

Per target (a kubeconfig and a context) it reads:
- the GitSources (``gitsources.gitopsq.dev``, every namespace): the revision applied (``lastAppliedRevision``,
  which the controller writes after every good pass), the one attempted last, the Ready condition, and the
  cluster the controller syncs (the ``gitopsq.dev/cluster`` label a ``--cluster`` controller puts on it);
- drift: the applied revision's objects for that cluster, read from the repository (``--repo``, else the
  GitSource's ``spec.url``), compared with the live objects the way a sync compares them (`build_plan` with the
  revision as its own previous one); an object that differs, is missing, or is left over counts;
- pending workloads per LocalQueue (Workloads without quota reserved and not finished), with the ClusterQueue
  each LocalQueue points at.
A cluster that cannot be reached is a row saying so, never the end of the command.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import cast

from gitopsq.api.git_source import GitSource, GitSourceList, GitSourceSpec, GitSourceStatus
from gitopsq.api.raw_objects import Condition, JsonMapping, child, children, meta, text
from gitopsq.cluster.apply import Backoff, KubeRest, read_live
from gitopsq.cluster.kinds import GIT_SOURCE, LOCAL_QUEUE, WORKLOAD
from gitopsq.cluster.kube import ClusterNotFound, load_api_client
from gitopsq.cluster.status import CLUSTER_LABEL, SourceRef
from gitopsq.errors import GitopsqError
from gitopsq.manifests import check_revision
from gitopsq.reconcile.inventory import Inventory, InventoryFormatError
from gitopsq.reconcile.pairing import build_plan, key_of_document
from gitopsq.source.port import Source
from gitopsq.sync.labels import SOURCE_LABEL, source_label_value
from gitopsq.sync.revision_validation import from_report, within_paths
from gitopsq.sync.whole import keys_of

READ_TIMEOUT = 10.0  # seconds per request: an unreachable cluster must not hold up the others for long
_DRIFT_WORDS = {"create": "missing", "drift": "differs", "changed": "differs"}


@dataclass(frozen=True, slots=True)
class Target:
    """Where one cluster is reached: a kubeconfig file (None: the default one) and a context (None: current)."""

    kubeconfig: str | None
    context: str | None

    @property
    def label(self) -> str:
        return ":".join(p for p in (self.kubeconfig or "", self.context or "") if p) or "(default kubeconfig)"


@dataclass(frozen=True, slots=True)
class SourceView:
    namespace: str
    name: str
    cluster: str  # the label of a --cluster controller; "" for the implicit cluster
    url: str
    applied: str | None
    attempted: str | None
    ready: str  # the Ready condition's status: True, False, Unknown ("" when it has none yet)
    reason: str
    message: str
    drift: tuple[tuple[str, str], ...] | None = None  # (object, missing|differs|left over); None: not known
    drift_error: str = ""


@dataclass(frozen=True, slots=True)
class QueueView:
    namespace: str
    name: str
    cluster_queue: str
    pending: int


@dataclass(frozen=True, slots=True)
class ClusterView:
    target: Target
    reachable: bool
    error: str = ""
    sources: tuple[SourceView, ...] = ()
    queues: tuple[QueueView, ...] = field(default=())

    @property
    def name(self) -> str:
        """The cluster's name as its controller knows it, else the context or kubeconfig that reached it."""
        named = sorted({s.cluster for s in self.sources if s.cluster})
        return ",".join(named) or self.target.context or self.target.label


SourceOpener = Callable[[str], Source]


def targets(kubeconfigs: Sequence[str], contexts: Sequence[str]) -> list[Target]:
    """Every kubeconfig with every context (the current context when none is given; the default kubeconfig
    when none is given)."""
    files: list[str | None] = list(kubeconfigs) or [None]
    names: list[str | None] = list(contexts) or [None]
    return [Target(f, c) for f in files for c in names]


def read_cluster(target: Target, *, repo: str | None, open_source: SourceOpener, drift: bool = True) -> ClusterView:
    """One cluster's view; a cluster that cannot be reached or read (an unreadable kubeconfig, no API server
    there, a refused read) gives ``reachable=False`` with the reason."""
    try:
        api_client = load_api_client(target.kubeconfig, target.context)
    except GitopsqError as err:
        return ClusterView(target, False, str(err))
    try:
        rest = KubeRest(api_client, backoff=Backoff(deadline=1.0), timeout=READ_TIMEOUT)
        try:  # something that answers but is no API server (a proxy's 404s) must not read as "nothing synced"
            version = rest.request("GET", "/version", obj="the API server's version", retry=False)
        except ClusterNotFound:
            version = {}
        if not isinstance(version, Mapping) or not version.get("gitVersion"):
            return ClusterView(target, False, f"{api_client.configuration.host} does not answer as a Kubernetes "
                                              "API server (no /version)")
        try:
            listed = cast(GitSourceList, rest.request("GET", GIT_SOURCE.collection_path(), obj="GitSources",
                                                      retry=False))
        except ClusterNotFound:
            listed = {"items": []}  # gitopsq's CRD is not installed: nothing synced here
        sources = tuple(_source_view(rest, item, repo=repo, open_source=open_source, drift=drift)
                        for item in sorted(listed.get("items") or [], key=_name_of))
        return ClusterView(target, True, "", sources, _queues(rest))
    except GitopsqError as err:
        return ClusterView(target, False, str(err))
    finally:
        api_client.close()  # type: ignore[no-untyped-call]


def _name_of(item: Mapping[str, object]) -> tuple[str, str]:
    about = meta(item)
    return str(about.get("namespace") or ""), str(about.get("name") or "")


def _source_view(rest: KubeRest, item: GitSource, *, repo: str | None, open_source: SourceOpener,
                 drift: bool) -> SourceView:
    about, spec, status = item.get("metadata") or {}, item.get("spec") or {}, item.get("status") or {}
    ready: Condition = next((c for c in status.get("conditions") or [] if c.get("type") == "Ready"), Condition())
    namespace, name = _name_of(item)
    view = SourceView(namespace, name, str((about.get("labels") or {}).get(CLUSTER_LABEL) or ""),
                      str(spec.get("url") or ""), status.get("lastAppliedRevision"),
                      status.get("lastAttemptedRevision"), str(ready.get("status") or ""),
                      str(ready.get("reason") or ""), str(ready.get("message") or ""))
    if not drift or not view.applied:
        return view
    try:
        found = drift_of(rest, view, spec, status, open_source(repo or view.url))
    except (GitopsqError, InventoryFormatError, OSError, ValueError) as err:  # ValueError: duplicate objects
        return replace(view, drift_error=str(err))
    return replace(view, drift=found)


def drift_of(rest: KubeRest, view: SourceView, spec: GitSourceSpec, status: GitSourceStatus,
             source: Source) -> tuple[tuple[str, str], ...]:
    """The objects where the cluster differs from the cluster's view of the applied revision."""
    assert view.applied is not None
    # The objects only: the revision was judged (trust, policies) when it was applied.
    source.resolve(view.applied)  # a remote mirror fetches the commit if it does not hold it yet
    report = check_revision(source, view.applied, cluster=view.cluster or None)
    validated = within_paths(from_report(report), tuple(str(p) for p in spec.get("paths") or ()))
    inventory = Inventory.from_status(status.get("inventory"))
    label = source_label_value(SourceRef(view.namespace, view.name))
    live = read_live(rest, keys_of(validated.documents, inventory), selector=f"{SOURCE_LABEL}={label}")
    desired = {key_of_document(d): d for d in validated.documents}
    plan = build_plan(view.applied, validated.documents, live, inventory, prune=True, allow_empty=True,
                      previous=desired, labels={SOURCE_LABEL: label})
    found = [(str(a.key), _DRIFT_WORDS.get(a.reason, "differs")) for a in plan.applies]
    found += [(str(p.key), "left over") for p in plan.prunes]
    return tuple(sorted(found))


def _queues(rest: KubeRest) -> tuple[QueueView, ...]:
    """Pending Workloads per LocalQueue (every LocalQueue, with 0 when none wait)."""
    try:
        queues = children(rest.request("GET", LOCAL_QUEUE.collection_path(), obj="LocalQueues"), "items")
        workloads = children(rest.request("GET", WORKLOAD.collection_path(), obj="Workloads"), "items")
    except ClusterNotFound:  # Kueue's CRDs are not installed
        return ()
    pending: dict[tuple[str, str], int] = {}
    for wl in workloads:
        if _waiting(wl):
            where = (str(meta(wl).get("namespace") or ""), text(wl, "spec", "queueName"))
            pending[where] = pending.get(where, 0) + 1
    out = {(ns, n): QueueView(ns, n, text(q, "spec", "clusterQueue"), pending.get((ns, n), 0))
           for q in queues for ns, n in [_name_of(q)]}
    for (ns, n), count in pending.items():  # a Workload naming a LocalQueue that does not exist still waits
        out.setdefault((ns, n), QueueView(ns, n, "", count))
    return tuple(out[k] for k in sorted(out))


def _waiting(workload: JsonMapping) -> bool:
    conditions = {c.get("type"): c.get("status")
                  for c in cast("list[Condition]", child(workload, "status").get("conditions") or [])}
    return conditions.get("QuotaReserved") != "True" and conditions.get("Finished") != "True"
