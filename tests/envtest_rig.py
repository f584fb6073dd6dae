"""pytest plugin: the real kube-apiserver + etcd test rig (see docs/envtest.md).

Fixtures:
    envtest       session scope; starts one bare rig (etcd + kube-apiserver) the first time a test asks for it
    kueue_crds    session scope; the rig with gitopsq's bundled CRDs installed and Established
    kueue_clean   function scope; deletes every kueue.x-k8s.io and gitopsq.dev object before and after the test
    full_cluster  session scope; a second, full rig: + kube-controller-manager, kube-scheduler and KWOK
    jobset_cluster session scope; the full rig with the JobSet CRD and controller added
    trainer_cluster session scope; jobset_cluster with the Kubeflow Trainer CRDs and controller manager added
    kuberay_cluster session scope; the full rig with the Ray CRDs and the KubeRay operator added
    node_pools    function scope; the full rig, with fake nodes added through it deleted after the test

Tests that use any of them are marked ``envtest`` automatically (so ``-m "not envtest"`` deselects them).
"""

from __future__ import annotations

import atexit
import contextlib
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, TypeVar

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT / "hack" / "envtest"))

from envtestrig import FAKE_NODE_ANNOTATION, Rig, prepare  # noqa: E402 - lives beside go.mod, outside the package

CLEANED_GROUPS = ("kueue.x-k8s.io", "gitopsq.dev")
RIG_FIXTURES = frozenset({"envtest", "full_cluster", "node_pools", "jobset_cluster", "trainer_cluster",
                          "kuberay_cluster"})
GPU = "nvidia.com/gpu"
# pod annotations read by gitopsq's KWOK stages (hack/kwok/stages.yaml); values are Go durations ("1500ms", "2s")
START_AFTER = "gitopsq.dev/start-after"
RUN_FOR = "gitopsq.dev/run-for"
EXIT_CODE = "gitopsq.dev/exit-code"
TERMINATE_AFTER = "gitopsq.dev/terminate-after"
T = TypeVar("T")


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

        from gitopsq.cluster.apply import KubeRest
        from gitopsq.errors import ClusterError

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
                for item in listed["items"]:  # Workloads keep Kueue's finalizer when no loop is left to remove it
                    meta = item["metadata"]
                    if meta.get("finalizers"):
                        with contextlib.suppress(ClusterError):
                            KubeRest(api).request(
                                "PATCH", f"/apis/{crd.spec.group}/{version}/namespaces/{meta['namespace']}/{plural}/"
                                f"{meta['name']}", body={"metadata": {"finalizers": None}},
                                content_type="application/merge-patch+json", retry=False)


def fake_node(
    name: str,
    *,
    labels: Mapping[str, str] | None = None,
    taints: list[dict[str, str]] | None = None,
    cpu: str = "32",
    memory: str = "256Gi",
    gpus: int = 0,
    pods: int = 110,
) -> dict[str, Any]:
    """A Node manifest KWOK plays: the fake-node annotation, the test's labels and taints, and its capacity.

    ``taints`` are dicts with ``key``, ``value`` (optional) and ``effect``. Capacity and allocatable are equal.
    """
    capacity = {"cpu": cpu, "memory": memory, "pods": str(pods)}
    if gpus:
        capacity[GPU] = str(gpus)
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "annotations": {FAKE_NODE_ANNOTATION: "fake"},
            "labels": {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", **(labels or {})},
        },
        "spec": {"taints": list(taints or [])},
        "status": {"capacity": capacity, "allocatable": dict(capacity)},
    }


def wait_for(what: str, probe: Callable[[], T | None], timeout: float = 60.0, interval: float = 0.1) -> T:
    """Poll ``probe`` until it returns something other than None/False; fail naming ``what`` after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        found = probe()
        if found is not None and found is not False:
            return found
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(interval)


class FullCluster(Envtest):
    """The full rig: real Job controller, garbage collectors, scheduler, and KWOK playing fake nodes."""

    def new_namespace(self, prefix: str = "test") -> str:
        """Create a namespace and wait for its ``default`` ServiceAccount (pods are refused until it exists)."""
        from kubernetes import client
        from kubernetes.client.exceptions import ApiException

        name = super().new_namespace(prefix)

        def has_default_account() -> bool:
            with self.api_client() as api:
                try:
                    client.CoreV1Api(api).read_namespaced_service_account("default", name)
                except ApiException as err:
                    if err.status == 404:
                        return False
                    raise
            return True

        wait_for(f"ServiceAccount default in {name}", has_default_account, timeout=30)
        return name

    def add_nodes(self, manifests: list[dict[str, Any]], timeout: float = 30.0) -> list[str]:
        """Create the Nodes and wait until KWOK has made every one Ready; return their names."""
        from kubernetes import client

        names = [m["metadata"]["name"] for m in manifests]
        with self.api_client() as api:
            core = client.CoreV1Api(api)
            for manifest in manifests:
                core.create_node(manifest)
                # status on create is not guaranteed to be kept: write capacity through the status subresource
                core.patch_node_status(manifest["metadata"]["name"], {"status": manifest["status"]})

        def all_ready() -> bool:
            with self.api_client() as api:
                nodes = {n.metadata.name: n for n in client.CoreV1Api(api).list_node().items}
            return all(_node_ready(nodes.get(name)) for name in names)

        wait_for(f"KWOK to make nodes {names[0]}… ({len(names)}) Ready", all_ready, timeout=timeout)
        return names

    def delete_nodes(self, names: list[str]) -> None:
        from kubernetes import client
        from kubernetes.client.exceptions import ApiException

        with self.api_client() as api:
            core = client.CoreV1Api(api)
            for name in names:
                try:
                    core.delete_node(name)
                except ApiException as err:
                    if err.status != 404:
                        raise


def _node_ready(node: Any) -> bool:
    conditions = (node.status.conditions or []) if node is not None and node.status else []
    return any(c.type == "Ready" and c.status == "True" for c in conditions)


class NodePools:
    """Adds pools of fake nodes to the full rig and remembers them so the fixture can delete them afterwards."""

    def __init__(self, cluster: FullCluster) -> None:
        self.cluster = cluster
        self.created: list[str] = []

    def add(
        self,
        pool: str,
        count: int,
        *,
        gpus: int = 0,
        cpu: str = "32",
        memory: str = "256Gi",
        pods: int = 110,
        labels: Mapping[str, str] | None = None,
        taints: list[dict[str, str]] | None = None,
    ) -> list[str]:
        """``count`` Ready nodes named ``<pool>-<n>`` labelled ``pool=<pool>`` (plus ``labels``); their names."""
        pool_labels = {"pool": pool, **(labels or {})}
        shape = {"cpu": cpu, "memory": memory, "gpus": gpus, "pods": pods}
        manifests = [fake_node(f"{pool}-{i}", labels=pool_labels, taints=taints, **shape) for i in range(count)]
        names = self.cluster.add_nodes(manifests)
        self.created += names
        return names


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
def full_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FullCluster]:
    """One full rig for the session (its own etcd and kube-apiserver), started on first use."""
    binaries = prepare(log=True, full=True)
    # the JobSet controller only for the tests that ask for it (`jobset_cluster`): on 2 cores its start-up
    # load shifts the timing of the other full-rig tests
    rig = Rig.start(binaries, tmp_path_factory.mktemp("fullrig"), full=True, jobset=False, kuberay=False)
    _started.append(rig)
    try:
        yield FullCluster(rig, str(binaries.kubectl))
    finally:
        rig.stop()


@pytest.fixture(scope="session")
def jobset_cluster(full_cluster: FullCluster) -> FullCluster:
    """The full rig with the JobSet CRD and the real JobSet controller (started once, on first use)."""
    if not full_cluster.rig.state.jobset_pid:
        full_cluster.rig.install_jobset()
    return full_cluster


@pytest.fixture(scope="session")
def trainer_cluster(jobset_cluster: FullCluster) -> FullCluster:
    """The full rig with JobSet and the real Kubeflow Trainer controller manager (started once, on first use)."""
    if not jobset_cluster.rig.state.trainer_pid:
        jobset_cluster.rig.install_trainer()
    return jobset_cluster


@pytest.fixture(scope="session")
def kuberay_cluster(full_cluster: FullCluster) -> FullCluster:
    """The full rig with the Ray CRDs and the real KubeRay operator (started once, on first use)."""
    if not full_cluster.rig.state.kuberay_pid:
        full_cluster.rig.install_kuberay()
    return full_cluster


@pytest.fixture
def node_pools(full_cluster: FullCluster) -> Iterator[NodePools]:
    """Add fake nodes to the full rig for one test; they are deleted (their pods reaped by podgc) afterwards."""
    pools = NodePools(full_cluster)
    yield pools
    full_cluster.delete_nodes(pools.created)


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
        if RIG_FIXTURES.intersection(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.envtest)
