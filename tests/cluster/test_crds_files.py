"""The bundled CRD files themselves: names, scopes, versions, short names, printer columns (no cluster)."""

from __future__ import annotations

from typing import Any

import pytest

from gitopsq.cluster.crds import MANAGED_BY_LABEL, MANAGED_BY_VALUE, bundled_crds, is_gitopsq_managed

EXPECTED = {
    # name: (kind, scope, short names, has status subresource)
    "admissionchecks.kueue.x-k8s.io": ("AdmissionCheck", "Cluster", ["ac"], True),
    "clusterqueues.kueue.x-k8s.io": ("ClusterQueue", "Cluster", ["cq"], True),
    "cohorts.kueue.x-k8s.io": ("Cohort", "Cluster", ["co"], True),
    "localqueues.kueue.x-k8s.io": ("LocalQueue", "Namespaced", ["lq", "queue", "queues"], True),
    "resourceflavors.kueue.x-k8s.io": ("ResourceFlavor", "Cluster", ["rf", "flavor", "flavors"], False),
    "workloadpriorityclasses.kueue.x-k8s.io": ("WorkloadPriorityClass", "Cluster", ["wpc"], False),
    "workloads.kueue.x-k8s.io": ("Workload", "Namespaced", ["wl", "kwl"], True),
    "topologies.kueue.x-k8s.io": ("Topology", "Cluster", ["topo"], False),
    "provisioningrequestconfigs.kueue.x-k8s.io": ("ProvisioningRequestConfig", "Cluster", ["prc"], False),
    "multikueueconfigs.kueue.x-k8s.io": ("MultiKueueConfig", "Cluster", ["mkconf"], False),
    "multikueueclusters.kueue.x-k8s.io": ("MultiKueueCluster", "Cluster", ["mkc"], True),
    "gitsources.gitopsq.dev": ("GitSource", "Namespaced", ["gs"], True),
}


def _by_name() -> dict[str, dict[str, Any]]:
    return {crd["metadata"]["name"]: crd for crd in bundled_crds()}


def _version(crd: dict[str, Any]) -> dict[str, Any]:
    (version,) = crd["spec"]["versions"]
    return version


def test_exactly_the_expected_crds_are_bundled() -> None:
    """The package ships the eleven Kueue kinds gitopsq manages plus its own GitSource, nothing else."""
    assert sorted(_by_name()) == sorted(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED), ids=lambda n: n.split(".")[0])
def test_crd_names_scope_and_status(name: str) -> None:
    """Each CRD has Kueue's kind, scope and short names, and a status subresource where Kueue has one."""
    crd = _by_name()[name]
    kind, scope, short_names, has_status = EXPECTED[name]
    assert crd["spec"]["names"]["kind"] == kind
    assert crd["spec"]["scope"] == scope
    assert crd["spec"]["names"]["shortNames"] == short_names
    assert ("status" in _version(crd).get("subresources", {})) is has_status


@pytest.mark.parametrize("name", sorted(EXPECTED), ids=lambda n: n.split(".")[0])
def test_every_crd_is_labelled_as_gitopsq_managed(name: str) -> None:
    """Our label is what tells our CRDs from an upstream Kueue installation's."""
    crd = _by_name()[name]
    assert crd["metadata"]["labels"][MANAGED_BY_LABEL] == MANAGED_BY_VALUE
    assert is_gitopsq_managed(crd)


@pytest.mark.parametrize("name", [n for n in sorted(EXPECTED) if n.endswith("kueue.x-k8s.io")],
                         ids=lambda n: n.split(".")[0])  # fmt: skip
def test_kueue_kinds_are_served_and_stored_as_v1beta2_only(name: str) -> None:
    """v1beta1 manifests are converted by gitopsq before apply, so only v1beta2 is served (no conversion webhook)."""
    version = _version(_by_name()[name])
    assert (version["name"], version["served"], version["storage"]) == ("v1beta2", True, True)


PRINTER_COLUMNS = {
    "clusterqueues.kueue.x-k8s.io": [
        ("Cohort", ".spec.cohortName", 0),
        ("Strategy", ".spec.queueingStrategy", 1),
        ("Pending Workloads", ".status.pendingWorkloads", 0),
        ("Admitted Workloads", ".status.admittedWorkloads", 1),
    ],
    "localqueues.kueue.x-k8s.io": [
        ("ClusterQueue", ".spec.clusterQueue", 0),
        ("Pending Workloads", ".status.pendingWorkloads", 0),
        ("Admitted Workloads", ".status.admittedWorkloads", 0),
    ],
    "workloads.kueue.x-k8s.io": [
        ("Queue", ".spec.queueName", 0),
        ("Reserved in", ".status.admission.clusterQueue", 0),
        ("Admitted", ".status.conditions[?(@.type=='Admitted')].status", 0),
        ("Finished", ".status.conditions[?(@.type=='Finished')].status", 0),
        ("Age", ".metadata.creationTimestamp", 0),
    ],
    "workloadpriorityclasses.kueue.x-k8s.io": [("Value", ".value", 0)],
    "gitsources.gitopsq.dev": [
        ("Ready", ".status.conditions[?(@.type=='Ready')].status", 0),
        ("Revision", ".status.lastAppliedRevision", 0),
        ("Status", ".status.conditions[?(@.type=='Ready')].message", 1),
        ("Age", ".metadata.creationTimestamp", 0),
    ],
}


@pytest.mark.parametrize("name", sorted(PRINTER_COLUMNS), ids=lambda n: n.split(".")[0])
def test_printer_columns_match_what_kueue_users_see(name: str) -> None:
    """`kubectl get` shows Kueue's columns in Kueue's order (priority 1 = only with -o wide)."""
    columns = _version(_by_name()[name])["additionalPrinterColumns"]
    assert [(c["name"], c["jsonPath"], c.get("priority", 0)) for c in columns] == PRINTER_COLUMNS[name]


def test_cohort_and_clusterqueue_share_one_resource_groups_schema() -> None:
    """A Cohort's resourceGroups accept exactly what a ClusterQueue's do (the files must not drift apart)."""
    crds = _by_name()

    def groups(name: str) -> Any:
        return _version(crds[name])["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["resourceGroups"]

    assert groups("cohorts.kueue.x-k8s.io") == groups("clusterqueues.kueue.x-k8s.io")


@pytest.mark.parametrize(
    ("labels", "managers", "ours"),
    [
        pytest.param({MANAGED_BY_LABEL: MANAGED_BY_VALUE}, ["kubectl"], True, id="our-label"),
        pytest.param({}, ["gitopsq"], True, id="only-gitopsq-field-manager"),
        pytest.param({}, ["gitopsq", "kubectl-client-side-apply"], False, id="shared-with-another-manager"),
        pytest.param({MANAGED_BY_LABEL: "Helm"}, ["helm"], False, id="upstream-kueue-helm-chart"),
        pytest.param({}, [], False, id="no-label-no-managers"),
        pytest.param({}, ["gitopsq", "kube-apiserver/status"], True, id="apiserver-owns-only-status"),
    ],
)
def test_managed_by_detection(labels: dict[str, str], managers: list[str], ours: bool) -> None:
    """A live CRD is ours only with our label or with gitopsq as its only field manager outside status."""
    entries = [{"manager": m.split("/")[0], "subresource": m.partition("/")[2]} for m in managers]
    crd = {"metadata": {"labels": labels, "managedFields": entries}}
    assert is_gitopsq_managed(crd) is ours
