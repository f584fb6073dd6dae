"""Installing gitopsq's CustomResourceDefinitions, and recognising Kueue's own when they are already there.

gitopsq ships Kueue-compatible CRDs (gitopsq/data/crds/) for clusters without Kueue. A CRD that exists and
does not carry our ``app.kubernetes.io/managed-by: gitopsq`` label (nor only gitopsq field managers) belongs
to someone else - normally an upstream Kueue installation - and is used as it is, never replaced.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from enum import Enum
from importlib import resources
from typing import Protocol, cast

import yaml
from kubernetes import client as k8s_client

from gitopsq.cluster.edge_objects import CustomResourceDefinition
from gitopsq.cluster.kube import ClusterNotFound, ClusterUnavailable, api_errors

FIELD_MANAGER = "gitopsq"
MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
MANAGED_BY_VALUE = "gitopsq"
KUEUE_GROUP = "kueue.x-k8s.io"
REQUIRED_KUEUE_VERSION = "v1beta2"
ESTABLISH_TIMEOUT_SECONDS = 60.0


class CrdAction(Enum):
    """What installing did (or, under --dry-run, would do) to one CRD."""

    CREATED = "created"
    UPDATED = "updated"
    UNCHANGED = "unchanged"
    FOREIGN_KEPT = "foreign-kept"  # someone else's CRD (e.g. upstream Kueue): left alone


@dataclass(frozen=True, slots=True)
class CrdOutcome:
    """The result for one CRD; ``usable`` is False for a foreign Kueue CRD that does not serve v1beta2."""

    name: str
    action: CrdAction
    dry_run: bool
    note: str = ""
    usable: bool = True


@dataclass(frozen=True, slots=True)
class CrdReport:
    outcomes: tuple[CrdOutcome, ...]

    @property
    def foreign(self) -> tuple[CrdOutcome, ...]:
        return tuple(o for o in self.outcomes if o.action is CrdAction.FOREIGN_KEPT)


def bundled_crds() -> list[CustomResourceDefinition]:
    """The CRDs shipped in gitopsq/data/crds, sorted by name (stable order for output and tests)."""
    folder = resources.files("gitopsq").joinpath("data", "crds")
    documents: list[CustomResourceDefinition] = []
    for entry in folder.iterdir():
        if entry.name.endswith(".yaml"):
            documents.extend(d for d in yaml.safe_load_all(entry.read_text(encoding="utf-8")) if d)
    return sorted(documents, key=lambda d: str(d["metadata"]["name"]))


def is_gitopsq_managed(crd: CustomResourceDefinition) -> bool:
    """True for a CRD that gitopsq installed: our label, or only gitopsq among its field managers."""
    metadata = crd.get("metadata") or {}
    if (metadata.get("labels") or {}).get(MANAGED_BY_LABEL) == MANAGED_BY_VALUE:
        return True
    # status entries belong to kube-apiserver itself (Established, NamesAccepted): not an owner of the CRD
    managers = {
        str(entry.get("manager", "")) for entry in metadata.get("managedFields") or [] if not entry.get("subresource")
    }
    return managers == {FIELD_MANAGER}


def served_versions(crd: CustomResourceDefinition) -> list[str]:
    return [str(v["name"]) for v in (crd.get("spec") or {}).get("versions") or [] if v.get("served")]


def _is_established(crd: CustomResourceDefinition) -> bool:
    conditions = (crd.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Established" and c.get("status") == "True" for c in conditions)


class CrdClient:
    """The few CRD calls installing needs, returning plain dicts."""

    def __init__(self, api_client: k8s_client.ApiClient) -> None:
        self._api = k8s_client.ApiextensionsV1Api(api_client)

    def read(self, name: str) -> CustomResourceDefinition | None:
        try:
            with api_errors(obj=f"CustomResourceDefinition/{name}"):
                response = self._api.read_custom_resource_definition(name, _preload_content=False)
        except ClusterNotFound:
            return None
        return _json(response)

    def apply(self, crd: CustomResourceDefinition, *, dry_run: bool) -> CustomResourceDefinition:
        name = str(crd["metadata"]["name"])
        with api_errors(obj=f"CustomResourceDefinition/{name}"):
            response = self._api.patch_custom_resource_definition(
                name,
                dict(crd),
                field_manager=FIELD_MANAGER,
                force=True,  # only ever called for CRDs that are ours
                dry_run="All" if dry_run else None,
                _content_type="application/apply-patch+yaml",
                _preload_content=False,
            )
        return _json(response)


class _RawResponse(Protocol):
    data: bytes


def _json(response: object) -> CustomResourceDefinition:
    # the client's stubs name the model it would build, but ``_preload_content=False`` hands back the raw response
    return cast(CustomResourceDefinition, json.loads(cast(_RawResponse, response).data))


def install_crds(
    api_client: k8s_client.ApiClient,
    *,
    dry_run: bool = False,
    crds: Sequence[CustomResourceDefinition] | None = None,
    timeout: float = ESTABLISH_TIMEOUT_SECONDS,
) -> CrdReport:
    """Server-side apply our CRDs (field manager ``gitopsq``), skip foreign ones, and wait for Established."""
    client = CrdClient(api_client)
    outcomes: list[CrdOutcome] = []
    for crd in crds if crds is not None else bundled_crds():
        name = str(crd["metadata"]["name"])
        live = client.read(name)
        if live is not None and not is_gitopsq_managed(live):
            usable = live["spec"].get("group") != KUEUE_GROUP or REQUIRED_KUEUE_VERSION in served_versions(live)
            outcomes.append(CrdOutcome(name, CrdAction.FOREIGN_KEPT, dry_run, _foreign_note(live), usable))
            continue
        applied = client.apply(crd, dry_run=dry_run)
        if live is None:
            action = CrdAction.CREATED
        elif _same(applied, live, dry_run=dry_run):
            action = CrdAction.UNCHANGED
        else:
            action = CrdAction.UPDATED
        outcomes.append(CrdOutcome(name, action, dry_run))
    if not dry_run:
        wait_established(client, [o.name for o in outcomes], timeout=timeout)
    return CrdReport(tuple(outcomes))


def _same(applied: CustomResourceDefinition, live: CustomResourceDefinition, *, dry_run: bool) -> bool:
    if not dry_run:  # a real apply that changed nothing keeps the resourceVersion
        return bool(applied["metadata"].get("resourceVersion") == live["metadata"].get("resourceVersion"))
    # a server-side dry run returns the would-be object without a new resourceVersion: compare content
    return bool(
        applied.get("spec") == live.get("spec")
        and applied["metadata"].get("labels") == live["metadata"].get("labels")
        and applied["metadata"].get("annotations") == live["metadata"].get("annotations")
    )


def _foreign_note(live: CustomResourceDefinition) -> str:
    group = (live.get("spec") or {}).get("group")
    versions = served_versions(live)
    if group == KUEUE_GROUP and REQUIRED_KUEUE_VERSION not in versions:
        return f"serves {', '.join(versions) or 'no version'}; gitopsq needs {REQUIRED_KUEUE_VERSION}"
    return f"serves {', '.join(versions)}"


def wait_established(
    client: CrdClient,
    names: Iterable[str],
    *,
    timeout: float = ESTABLISH_TIMEOUT_SECONDS,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> None:
    """Return once every named CRD reports Established=True; ClusterUnavailable after ``timeout``."""
    waiting = list(names)
    deadline = clock() + timeout
    while waiting:
        waiting = [name for name in waiting if not _is_established(client.read(name) or {})]
        if not waiting:
            return
        if clock() >= deadline:
            raise ClusterUnavailable(f"CRDs not Established after {timeout:.0f}s: {', '.join(waiting)}")
        sleep(0.1)
