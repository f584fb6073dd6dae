"""charts/gitopsq rendered by the real Helm engine: defaults, non-default values, schema rejections, and wiring
that must match the code (controller flags, webhook paths, CRD files)."""

from __future__ import annotations

import json
from typing import Any

import click
import jsonschema
import pytest
import yaml
from chart_helm import CHART, ROOT, Helm, Rendered

from gitopsq.commands.controller import command as controller_command
from gitopsq.webhook.certs import webhook_configurations

WEBHOOK: dict[str, Any] = {"webhook": {"enabled": True}}


def args_of(r: Rendered) -> list[str]:
    return list(r.container["args"])


def env_of(r: Rendered) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in r.container.get("env", [])}


def rules_of(r: Rendered, kind: str = "ClusterRole") -> list[dict[str, Any]]:
    return list(r.get(kind)["rules"])


def verbs_for(r: Rendered, group: str, resource: str, kind: str = "ClusterRole") -> set[str]:
    return {v for rule in rules_of(r, kind) if group in rule["apiGroups"] and resource in rule["resources"]
            for v in rule["verbs"]}


def test_default_install_has_every_piece(helm: Helm) -> None:
    """With only repo.url set, the chart renders the controller, its identity and RBAC, the metrics Service,
    monitoring objects, the dashboard, a disruption budget, and the Job webhook with its certificate Secret."""
    r = helm.render()
    assert sorted(set(r.kinds())) == sorted({
        "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding", "Deployment", "Service",
        "ServiceMonitor", "PrometheusRule", "ConfigMap", "PodDisruptionBudget", "MutatingWebhookConfiguration",
        "ValidatingWebhookConfiguration", "Secret"})
    deployment = r.get("Deployment")
    assert deployment["spec"]["replicas"] == 2
    assert "--leader-elect" in args_of(r)
    assert r.container["image"] == "ghcr.io/gitopsq/gitopsq:0.1.0"
    assert {s["metadata"]["name"] for s in r.objects if s["kind"] == "Service"} == {"gitopsq-metrics",
                                                                                      "gitopsq-webhook"}
    assert "--webhook-addr=:9443" in args_of(r)


def test_enabled_webhook_adds_configurations_service_and_certificate_secret(helm: Helm) -> None:
    """webhook.enabled adds both webhook configurations, the webhook Service, the certificate Secret the
    replicas share, and the webhook port."""
    r = helm.render(WEBHOOK)
    for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration", "Secret"):
        assert r.has(kind), kind
    assert r.get("Service", "-webhook")["spec"]["ports"][0]["targetPort"] == "webhook"
    assert {"name": "webhook", "containerPort": 9443, "protocol": "TCP"} in r.container["ports"]
    assert r.get("Secret")["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"


@pytest.mark.parametrize(("values", "expected"), [
    pytest.param({}, ["--webhook-addr=:9443", "--webhook-cert-dir=/etc/gitopsq/webhook-certs",
                      "--webhook-cert-secret=gitopsq-webhook-cert", "--webhook-service=gitopsq-system/gitopsq-webhook",
                      "--webhook-configuration=gitopsq"], id="self-generated-certificates"),
    pytest.param({"webhook": {"certManager": {"enabled": True}, "port": 10443}},
                 ["--webhook-addr=:10443", "--webhook-cert-dir=/etc/gitopsq/webhook-certs"], id="cert-manager"),
])
def test_webhook_flags_the_chart_passes(helm: Helm, values: dict[str, Any], expected: list[str]) -> None:
    """The Job webhook flags, in the chart's contract with the controller (docs/deploy.md lists them)."""
    args = args_of(helm.render({**values, "webhook": {**WEBHOOK["webhook"], **values.get("webhook", {})}}))
    assert [a for a in args if a.startswith("--webhook-") and not a.startswith("--webhook-secret-file")] == expected


def test_pod_runs_under_the_restricted_pod_security_profile(helm: Helm) -> None:
    """Non-root, read-only root filesystem, no privilege escalation, all capabilities dropped, RuntimeDefault
    seccomp, and requests plus a memory limit."""
    r = helm.render()
    pod, container = r.pod, r.container
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] != 0
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    sc = container["securityContext"]
    assert sc["readOnlyRootFilesystem"] is True
    assert sc["allowPrivilegeEscalation"] is False
    assert sc["capabilities"]["drop"] == ["ALL"]
    assert set(container["resources"]["requests"]) == {"cpu", "memory"}
    assert "memory" in container["resources"]["limits"]
    writable = {m["mountPath"] for m in container["volumeMounts"] if not m.get("readOnly")}
    # the webhook-certs emptyDir (in memory) is where the controller writes the certificate it generates
    assert writable == {"/tmp", "/var/cache/gitopsq", "/etc/gitopsq/webhook-certs"}


def test_every_rendered_flag_is_one_the_controller_accepts(helm: Helm) -> None:
    """Each ``--flag`` the chart passes (in every mode) is an option of `gitopsq controller`."""
    options = {opt for p in controller_command.params if isinstance(p, click.Option)
               for opt in (*p.opts, *p.secondary_opts)}
    for values in ({}, {"mode": "sync"}, {"metrics": {"enabled": False}}, {"leaderElection": {"enabled": False},
                                                                          "replicaCount": 1},
                   {"gitWebhook": {"secret": {"name": "hook"}}, "repo": {"sourceName": "queues", "prune": False}},
                   {"audit": {"enabled": True, "repo": "file:///srv/audit.git"}, "signing": {"secret": {"name": "k"}}},
                   {"mode": "admission", "webhook": {"managedNamespaces": ["team-a"]}},
                   {"webhook": {"enabled": False}}):
        args = args_of(helm.render(values))
        assert args[0] == "controller"
        flags = {a.split("=", 1)[0] for a in args[1:]}
        assert flags <= options, f"{values}: unknown flags {sorted(flags - options)}"


@pytest.mark.parametrize(("values", "present", "absent"), [
    pytest.param({"mode": "sync"}, ["--sync-only"], ["--admission-only"], id="sync-only-mode"),
    pytest.param({"mode": "admission"}, ["--admission-only"], ["--sync-only"], id="admission-only-mode"),
    pytest.param({"metrics": {"enabled": False}}, ["--metrics-addr="], ["--metrics-addr=:8080"], id="metrics-off"),
    pytest.param({"leaderElection": {"enabled": False}, "replicaCount": 1}, ["--no-leader-elect"],
                 ["--leader-elect"], id="single-replica-without-election"),
    pytest.param({"repo": {"prune": False, "interval": "2m", "branch": "release"}},
                 ["--no-prune", "--interval=2m", "--branch=release"], ["--prune"], id="repo-settings"),
    pytest.param({"gitWebhook": {"secret": {"name": "hook", "key": "hmac"}}},
                 ["--webhook-secret-file=/etc/gitopsq/git-webhook/hmac"], [], id="git-push-webhook-secret"),
    pytest.param({"extraArgs": ["--lease-duration=30s"]}, ["--lease-duration=30s"], [], id="extra-args-appended"),
    pytest.param({"audit": {"enabled": True, "repo": "ssh://git@git.example.com/platform/audit.git"}},
                 ["--audit-wal-dir=/var/cache/gitopsq/audit-wal",
                  "--audit-repo=ssh://git@git.example.com/platform/audit.git"], [], id="audit-trail"),
    pytest.param({"audit": {"enabled": True}, "signing": {"secret": {"name": "sign", "key": "id_ed25519"}}},
                 ["--audit-signing-key=/etc/gitopsq/signing/id_ed25519"], [], id="audit-commits-signed"),
    pytest.param({"webhook": {"managedNamespaces": ["team-a", "team-b"]}}, ["--managed-namespaces=team-a,team-b"],
                 [], id="managed-namespaces"),
    pytest.param({"webhook": {"enabled": False}}, [], ["--webhook-addr=:9443"], id="job-webhook-off"),
    pytest.param({"cluster": "eu-west"}, ["--cluster=eu-west"], [], id="one-controller-per-cluster"),
    pytest.param({}, ["--http-header-timeout=10s", "--http-body-timeout=30s", "--http-max-connections=1000"], [],
                 id="http-limits-by-default"),
    pytest.param({"http": {"headerTimeout": "5s", "bodyTimeout": "1m", "maxConnections": 200}},
                 ["--http-header-timeout=5s", "--http-body-timeout=1m", "--http-max-connections=200"], [],
                 id="http-limits"),
    pytest.param({}, [], ["--cluster="], id="implicit-cluster-by-default"),
    pytest.param({"audit": {"enabled": True}, "mode": "admission"}, [],
                 ["--audit-wal-dir=/var/cache/gitopsq/audit-wal"], id="no-sync-audit-without-the-sync-loop"),
])
def test_values_map_to_controller_flags(helm: Helm, values: dict[str, Any], present: list[str],
                                        absent: list[str]) -> None:
    """Values become exactly the controller flags documented for them."""
    args = args_of(helm.render(values))
    for flag in present:
        assert flag in args
    for flag in absent:
        assert flag not in args


def test_admission_only_mode_needs_no_repository_and_cannot_write_queues(helm: Helm) -> None:
    """In admission mode there is no --repo, no GitSource rule, and queue definitions are read-only."""
    r = helm.render({"mode": "admission"}, with_repo=False)
    assert not any(a.startswith("--repo") for a in args_of(r))
    assert verbs_for(r, "kueue.x-k8s.io", "clusterqueues") == {"get", "list", "watch"}
    assert verbs_for(r, "kueue.x-k8s.io", "workloads") == {"get", "list", "watch", "create", "patch", "delete"}
    assert not any("gitopsq.dev" in rule["apiGroups"] for rule in rules_of(r, "Role"))


def test_sync_only_mode_drops_the_webhook_and_the_admission_rules(helm: Helm) -> None:
    """Without the admission loop the chart installs no Job webhook and grants nothing on Jobs or Workloads."""
    r = helm.render({"mode": "sync", **WEBHOOK})
    assert not r.has("MutatingWebhookConfiguration") and not r.has("ValidatingWebhookConfiguration")
    assert verbs_for(r, "batch", "jobs") == set()
    assert verbs_for(r, "kueue.x-k8s.io", "workloads") == set()
    assert verbs_for(r, "kueue.x-k8s.io", "clusterqueues") == {"get", "list", "watch", "create", "patch", "delete"}
    assert verbs_for(r, "", "events") == set()  # GitSource Events only, in its own namespace
    assert verbs_for(r, "", "events", "Role") == {"create"}


def test_cert_manager_issues_the_serving_certificate(helm: Helm) -> None:
    """With certManager.enabled: a self-signed Issuer, a CA, a serving Certificate for the webhook Service, its
    Secret mounted read-only, CA injection annotations, and no RBAC on webhook configurations or Secrets."""
    r = helm.render({"webhook": {"enabled": True, "certManager": {"enabled": True}}})
    serving = r.get("Certificate", "-webhook")
    assert serving["spec"]["dnsNames"][0] == "gitopsq-webhook.gitopsq-system.svc"
    assert serving["spec"]["issuerRef"]["name"] == "gitopsq-webhook-ca"
    assert r.get("Certificate", "-webhook-ca")["spec"]["isCA"] is True
    assert {o["metadata"]["name"] for o in r.objects if o["kind"] == "Issuer"} == \
        {"gitopsq-selfsigned", "gitopsq-webhook-ca"}
    for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
        assert r.get(kind)["metadata"]["annotations"]["cert-manager.io/inject-ca-from"] == \
            "gitopsq-system/gitopsq-webhook"
    volume = next(v for v in r.pod["volumes"] if v["name"] == "webhook-certs")
    assert volume["secret"]["secretName"] == serving["spec"]["secretName"]
    assert verbs_for(r, "admissionregistration.k8s.io", "mutatingwebhookconfigurations") == set()
    assert verbs_for(r, "", "secrets", "Role") == set()


def test_cert_manager_with_an_existing_issuer_creates_no_issuer(helm: Helm) -> None:
    """A given issuerRef is used as is; the chart then creates only the serving Certificate."""
    ref = {"name": "corp-ca", "kind": "ClusterIssuer", "group": "cert-manager.io"}
    r = helm.render({"webhook": {"enabled": True, "certManager": {"enabled": True, "issuerRef": ref}}})
    assert not r.has("Issuer")
    assert [o["metadata"]["name"] for o in r.objects if o["kind"] == "Certificate"] == ["gitopsq-webhook"]
    assert r.get("Certificate")["spec"]["issuerRef"] == ref


def test_self_generated_certificates_may_only_touch_their_own_objects(helm: Helm) -> None:
    """Without cert-manager the controller may patch only the two webhook configurations and the one
    certificate Secret of this release, by name."""
    r = helm.render(WEBHOOK, release="q")
    webhook_rule = next(rule for rule in rules_of(r) if "admissionregistration.k8s.io" in rule["apiGroups"])
    assert webhook_rule["resourceNames"] == ["q-gitopsq"]
    secret_rule = next(rule for rule in rules_of(r, "Role") if "secrets" in rule["resources"])
    assert secret_rule["resourceNames"] == ["q-gitopsq-webhook-cert"]
    assert all(rule.get("resourceNames") for rule in rules_of(r, "Role")
               if "update" in rule["verbs"])


def test_no_service_monitor_and_no_rules_when_disabled(helm: Helm) -> None:
    """ServiceMonitor, PrometheusRule and the dashboard are each optional."""
    r = helm.render({"metrics": {"serviceMonitor": {"enabled": False}}, "prometheusRule": {"enabled": False},
                     "dashboard": {"enabled": False}})
    assert not r.has("ServiceMonitor") and not r.has("PrometheusRule") and not r.has("ConfigMap")
    assert r.has("Service")


def test_extra_tolerations_and_scheduling_reach_the_pod(helm: Helm) -> None:
    """Tolerations, node selectors and priority class values land on the pod spec unchanged."""
    tolerations = [{"key": "dedicated", "operator": "Equal", "value": "platform", "effect": "NoSchedule"},
                   {"key": "node-role.kubernetes.io/control-plane", "operator": "Exists", "effect": "NoSchedule"}]
    r = helm.render({"tolerations": tolerations, "nodeSelector": {"pool": "system"},
                     "priorityClassName": "system-cluster-critical"})
    assert r.pod["tolerations"] == tolerations
    assert r.pod["nodeSelector"] == {"pool": "system"}
    assert r.pod["priorityClassName"] == "system-cluster-critical"


def test_git_credentials_and_signing_key_come_from_secrets_as_files(helm: Helm) -> None:
    """Token, SSH key, known_hosts and the audit signing key are mounted from the named Secrets and handed to
    gitopsq by the environment variables it reads (docs/source.md); no secret value is in the pod spec."""
    r = helm.render({"git": {"username": "x-access-token", "tokenSecret": {"name": "git-token", "key": "pat"},
                             "sshSecret": {"name": "git-ssh"}},
                     "signing": {"secret": {"name": "audit-signing"}}})
    env = env_of(r)
    assert env["GITOPSQ_GIT_TOKEN_FILE"] == "/etc/gitopsq/git-token/pat"
    assert env["GITOPSQ_GIT_USERNAME"] == "x-access-token"
    assert env["GITOPSQ_SSH_KEY_FILE"] == "/etc/gitopsq/git-ssh/ssh-privatekey"
    assert env["GITOPSQ_SSH_KNOWN_HOSTS"] == "/etc/gitopsq/git-ssh/known_hosts"
    volumes = {v["name"]: v for v in r.pod["volumes"]}
    assert volumes["git-token"]["secret"]["secretName"] == "git-token"
    assert volumes["signing"]["secret"]["secretName"] == "audit-signing"
    assert "GITOPSQ_GIT_TOKEN" not in env


def test_image_digest_wins_over_the_tag(helm: Helm) -> None:
    """A pinned digest is rendered as repository@digest."""
    digest = "sha256:" + "ab" * 32
    r = helm.render({"image": {"repository": "registry.example.com/gitopsq", "tag": "9.9.9", "digest": digest}})
    assert r.container["image"] == f"registry.example.com/gitopsq@{digest}"


@pytest.mark.parametrize(("values", "with_repo", "complaint"), [
    pytest.param({}, False, "url", id="sync-mode-without-a-repository"),
    pytest.param({"replicaCount": "two"}, True, "replicaCount", id="replica-count-not-a-number"),
    pytest.param({"mode": "both"}, True, "mode", id="unknown-mode"),
    pytest.param({"repo": {"interval": "30 seconds"}}, True, "interval", id="interval-not-a-duration"),
    pytest.param({"repo": {"url": "not a url"}}, False, "url", id="repository-url-malformed"),
    pytest.param({"replicas": 2}, True, "replicas", id="misspelt-top-level-key"),
    pytest.param({"tolerations": [{"key": "a", "operator": "Maybe"}]}, True, "operator",
                 id="toleration-operator-invalid"),
    pytest.param({"leaderElection": {"enabled": False}}, True, "enabled", id="two-replicas-without-election"),
    pytest.param({"audit": {"repo": "audit branch please"}}, True, "repo", id="audit-repo-not-a-url"),
    pytest.param({"webhook": {"failurePolicy": "Sometimes"}}, True, "failurePolicy", id="webhook-failure-policy"),
    pytest.param({"extraArgs": ["leader-elect"]}, True, "extraArgs", id="extra-arg-not-a-flag"),
    pytest.param({"image": {"digest": "latest"}}, True, "digest", id="digest-not-sha256"),
    pytest.param({"cluster": "EU West"}, True, "cluster", id="cluster-not-a-dns-label"),
])
def test_schema_rejects_bad_values(helm: Helm, values: dict[str, Any], with_repo: bool, complaint: str) -> None:
    """values.schema.json refuses the values at render time and names the offending key."""
    done = helm.template(values, with_repo=with_repo)
    assert done.returncode != 0
    assert "schema" in done.stderr and complaint in done.stderr, done.stderr


def test_webhook_configurations_match_the_ones_gitopsq_writes(helm: Helm) -> None:
    """Webhook names, paths, rules and operations are those of gitopsq.webhook.certs, so the controller's
    caBundle patch and its HTTPS handlers line up with what Helm installed."""
    r = helm.render(WEBHOOK)
    ours = {o["kind"]: o for o in webhook_configurations(b"ca", service=("gitopsq-system", "gitopsq-webhook", 443))}
    for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
        chart_hook, code_hook = r.get(kind)["webhooks"][0], ours[kind]["webhooks"][0]
        for key in ("name", "rules", "admissionReviewVersions", "sideEffects", "failurePolicy", "timeoutSeconds"):
            assert chart_hook[key] == code_hook[key], key
        assert chart_hook["clientConfig"]["service"] == code_hook["clientConfig"]["service"]
        expressions = chart_hook["namespaceSelector"]["matchExpressions"]
        assert {"key": "kubernetes.io/metadata.name", "operator": "NotIn",
                "values": ["kube-system", "gitopsq-system"]} in expressions


def test_chart_crds_are_the_package_crds() -> None:
    """charts/gitopsq/crds holds byte-for-byte the CRDs gitopsq installs itself (gitopsq/data/crds)."""
    package = ROOT / "gitopsq" / "data" / "crds"
    chart = CHART / "crds"
    assert sorted(p.name for p in chart.iterdir()) == sorted(p.name for p in package.glob("*.yaml"))
    for path in package.glob("*.yaml"):
        assert (chart / path.name).read_bytes() == path.read_bytes(), f"{path.name} drifted; copy it again"


def test_include_crds_renders_all_twelve(helm: Helm) -> None:
    """`helm template --include-crds` carries the eleven Kueue CRDs and GitSource."""
    r = helm.render(include_crds=True)
    names = sorted(o["metadata"]["name"] for o in r.objects if o["kind"] == "CustomResourceDefinition")
    assert len(names) == 12 and "gitsources.gitopsq.dev" in names and "clusterqueues.kueue.x-k8s.io" in names


def test_dashboard_configmap_carries_the_sidecar_label_and_the_json(helm: Helm) -> None:
    """Grafana's sidecar finds the dashboard by label; the ConfigMap holds the file from dashboards/."""
    r = helm.render({"dashboard": {"label": "grafana_dashboard", "labelValue": "yes", "namespace": "monitoring"}})
    cm = r.get("ConfigMap", "-dashboard")
    assert cm["metadata"]["labels"]["grafana_dashboard"] == "yes"
    assert cm["metadata"]["namespace"] == "monitoring"
    assert cm["data"]["gitopsq.json"] == (CHART / "dashboards" / "gitopsq.json").read_text().rstrip("\n")


def test_services_and_service_monitor_select_what_they_mean(helm: Helm) -> None:
    """The metrics and webhook Services select the controller pods and target named container ports; the
    ServiceMonitor selects the metrics Service and scrapes its named port."""
    r = helm.render(WEBHOOK)
    pod_labels = r.get("Deployment")["spec"]["template"]["metadata"]["labels"]
    port_names = {p["name"] for p in r.container["ports"]}
    for suffix in ("-metrics", "-webhook"):
        service = r.get("Service", suffix)
        assert service["spec"]["selector"].items() <= pod_labels.items()
        assert service["spec"]["ports"][0]["targetPort"] in port_names
    monitor = r.get("ServiceMonitor")
    metrics = r.get("Service", "-metrics")
    assert monitor["spec"]["selector"]["matchLabels"].items() <= metrics["metadata"]["labels"].items()
    assert monitor["spec"]["endpoints"][0]["port"] == metrics["spec"]["ports"][0]["name"]
    webhook_service = r.get("Service", "-webhook")
    for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
        target = r.get(kind)["webhooks"][0]["clientConfig"]["service"]
        assert (target["name"], target["port"]) == (webhook_service["metadata"]["name"],
                                                    webhook_service["spec"]["ports"][0]["port"])


def test_helm_lint_is_clean(helm: Helm) -> None:
    """`helm lint --strict` finds nothing to complain about beyond informational notes."""
    done = helm.run("lint", "--strict", str(CHART), "--set", "repo.url=https://git.example.com/q.git")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "[WARNING]" not in done.stdout and "[ERROR]" not in done.stdout


def test_values_schema_is_a_valid_schema_that_accepts_the_defaults() -> None:
    """values.schema.json is itself valid JSON Schema, and values.yaml (plus a repository URL) satisfies it."""
    schema = json.loads((CHART / "values.schema.json").read_text())
    jsonschema.Draft7Validator.check_schema(schema)
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    values["repo"]["url"] = "https://git.example.com/platform/queues.git"
    jsonschema.Draft7Validator(schema).validate(values)
    assert set(values) <= set(schema["properties"])
