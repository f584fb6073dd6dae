"""Running alongside Argo CD and Flux: the config-management plugin runs `gitopsq render` the way Argo CD's
plugin server does, the exclusions cover what gitopsq owns, and the Applications / HelmRelease values are
values the chart accepts."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from chart_helm import ROOT, Helm

DEPLOY = ROOT / "deploy"
CMP = DEPLOY / "argocd" / "cmp"
TEMPLATE = ROOT / "repo-template"


def load(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def plugin() -> dict[str, Any]:
    return load(CMP / "plugin.yaml")[0]


def source_checkout(tmp_path: Path, *, source_path: str = "queues") -> Path:
    """What the plugin server receives: the repository files with the Application's path inside it."""
    app_dir = tmp_path / "checkout" / source_path
    shutil.copytree(TEMPLATE, app_dir)
    return app_dir


def run_like_cmp_server(app_dir: Path, tmp_path: Path, **extra_env: str) -> subprocess.CompletedProcess[str]:
    """Run the plugin's generate command with the working directory and environment the Argo CD plugin server
    gives it (ARGOCD_APP_* build environment, ARGOCD_ENV_* from the Application, KUBE_VERSION)."""
    spec = plugin()["spec"]["generate"]
    argv = [*spec["command"], *spec.get("args", [])]
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    env = {
        "PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin",
        "HOME": str(home), "XDG_CACHE_HOME": str(home / ".cache"),
        "ARGOCD_APP_NAME": "queues", "ARGOCD_APP_NAMESPACE": "argocd",
        "ARGOCD_APP_PROJECT_NAME": "default",
        "ARGOCD_APP_REVISION": "4f1c2e9d0b8a7c6d5e4f3a2b1c0d9e8f7a6b5c4d", "ARGOCD_APP_REVISION_SHORT": "4f1c2e9",
        "ARGOCD_APP_SOURCE_PATH": os.path.relpath(app_dir, app_dir.parent.parent),
        "ARGOCD_APP_SOURCE_REPO_URL": "https://git.example.com/platform/queues.git",
        "ARGOCD_APP_SOURCE_TARGET_REVISION": "main",
        "KUBE_VERSION": "1.36.3", "KUBE_API_VERSIONS": "v1,apps/v1,batch/v1,kueue.x-k8s.io/v1beta2",
        **extra_env,
    }
    return subprocess.run(argv, cwd=app_dir, env=env, capture_output=True, text=True, timeout=120, check=False)


def test_plugin_configmap_holds_plugin_yaml() -> None:
    """The ConfigMap mounted into the sidecar carries exactly deploy/argocd/cmp/plugin.yaml."""
    cm = load(CMP / "plugin-configmap.yaml")[0]
    assert cm["data"]["plugin.yaml"] == (CMP / "plugin.yaml").read_text()
    patch = load(CMP / "repo-server-patch.yaml")[0]
    sidecar = patch["spec"]["template"]["spec"]["containers"][0]
    assert sidecar["securityContext"]["runAsUser"] == 999  # Argo CD's requirement for plugin sidecars
    mount = next(m for m in sidecar["volumeMounts"] if m["name"] == "gitopsq-cmp-plugin")
    assert mount["mountPath"] == "/home/argocd/cmp-server/config/plugin.yaml"


def test_plugin_is_discovered_by_the_repository_config_file() -> None:
    """Argo CD picks the plugin for a source path that holds gitopsq.yaml, as every queue repository does."""
    discover = plugin()["spec"]["discover"]["fileName"]
    assert (TEMPLATE / discover).is_file()


def test_plugin_renders_validated_manifests(tmp_path: Path) -> None:
    """Run as the plugin server runs it, `gitopsq render` prints only v1beta2 queue objects (and Namespaces,
    PriorityClasses), none carrying Argo CD's tracking markers, and nothing else on stdout."""
    done = run_like_cmp_server(source_checkout(tmp_path), tmp_path)
    assert done.returncode == 0, done.stderr
    objects = [d for d in yaml.safe_load_all(done.stdout) if d]
    kinds = {o["kind"] for o in objects}
    assert {"ClusterQueue", "LocalQueue", "ResourceFlavor", "Namespace"} <= kinds
    for o in objects:
        if o["apiVersion"].startswith("kueue.x-k8s.io/"):
            assert o["apiVersion"] == "kueue.x-k8s.io/v1beta2"
        assert "argocd.argoproj.io/tracking-id" not in (o["metadata"].get("annotations") or {})


def test_plugin_refuses_an_invalid_revision_with_no_manifests(tmp_path: Path) -> None:
    """A queue repository with an error gives a non-zero exit and an empty stdout, so Argo CD reports a
    ComparisonError and applies nothing; the finding (file:line) is on stderr."""
    app_dir = source_checkout(tmp_path)
    queue = app_dir / "teams" / "serving" / "cluster-queue.yaml"
    queue.write_text(queue.read_text().replace("nominalQuota:", "nominalQuota: -1\n        ignored:", 1))
    done = run_like_cmp_server(app_dir, tmp_path)
    assert done.returncode == 1
    assert done.stdout == ""
    assert "cluster-queue.yaml" in done.stderr


def test_plugin_output_does_not_depend_on_the_argocd_environment(tmp_path: Path) -> None:
    """Two Applications at different revisions render the same files identically (the output is a function of
    the source path alone, so Argo CD's manifest cache is safe)."""
    app_dir = source_checkout(tmp_path)
    first = run_like_cmp_server(app_dir, tmp_path)
    second = run_like_cmp_server(app_dir, tmp_path, ARGOCD_APP_NAME="queues-staging",
                                 ARGOCD_APP_REVISION="0" * 40, ARGOCD_ENV_EXTRA="1")
    assert first.returncode == second.returncode == 0
    assert first.stdout == second.stdout


def exclusions(path: Path) -> list[dict[str, Any]]:
    cm = load(path)[0]
    assert cm["metadata"]["name"] == "argocd-cm" and cm["metadata"]["namespace"] == "argocd"
    return list(yaml.safe_load(cm["data"]["resource.exclusions"]))


def excluded(rules: list[dict[str, Any]], group: str, kind: str) -> bool:
    return any(group in r["apiGroups"] and ("*" in r["kinds"] or kind in r["kinds"]) and "*" in r["clusters"]
               for r in rules)


KUEUE_KINDS = ["ResourceFlavor", "ClusterQueue", "LocalQueue", "Cohort", "WorkloadPriorityClass", "AdmissionCheck",
               "Topology", "ProvisioningRequestConfig", "MultiKueueConfig", "MultiKueueCluster", "Workload"]


@pytest.mark.parametrize("kind", KUEUE_KINDS)
def test_split_topology_excludes_every_kueue_kind(kind: str) -> None:
    """In the recommended split Argo CD ignores every kueue.x-k8s.io kind gitopsq serves CRDs for."""
    assert excluded(exclusions(DEPLOY / "argocd" / "split" / "argocd-cm-exclusions.yaml"), "kueue.x-k8s.io", kind)


@pytest.mark.parametrize("kind", KUEUE_KINDS)
def test_admission_only_topology_excludes_only_workloads(kind: str) -> None:
    """When Argo CD applies the queues it must see them; only the Workloads gitopsq creates are excluded."""
    rules = exclusions(DEPLOY / "argocd" / "admission-only" / "argocd-cm-exclusions.yaml")
    assert excluded(rules, "kueue.x-k8s.io", kind) == (kind == "Workload")


def test_kueue_crd_kinds_are_the_ones_listed() -> None:
    """The kinds checked above are exactly the kueue.x-k8s.io CRDs gitopsq ships."""
    kinds = {load(p)[0]["spec"]["names"]["kind"] for p in (ROOT / "gitopsq" / "data" / "crds").glob("kueue*.yaml")}
    assert kinds == set(KUEUE_KINDS)


@pytest.mark.parametrize("manifest", [
    pytest.param("argocd/split/gitopsq-application.yaml", id="argocd-split"),
    pytest.param("argocd/admission-only/gitopsq-application.yaml", id="argocd-admission-only"),
    pytest.param("flux/gitopsq-helmrelease.yaml", id="flux-helmrelease"),
])
def test_gitops_tools_install_the_chart_with_valid_values(helm: Helm, manifest: str) -> None:
    """The values an Application or HelmRelease passes render with the real chart (schema included), and the
    chart path they point at is the chart in this repository."""
    doc = load(DEPLOY / manifest)[0]
    if doc["kind"] == "Application":
        values, path = doc["spec"]["source"]["helm"]["valuesObject"], doc["spec"]["source"]["path"]
    else:
        values, path = doc["spec"]["values"], doc["spec"]["chart"]["spec"]["chart"]
    assert (ROOT / path / "Chart.yaml").is_file()
    rendered = helm.render(values, with_repo=False, namespace="gitopsq-system")
    assert rendered.has("Deployment")


def test_argocd_ignores_the_injected_ca_bundle() -> None:
    """The chart Applications ignore caBundle on both webhook configurations, which gitopsq (or cert-manager)
    writes after install; otherwise self-heal would fight the injector."""
    for manifest in ("split/gitopsq-application.yaml", "admission-only/gitopsq-application.yaml"):
        ignored = load(DEPLOY / "argocd" / manifest)[0]["spec"]["ignoreDifferences"]
        kinds = {i["kind"] for i in ignored if ".webhooks[].clientConfig.caBundle" in i.get("jqPathExpressions", [])}
        assert kinds == {"MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"}


def test_flux_keeps_the_queue_directory_out_of_its_artifact() -> None:
    """The fleet GitRepository's ignore rules exclude the queue directory, so no Flux Kustomization applies it."""
    source = load(DEPLOY / "flux" / "fleet-source-ignore.yaml")[0]
    assert "/queues/" in source["spec"]["ignore"].splitlines()
    release = load(DEPLOY / "flux" / "gitopsq-helmrelease.yaml")[0]
    assert release["spec"]["install"]["crds"] == "Create"
