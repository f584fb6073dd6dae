"""The rendered chart against the real API server: every object passes a server-side dry run, and the controller
runs with exactly the rendered arguments and environment, as the chart's ServiceAccount under the chart's RBAC."""

from __future__ import annotations

import json
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from chart_helm import ROOT, Helm, Rendered
from chart_pod import PodFiles, PodProcess, secret_manifest
from chart_rig import apply, free_port, service_account_kubeconfig
from envtest_rig import Envtest

from gitopsq.webhook.push import sign

pytestmark = pytest.mark.envtest
FIXTURES = Path(__file__).parent / "fixtures"


@pytest.fixture(scope="module")
def rig(kueue_crds: Envtest) -> Envtest:
    """The rig with our CRDs plus permissive stand-ins for the monitoring, cert-manager, Argo CD and Flux kinds."""
    crds = str(FIXTURES / "foreign-crds.yaml")
    kueue_crds.kubectl("apply", "--server-side", "--field-manager=chart-tests", "-f", crds)
    kueue_crds.kubectl("wait", "--for=condition=Established", "--timeout=60s", "-f", crds)
    return kueue_crds


@pytest.mark.parametrize("values", [
    pytest.param({}, id="defaults"),
    pytest.param({"webhook": {"enabled": True}}, id="job-webhook-self-generated-certificates"),
    pytest.param({"webhook": {"enabled": True, "certManager": {"enabled": True}}},
                 id="cert-manager-self-signed-issuer"),
    pytest.param({"webhook": {"enabled": True, "certManager": {
        "enabled": True, "issuerRef": {"name": "corp", "kind": "ClusterIssuer", "group": "cert-manager.io"}}}},
                 id="cert-manager-cluster-issuer"),
    pytest.param({"metrics": {"serviceMonitor": {"enabled": False}}}, id="no-service-monitor"),
    pytest.param({"tolerations": [{"key": "dedicated", "operator": "Equal", "value": "platform",
                                   "effect": "NoSchedule"}], "nodeSelector": {"pool": "system"}},
                 id="extra-tolerations"),
    pytest.param({"mode": "sync"}, id="sync-only"),
    pytest.param({"mode": "admission", "repo": {"url": ""}, "webhook": {"enabled": True}}, id="admission-only"),
    pytest.param({"git": {"tokenSecret": {"name": "t"}, "sshSecret": {"name": "s"}},
                  "gitWebhook": {"secret": {"name": "h"}}, "signing": {"secret": {"name": "k"}}},
                 id="all-secrets"),
    pytest.param({"replicaCount": 1, "leaderElection": {"enabled": False}, "podDisruptionBudget": {"enabled": False}},
                 id="single-replica"),
])
def test_every_rendered_object_passes_server_side_dry_run(helm: Helm, rig: Envtest, values: dict[str, Any]) -> None:
    """kube-apiserver accepts every object the chart renders (schemas, names, references between fields)."""
    namespace = rig.new_namespace("chart")
    rendered = helm.render(values, release=f"r{uuid.uuid4().hex[:6]}", namespace=namespace, include_crds=True)
    done = apply(rig, rendered.objects, dry_run=True)
    assert done.returncode == 0, done.stderr
    assert len(done.stdout.split()) == len(rendered.objects)


# plugin.yaml is a file the Argo CD plugin server reads, not an API object (its ConfigMap is dry-run instead)
@pytest.mark.parametrize("manifest", sorted(str(p.relative_to(ROOT / "deploy"))
                                            for p in (ROOT / "deploy").rglob("*.yaml") if p.name != "plugin.yaml"))
def test_argocd_and_flux_manifests_pass_server_side_dry_run(rig: Envtest, manifest: str) -> None:
    """Each manifest of deploy/ (Applications, argocd-cm, the CMP ConfigMap and repo-server patch as a
    Deployment, Flux sources and releases) is accepted by the API server."""
    for namespace in ("argocd", "flux-system"):
        rig.kubectl("create", "namespace", namespace, check=False)
    objects = [d for d in yaml.safe_load_all((ROOT / "deploy" / manifest).read_text()) if d]
    if objects[0]["kind"] == "Deployment":  # a strategic-merge patch: complete it into a Deployment
        spec = objects[0]["spec"]
        spec["selector"] = {"matchLabels": {"app": "repo-server"}}
        spec["template"]["metadata"] = {"labels": {"app": "repo-server"}}
        spec["template"]["spec"]["volumes"] += [{"name": "var-files", "emptyDir": {}},
                                                 {"name": "plugins", "emptyDir": {}}]
    done = apply(rig, objects, dry_run=True)
    assert done.returncode == 0, done.stderr


QUEUE_CONFIG = """apiVersion: gitopsq.dev/v1alpha1
kind: RepositoryConfig
include: [queues.yaml]
platformTeam: platform
teams:
  - name: platform
    paths: ["**"]
    namespaces: [{tag}]
    maintainers:
      - name: Test Committer
        email: t@example.com
        signingKeys: ["1111111111111111111111111111111111111111"]
"""


def queue_repo(path: Path, tag: str) -> Path:
    """A real Git repository with one team's namespace, flavor, ClusterQueue and LocalQueue (unique names)."""
    path.mkdir()
    (path / "gitopsq.yaml").write_text(QUEUE_CONFIG.format(tag=tag))
    (path / "queues.yaml").write_text(f"""apiVersion: v1
kind: Namespace
metadata:
  name: {tag}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata:
  name: {tag}-default
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata:
  name: {tag}
spec:
  namespaceSelector: {{}}
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: {tag}-default
      resources:
      - name: cpu
        nominalQuota: "8"
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata:
  name: main
  namespace: {tag}
spec:
  clusterQueue: {tag}
""")
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@example.com", "PATH": "/usr/bin:/bin"}
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-q", "-m", "queues"]):
        subprocess.run(["git", *args], cwd=path, env=env, check=True, capture_output=True)
    return path


def can_i(rig: Envtest, kubeconfig: Path, *args: str) -> bool:
    done = subprocess.run([rig._kubectl, "--kubeconfig", str(kubeconfig), "auth", "can-i", *args],
                          capture_output=True, text=True, check=False)
    return done.stdout.strip() == "yes"


@pytest.fixture(scope="module")
def installed(helm: Helm, rig: Envtest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """The chart installed for real as far as the rig allows: ServiceAccount, RBAC, Services and Secrets
    (webhook configurations only dry-run: without a serving pod they would refuse every Job in the rig)."""
    tmp_path = tmp_path_factory.mktemp("installed")
    tag = f"chart-{uuid.uuid4().hex[:6]}"
    namespace = rig.new_namespace("gitopsq")
    release = f"r{uuid.uuid4().hex[:6]}"
    health, metrics = free_port(), free_port()
    repo = queue_repo(tmp_path / "queues", tag)
    audit_remote = tmp_path / "audit.git"
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(audit_remote)], check=True)
    secrets = {"git-token": {"token": b"not-used-by-a-local-repository"}, "git-webhook": {"secret": b"hook-secret"}}
    values = {"repo": {"url": f"file://{repo}", "sourceName": tag, "interval": "2s"},
              "health": {"port": health}, "metrics": {"port": metrics},
              "git": {"tokenSecret": {"name": "git-token"}}, "gitWebhook": {"secret": {"name": "git-webhook"}},
              "audit": {"enabled": True, "repo": f"file://{audit_remote}"},
              "leaderElection": {"leaseName": f"{release}-lease", "leaseDuration": "4s", "renewDeadline": "3s",
                                 "retryPeriod": "1s"}}
    rendered = helm.render(values, release=release, namespace=namespace)
    real = [o for o in rendered.objects if o["kind"] in {"ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role",
                                                          "RoleBinding", "Service"}]
    real += [secret_manifest(name, namespace, data) for name, data in secrets.items()]
    done = apply(rig, real, dry_run=False)
    assert done.returncode == 0, done.stderr
    assert apply(rig, rendered.objects, dry_run=True).returncode == 0
    account = rendered.get("ServiceAccount")["metadata"]["name"]
    kubeconfig = service_account_kubeconfig(rig, namespace, account, tmp_path / "sa.kubeconfig")
    yield {"rendered": rendered, "namespace": namespace, "tag": tag, "health": health, "metrics": metrics,
           "secrets": secrets, "kubeconfig": kubeconfig, "release": release, "root": tmp_path,
           "audit_remote": audit_remote}
    for kind in ("clusterrolebinding", "clusterrole"):
        rig.kubectl("delete", kind, f"{release}-gitopsq", "--ignore-not-found", check=False)
    rig.delete_all()


def test_controller_runs_with_the_rendered_configuration(rig: Envtest, installed: dict[str, Any]) -> None:
    """Started with exactly the rendered args and env, as the chart's ServiceAccount: it serves /healthz,
    /readyz and metrics, takes the Lease, syncs the repository into the cluster under the chart's RBAC, and
    accepts a push webhook signed with the secret mounted from the chart's Secret; the audit trail reaches its
    branch and SIGTERM stops it cleanly."""
    rendered: Rendered = installed["rendered"]
    pod = PodProcess(PodFiles(rendered, installed["root"], secrets=installed["secrets"],
                              namespace=installed["namespace"], kubeconfig=installed["kubeconfig"]))
    try:
        _exercise(rig, installed, pod)
    finally:
        code = pod.stop()
    assert code == 0, pod.logs()[-3000:]


def _exercise(rig: Envtest, installed: dict[str, Any], pod: PodProcess) -> None:
    """Health, readiness, the sync as the ServiceAccount, the Lease, metrics and the push webhook, each reached
    the way the cluster would: probes and Services resolved through the rendered port names."""
    rendered: Rendered = installed["rendered"]
    container = rendered.container
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    for probe in ("livenessProbe", "readinessProbe"):
        get = container[probe]["httpGet"]
        pod.wait_http(ports[get["port"]], get["path"])
    metrics_service = rendered.get("Service", "-metrics")
    metrics_port = ports[metrics_service["spec"]["ports"][0]["targetPort"]]
    selector = metrics_service["spec"]["selector"]
    assert selector.items() <= rendered.get("Deployment")["spec"]["template"]["metadata"]["labels"].items()
    tag, namespace = installed["tag"], installed["namespace"]
    deadline = time.monotonic() + 90
    status: dict[str, Any] = {}
    while time.monotonic() < deadline:
        got = rig.kubectl("get", "gitsource", tag, "-n", namespace, "-o", "json", check=False)
        if got.returncode == 0:
            status = json.loads(got.stdout).get("status") or {}
            if status.get("lastAppliedRevision") or status.get("lastRejection"):
                break
        time.sleep(0.5)
    assert status.get("lastAppliedRevision"), pod.logs()[-3000:]
    cq = json.loads(rig.kubectl("get", "clusterqueue", tag, "-o", "json").stdout)
    assert cq["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"] == "8"
    lease = json.loads(rig.kubectl("get", "lease", f"{installed['release']}-lease", "-n", namespace,
                                   "-o", "json").stdout)
    assert lease["spec"]["holderIdentity"]
    pod.wait_series(metrics_port, rendered.get("ServiceMonitor")["spec"]["endpoints"][0]["path"],
                    [b"gitopsq_sync_total"])
    payload = json.dumps({"ref": "refs/heads/main"}).encode()
    assert pod.http(installed["health"], "/hooks/git", body=payload,
                    headers={"X-Hub-Signature-256": sign(b"wrong", payload)})[0] == 401
    assert pod.http(installed["health"], "/hooks/git", body=payload,
                    headers={"X-Hub-Signature-256": sign(b"hook-secret", payload),
                             "X-GitHub-Event": "push"})[0] in (200, 202)
    deadline = time.monotonic() + 60
    branch = subprocess.CompletedProcess([], 1)
    while time.monotonic() < deadline and branch.returncode != 0:
        time.sleep(0.5)
        branch = subprocess.run(["git", "--git-dir", str(installed["audit_remote"]), "rev-parse", "--verify",
                                 "refs/heads/gitopsq/audit"], capture_output=True, check=False)
    assert branch.returncode == 0, pod.logs()[-3000:]
    assert "forbidden" not in pod.logs().lower()


@pytest.mark.parametrize("case", [
    pytest.param(("patch", "clusterqueues.kueue.x-k8s.io", None, True), id="applies-queues"),
    pytest.param(("patch", "workloads.kueue.x-k8s.io/status", "team", True), id="writes-workload-status"),
    pytest.param(("patch", "jobs.batch", "team", True), id="suspends-jobs"),
    pytest.param(("update", "leases.coordination.k8s.io", "own", True), id="renews-its-lease"),
    pytest.param(("get", "secrets", "team", False), id="no-secrets-in-other-namespaces"),
    pytest.param(("list", "secrets", "own", False), id="cannot-list-even-its-own-secrets"),
    pytest.param(("create", "pods", "team", False), id="cannot-run-pods"),
    pytest.param(("delete", "jobs.batch", "team", False), id="never-deletes-jobs"),
    pytest.param(("create", "clusterrolebindings.rbac.authorization.k8s.io", None, False), id="cannot-escalate"),
    pytest.param(("delete", "customresourcedefinitions.apiextensions.k8s.io", None, False), id="cannot-remove-crds"),
    pytest.param(("update", "leases.coordination.k8s.io", "kube-system", False), id="no-other-leases"),
])
def test_service_account_has_least_privilege(rig: Envtest, installed: dict[str, Any],
                                             case: tuple[str, str, str | None, bool]) -> None:
    """The chart's RBAC grants what the controller uses and refuses what it does not (checked by the API server's
    own authorizer for the chart's ServiceAccount)."""
    verb, resource, where, allowed = case
    args = [verb, resource]
    if where == "own":
        args += ["-n", installed["namespace"]]
        if resource.startswith("leases"):
            args[1] = f"{resource}/{installed['release']}-lease"
    elif where is not None:
        args += ["-n", where]
    assert can_i(rig, installed["kubeconfig"], *args) is allowed


@pytest.mark.parametrize("values", [
    pytest.param({}, id="defaults"),
    pytest.param({"webhook": {"enabled": True, "certManager": {"enabled": True}}, "audit": {"enabled": True},
                  "git": {"tokenSecret": {"name": "t"}, "sshSecret": {"name": "s"}}}, id="every-volume"),
])
def test_pod_passes_the_restricted_pod_security_admission(helm: Helm, rig: Envtest, values: dict[str, Any]) -> None:
    """The API server's PodSecurity admission, enforcing `restricted` on the namespace, admits a Pod made from
    the Deployment's template (and refuses the same Pod once it asks for privilege escalation)."""
    namespace = rig.new_namespace("restricted")
    rig.kubectl("label", "namespace", namespace, "pod-security.kubernetes.io/enforce=restricted")
    template = helm.render(values, namespace=namespace).get("Deployment")["spec"]["template"]
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "gitopsq", "namespace": namespace,
                                                           "labels": template["metadata"]["labels"]},
           "spec": template["spec"]}
    done = apply(rig, [pod], dry_run=True)
    assert done.returncode == 0, done.stderr
    pod["spec"]["containers"][0]["securityContext"]["allowPrivilegeEscalation"] = True
    refused = apply(rig, [pod], dry_run=True)
    assert refused.returncode != 0 and "violates PodSecurity" in refused.stderr
