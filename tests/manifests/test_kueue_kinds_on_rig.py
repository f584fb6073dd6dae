"""What gitopsq renders, the API server keeps: the rig with gitopsq's CRDs (all eleven Kueue kinds), and a rig of
its own with Kueue v0.19.2's CRDs, accept a sample of rendered objects generated from Kueue's own schemas
(server-side dry run) and echo every field back (a CRD that pruned a field would drop it silently); `gitopsq
apply` creates, updates and prunes each of Kueue's configuration kinds for real."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from controller_process import ROOT
from envtest_rig import Envtest, Rig, prepare
from hypothesis import HealthCheck, given, settings
from queue_repo import get, template_repo

from gitopsq.cluster.apply import KubeRest
from gitopsq.cluster.kinds import kind_of
from gitopsq.manifests.check_report import Report
from gitopsq.manifests.loader import load_file
from gitopsq.manifests.render import render_documents
from tests.api.crd_strategies import KINDS, VERSIONS, differences, dump, kueue_crd_dir, objects

pytestmark = pytest.mark.envtest

SAMPLE = 25  # accepted objects per kind and version sent to the server


def rendered_sample(kind: str, version: str) -> list[dict[str, Any]]:
    """Up to SAMPLE rendered documents of accepted generated objects (seeded)."""
    out: list[dict[str, Any]] = []

    @settings(max_examples=SAMPLE * 2, derandomize=True, database=None, deadline=None,
              suppress_health_check=list(HealthCheck))
    @given(objects(kind, version))
    def collect(doc: dict[str, Any]) -> None:
        result = load_file("platform/generated.yaml", dump(doc))
        if result.entries and not any(f.is_error for f in result.findings) and len(out) < SAMPLE:
            out.append(yaml.safe_load(render_documents(Report(None, None, result.entries, ()))))

    collect()
    return out


@pytest.fixture(scope="module")
def upstream(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Envtest]:
    """A rig of its own with Kueue's CRDs from the Go module cache, Established."""
    binaries = prepare(log=True)
    rig = Rig.start(binaries, Path(tmp_path_factory.mktemp("kueue-crds")))
    try:
        env = Envtest(rig, str(binaries.kubectl))
        env.kubectl("apply", "--server-side", "-f", str(kueue_crd_dir()))
        env.kubectl("wait", "--for=condition=Established", "--timeout=60s", "crd", "--all")
        yield env
    finally:
        rig.stop()


def test_rendered_objects_pass_gitopsqs_crds_with_every_field(kueue_crds: Envtest) -> None:
    assert dry_run_sample(kueue_crds) >= len(KINDS) * len(VERSIONS) * SAMPLE // 2


def test_rendered_objects_pass_kueues_own_crds_with_every_field(upstream: Envtest) -> None:
    served = upstream.kubectl("get", "crd", "clusterqueues.kueue.x-k8s.io", "-o", "jsonpath={.spec.versions[*].name}")
    assert served.stdout.split() == ["v1beta1", "v1beta2"], "not Kueue's CRD (gitopsq's serves v1beta2 only)"
    assert dry_run_sample(upstream) >= len(KINDS) * len(VERSIONS) * SAMPLE // 2


def dry_run_sample(env: Envtest) -> int:
    """Send the rendered sample of every kind and version (server-side dry run); each must come back whole."""
    rest = KubeRest(env.api_client())
    namespace = env.new_namespace("fields")
    sent = 0
    for kind in KINDS:
        registered = kind_of("kueue.x-k8s.io", kind)
        assert registered is not None, kind
        for version in VERSIONS:
            for doc in rendered_sample(kind, version):
                if registered.namespaced:
                    doc["metadata"]["namespace"] = namespace
                echoed = rest.request("POST", registered.collection_path(namespace), body=doc,
                                      query=[("dryRun", "All"), ("fieldValidation", "Strict")], obj=kind)
                assert differences(doc, echoed) == [], (doc, echoed)
                sent += 1
    return sent


CONFIG_KINDS = """---
apiVersion: kueue.x-k8s.io/v1beta2
kind: Topology
metadata: {{name: {tag}-dc}}
spec:
  levels: [{{nodeLabel: cloud.example.com/block}}, {{nodeLabel: kubernetes.io/hostname}}]
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {{name: {tag}-tas}}
spec:
  nodeLabels: {{pool: tas}}
  topologyName: {tag}-dc
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ProvisioningRequestConfig
metadata: {{name: {tag}-prc}}
spec:
  provisioningClassName: {klass}
  managedResources: [nvidia.com/gpu]
  parameters: {{ValidUntilSeconds: "60"}}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: MultiKueueCluster
metadata: {{name: {tag}-worker}}
spec:
  kubeConfig: {{location: {tag}-worker-secret, locationType: Secret}}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: MultiKueueConfig
metadata: {{name: {tag}-mk}}
spec:
  clusters: [{tag}-worker]
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: AdmissionCheck
metadata: {{name: {tag}-prov}}
spec:
  controllerName: kueue.x-k8s.io/provisioning-request
  parameters: {{apiGroup: kueue.x-k8s.io, kind: ProvisioningRequestConfig, name: {tag}-prc}}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: AdmissionCheck
metadata: {{name: {tag}-multikueue}}
spec:
  controllerName: kueue.x-k8s.io/multikueue
  parameters: {{apiGroup: kueue.x-k8s.io, kind: MultiKueueConfig, name: {tag}-mk}}
"""
NEW_KINDS = {"Topology": "topologies", "ProvisioningRequestConfig": "provisioningrequestconfigs",
             "MultiKueueConfig": "multikueueconfigs", "MultiKueueCluster": "multikueueclusters"}


def gitopsq(env: Envtest, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gitopsq", *args, "--kubeconfig", str(env.kubeconfig)],
                          cwd=ROOT, capture_output=True, text=True, check=False, timeout=120)


def test_apply_creates_updates_and_prunes_the_configuration_kinds(kueue_clean: Envtest, tmp_path: Path) -> None:
    repo = template_repo(tmp_path / "queues", "k")
    tag = repo.tag
    repo.write("queues/configs.yaml", CONFIG_KINDS.format(tag=tag, klass="check-capacity.autoscaling.x-k8s.io"))
    repo.commit("configuration kinds")
    done = gitopsq(kueue_clean, "apply", str(repo.path), "--name", tag, "-o", "json")
    assert done.returncode == 0, done.stdout + done.stderr
    applied = {a["object"] for a in json.loads(done.stdout)["applied"] if a["done"]}
    assert applied >= {f"Topology/{tag}-dc", f"ProvisioningRequestConfig/{tag}-prc", f"MultiKueueConfig/{tag}-mk",
                       f"MultiKueueCluster/{tag}-worker", f"AdmissionCheck/{tag}-prov", f"ResourceFlavor/{tag}-tas"}

    def live(plural: str, name: str) -> dict[str, Any] | None:
        return get(kueue_clean, f"/apis/kueue.x-k8s.io/v1beta2/{plural}/{name}")

    topology = live("topologies", f"{tag}-dc")
    assert topology is not None and [lv["nodeLabel"] for lv in topology["spec"]["levels"]] == [
        "cloud.example.com/block", "kubernetes.io/hostname"]
    cluster = live("multikueueclusters", f"{tag}-worker")  # written in v1beta1, applied converted
    assert cluster is not None and cluster["spec"] == {
        "clusterSource": {"kubeConfig": {"location": f"{tag}-worker-secret", "locationType": "Secret"}}}
    prc = live("provisioningrequestconfigs", f"{tag}-prc")
    assert prc is not None and prc["spec"]["retryStrategy"] == {"backoffLimitCount": 3, "backoffBaseSeconds": 60,
                                                                "backoffMaxSeconds": 1800}
    flavor = live("resourceflavors", f"{tag}-tas")
    assert flavor is not None and flavor["spec"]["topologyName"] == f"{tag}-dc"

    repo.write("queues/configs.yaml", CONFIG_KINDS.format(tag=tag, klass="best-effort-atomic-scale-up.autoscaling."
                                                                        "x-k8s.io"))
    repo.commit("another provisioning class")
    assert gitopsq(kueue_clean, "apply", str(repo.path), "--name", tag).returncode == 0
    prc = live("provisioningrequestconfigs", f"{tag}-prc")
    assert prc is not None and prc["spec"]["provisioningClassName"].startswith("best-effort-atomic")

    repo.remove("queues/configs.yaml")
    repo.commit("no configuration kinds")
    pruned = gitopsq(kueue_clean, "apply", str(repo.path), "--name", tag, "--prune")
    assert pruned.returncode == 0, pruned.stdout + pruned.stderr
    for kind, plural in NEW_KINDS.items():
        name = {"Topology": "dc", "ProvisioningRequestConfig": "prc", "MultiKueueConfig": "mk",
                "MultiKueueCluster": "worker"}[kind]
        assert live(plural, f"{tag}-{name}") is None, kind
