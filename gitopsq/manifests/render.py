"""A checked revision as normalised manifests: v1beta2, defaults written out, in apply order.

Order (every kind before the kinds that refer to it; stable, ties broken by namespace, name, file, line):

1. Namespace
2. PriorityClass
3. WorkloadPriorityClass
4. Topology
5. ResourceFlavor
6. MultiKueueCluster
7. MultiKueueConfig
8. ProvisioningRequestConfig
9. AdmissionCheck
10. Cohort
11. ClusterQueue
12. LocalQueue
13. pass-through kinds (``allowKinds``), by apiVersion, kind, namespace, name
"""

from __future__ import annotations

from typing import Any, Final

import yaml

from gitopsq.api.codec import encode
from gitopsq.manifests.check_report import Report
from gitopsq.manifests.yamlscalar import STR, resolve_plain

KIND_ORDER: Final = ("Namespace", "PriorityClass", "WorkloadPriorityClass", "Topology", "ResourceFlavor",
                     "MultiKueueCluster", "MultiKueueConfig", "ProvisioningRequestConfig", "AdmissionCheck",
                     "Cohort", "ClusterQueue", "LocalQueue")
_BaseDumper: Final[Any] = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


class _Dumper(_BaseDumper):  # type: ignore[misc]
    """PyYAML leaves ``n``, ``y``, ``0x10`` or ``1E3`` plain, but kubectl (and gitopsq) read those as booleans and
    numbers: a string the Kubernetes YAML reader would not read back as itself is double-quoted."""


def _represent_str(dumper: Any, text: str) -> Any:
    # PyYAML quotes what its own rules read as another type ('48'); the rest is quoted only when needed
    pyyaml_plain = dumper.resolve(yaml.ScalarNode, text, (True, False)) == STR
    style = '"' if pyyaml_plain and resolve_plain(text) != (STR, text) else None
    return dumper.represent_scalar(STR, text, style=style)


_Dumper.add_representer(str, _represent_str)


def render_order(report: Report) -> list[dict[str, Any]]:
    """The report's objects as v1beta2 documents, in apply order."""
    rank = {kind: i for i, kind in enumerate(KIND_ORDER)}
    entries = sorted(report.entries, key=lambda e: (rank[e.obj.KIND], e.obj.meta.namespace or "", e.obj.meta.name,
                                                    e.path, e.line))
    docs = [encode(e.obj) for e in entries]
    others = sorted(report.passthrough, key=lambda p: (p.api_version, p.kind, p.namespace, p.name, p.path, p.line))
    docs.extend(dict(p.doc) for p in others)
    return docs


def render_documents(report: Report) -> str:
    """Multi-document YAML, each document starting with ``---``."""
    docs = render_order(report)
    if not docs:
        return ""
    return yaml.dump_all(docs, Dumper=_Dumper, explicit_start=True, sort_keys=False, default_flow_style=False,
                         allow_unicode=True, width=120)
