"""The chart's ClusterRole, webhook rules, ``--integrations`` flag and values schema follow the integration
registry (gitopsq/admission_loop/integrations/registry.py): one kind added there and not here fails."""

from __future__ import annotations

import json
from typing import Any

import pytest
from chart_helm import CHART, Helm, Rendered

from gitopsq.admission_loop.integrations import REGISTRY, select, webhook_kinds
from gitopsq.webhook.certs import webhook_configurations

FRAMEWORKS = [i.framework for i in REGISTRY]


def _verbs(r: Rendered, group: str, resource: str) -> set[str]:
    return {v for rule in r.get("ClusterRole")["rules"] if group in rule["apiGroups"]
            and resource in rule["resources"] for v in rule["verbs"]}


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_cluster_role_grants_what_each_integration_declares(helm: Helm, framework: str) -> None:
    """With one integration chosen, the ClusterRole grants every verb its `rules` declare, and on the job kind of
    an integration not chosen nothing beyond what the chosen one declares (a TrainJob's JobSet is only read;
    pods are listed by every integration; only the pod integration watches, patches and deletes them)."""
    r = helm.render({"integrations": [framework]})
    (chosen,) = select([framework])
    for rule in chosen.rules:
        for resource in rule.resources:
            assert set(rule.verbs) <= _verbs(r, rule.group, resource), (framework, rule)
    for other in REGISTRY:
        if other.framework != framework:
            declared = {v for rule in chosen.rules if rule.group == other.group and other.resource in rule.resources
                        for v in rule.verbs}
            granted = _verbs(r, other.group, other.resource)
            assert granted <= declared, f"{other.resource} granted {granted - declared} without {other.framework}"


def test_webhook_rules_are_the_registry_ones(helm: Helm) -> None:
    """With every integration chosen, both webhook configurations' entries (name, path, rules, object selector)
    are those gitopsq.webhook.certs writes for the registry's webhook kinds: pods in a mutating entry of their
    own."""
    r = helm.render({"webhook": {"enabled": True}, "integrations": FRAMEWORKS})
    ours = {o["kind"]: o for o in webhook_configurations(b"ca", service=("gitopsq-system", "gitopsq-webhook", 443),
                                                         kinds=webhook_kinds(select(FRAMEWORKS)))}
    def shape(hook: dict[str, Any]) -> tuple[Any, ...]:
        return hook["name"], hook["clientConfig"]["service"]["path"], hook["rules"]

    for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
        assert [shape(h) for h in r.get(kind)["webhooks"]] == [shape(h) for h in ours[kind]["webhooks"]], kind
    assert sum(len(h["rules"]) for h in ours["MutatingWebhookConfiguration"]["webhooks"]) == \
        sum(1 for i in REGISTRY if i.webhook)
    pods = r.get("MutatingWebhookConfiguration")["webhooks"][-1]
    assert pods["objectSelector"] == ours["MutatingWebhookConfiguration"]["webhooks"][-1]["objectSelector"]


def test_integrations_value_becomes_the_flag_and_the_schema_knows_every_name(helm: Helm) -> None:
    """``integrations:`` is passed as ``--integrations`` (default batch/job) and the values schema accepts exactly
    the registry's framework names."""
    default = helm.render()
    assert "--integrations=batch/job" in default.container["args"]
    both = helm.render({"integrations": FRAMEWORKS})
    assert f"--integrations={','.join(FRAMEWORKS)}" in both.container["args"]
    schema: dict[str, Any] = json.loads((CHART / "values.schema.json").read_text())
    assert schema["properties"]["integrations"]["items"]["enum"] == FRAMEWORKS
    refused = helm.template({"integrations": ["kubeflow.org/mpijob"]})
    assert refused.returncode != 0 and "integrations" in refused.stderr
