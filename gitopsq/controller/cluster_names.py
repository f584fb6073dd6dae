"""What a per-cluster controller (``--cluster NAME``) stamps with its cluster's name, so that a fleet's controllers
writing to one audit branch, one forge and one Prometheus stay apart (docs/fleet.md "One controller per cluster"):

- audit records gain a ``cluster`` field, and their id is derived from the original id and the name (two
  clusters rejecting the same revision are two records, a replayed record is still the same one);
- every metric series gains a ``cluster`` label (`ClusterLabelled` wraps the controller's registry);
- commit statuses use the context ``gitopsq/<cluster>`` unless ``--status-context`` names another.
With the implicit cluster ``""`` nothing changes.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from prometheus_client import CollectorRegistry
from prometheus_client.metrics_core import Metric
from prometheus_client.samples import Sample

from gitopsq.audit.records import Record, record_id
from gitopsq.controller.forge_status import DEFAULT_CONTEXT

CLUSTER_LABEL = "cluster"


def named_record(record: Record | Mapping[str, object], cluster: str) -> Record | Mapping[str, object]:
    """``record`` with ``cluster`` set and its id made specific to the cluster (unchanged for ``""``)."""
    if not cluster:
        return record
    data = dict(record.data if isinstance(record, Record) else record)
    if data.get("cluster") == cluster:
        return record
    data["cluster"] = cluster
    if "id" in data:
        data["id"] = record_id(str(data.get("type")), [str(data["id"]), cluster])
    return Record(data)


def status_context(configured: str | None, cluster: str) -> str:
    """The commit-status context: the one configured, except that the default becomes ``gitopsq/<cluster>``."""
    context = configured or DEFAULT_CONTEXT
    return f"gitopsq/{cluster}" if cluster and context == DEFAULT_CONTEXT else context


class ClusterLabelled:
    """A collector that re-exposes every family of ``inner`` with ``cluster="<name>"`` on each sample."""

    def __init__(self, inner: CollectorRegistry, cluster: str) -> None:
        self.inner = inner
        self.cluster = cluster

    def collect(self) -> Iterator[Metric]:
        for family in self.inner.collect():
            out = Metric(family.name, family.documentation, family.type, family.unit)
            out.samples = [Sample(s.name, {**s.labels, CLUSTER_LABEL: self.cluster}, s.value, s.timestamp,
                                  s.exemplar) for s in family.samples]
            yield out


def exposed_registry(registry: CollectorRegistry, cluster: str) -> CollectorRegistry:
    """The registry to serve: ``registry`` itself, or one that labels its series with the cluster."""
    if not cluster:
        return registry
    outer = CollectorRegistry(auto_describe=False)
    outer.register(ClusterLabelled(registry, cluster))
    return outer
