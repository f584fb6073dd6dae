"""pytest plugin: the real kube-apiserver + etcd test rig (see docs/envtest.md).

Fixtures:
    envtest       session scope; starts one rig the first time a test asks for it, stops it at session end
    kueue_crds    session scope; the rig with gitopsq's bundled CRDs installed and Established
    kueue_clean   function scope; deletes every kueue.x-k8s.io and gitopsq.dev object before and after the test

Tests that use ``envtest`` are marked ``envtest`` automatically (so ``-m "not envtest"`` deselects them).
"""

from __future__ import annotations

import atexit
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT / "hack" / "envtest"))

from envtestrig import Rig, prepare  # noqa: E402 - lives beside go.mod, outside the package

CLEANED_GROUPS = ("kueue.x-k8s.io", "gitopsq.dev")


class Envtest:
    """A running rig as tests see it: where it is, clients for it, and the levers tests pull."""

    def __init__(self, rig: Rig, kubectl_binary: str) -> None:
        self.rig = rig
        self.kubeconfig: Path = rig.kubeconfig
        self.api_url: str = rig.api_url
        self._kubectl = kubectl_binary

    def api_client(self, context: str | None = None) -> Any:
        """A fresh kubernetes ApiClient (admin by client certificate unless ``context`` says otherwise).

        Contexts in the kubeconfig: ``envtest`` (admin, client cert), ``envtest-token`` (admin, bearer
        token), ``envtest-nobody`` (authenticated user with no permissions).
        """
        from gitopsq.cluster.kube import load_api_client

        return load_api_client(str(self.kubeconfig), context)

    def env(self) -> dict[str, str]:
        """Process environment pointing kubectl, gitopsq and Kueue tools at this rig."""
        return {**os.environ, "KUBECONFIG": str(self.kubeconfig)}

    def kubectl(self, *args: str, check: bool = True, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        """Run the real kubectl against the rig; raises AssertionError with its stderr when ``check`` fails."""
        done = subprocess.run(
            [self._kubectl, *args], env=self.env(), input=stdin, capture_output=True, text=True, check=False
        )
        if check and done.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed ({done.returncode}): {done.stderr}")
        return done

    def new_namespace(self, prefix: str = "test") -> str:
        """Create a namespace with a unique name and return the name (namespaces are never deleted:
        without a controller-manager a deleted namespace stays Terminating)."""
        from kubernetes import client

        name = f"{prefix}-{uuid.uuid4().hex[:8]}"
        with self.api_client() as api:
            client.CoreV1Api(api).create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name)))
        return name

    def restart_apiserver(self) -> None:
        """Stop kube-apiserver and start it again on the same port; etcd and therefore all data survive."""
        self.rig.restart_apiserver()

    def stop_apiserver(self) -> None:
        """Take the API down (etcd keeps running) until ``start_apiserver``; for outage tests."""
        self.rig.stop_apiserver()

    def start_apiserver(self) -> None:
        self.rig.start_apiserver()

    def delete_all(self, groups: tuple[str, ...] = CLEANED_GROUPS) -> None:
        """Delete every object of every CRD in ``groups`` (cluster-scoped and in all namespaces)."""
        from kubernetes import client

        with self.api_client() as api:
            crds = client.ApiextensionsV1Api(api).list_custom_resource_definition().items
            custom = client.CustomObjectsApi(api)
            for crd in crds:
                if crd.spec.group not in groups:
                    continue
                version = next(v.name for v in crd.spec.versions if v.storage)
                plural = crd.spec.names.plural
                if crd.spec.scope == "Cluster":
                    custom.delete_collection_cluster_custom_object(crd.spec.group, version, plural)
                    continue
                listed: Any = custom.list_cluster_custom_object(crd.spec.group, version, plural)
                for namespace in sorted({item["metadata"]["namespace"] for item in listed["items"]}):
                    custom.delete_collection_namespaced_custom_object(crd.spec.group, version, namespace, plural)


_started: list[Rig] = []


def _stop_started() -> None:
    while _started:
        _started.pop().stop()


atexit.register(_stop_started)  # also when pytest dies before session teardown


@pytest.fixture(scope="session")
def envtest(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Envtest]:
    """One real kube-apiserver + etcd for the whole session, started on first use."""
    binaries = prepare(log=True)
    rig = Rig.start(binaries, tmp_path_factory.mktemp("envtest"))
    _started.append(rig)
    try:
        yield Envtest(rig, str(binaries.kubectl))
    finally:
        _stop_started()


@pytest.fixture(scope="session")
def kueue_crds(envtest: Envtest) -> Envtest:
    """The rig with gitopsq's bundled CRDs installed (server-side apply) and Established."""
    from gitopsq.cluster.crds import install_crds

    with envtest.api_client() as api:
        install_crds(api)
    return envtest


@pytest.fixture
def kueue_clean(kueue_crds: Envtest) -> Iterator[Envtest]:
    """Start and leave the test with no kueue.x-k8s.io or gitopsq.dev objects in the rig."""
    kueue_crds.delete_all()
    yield kueue_crds
    kueue_crds.delete_all()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "envtest" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.envtest)
