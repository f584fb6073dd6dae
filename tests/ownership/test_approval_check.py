"""The pure approval rules of the sync path: who must approve (the plan's ownership rules) and which approvals count."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from gitopsq.manifests.config import parse_config
from gitopsq.manifests.config_model import RepoConfig
from gitopsq.ownership.approval_check import changed_global_objects, check_approvals

CONFIG = """apiVersion: gitopsq.dev/v1alpha1
kind: RepositoryConfig
include: [queues/, platform/]
{platform}
teams:
  - name: platform
    paths: ["platform/**"]
    maintainers: [{{name: Pat, email: pat@example.com}}]
  - name: team-a
    paths: ["queues/team-a/**"]
    maintainers: [{{name: Ann, email: Ann@Example.com}}, {{name: Abe, email: abe@example.com}}]
  - name: team-z
    paths: ["queues/team-z/**"]
    maintainers: [{{name: Zed}}]
"""


def config(platform: bool = True) -> RepoConfig:
    parsed = parse_config(CONFIG.format(platform="platformTeam: platform" if platform else "").encode()).config
    assert parsed is not None
    return parsed


@dataclass(frozen=True)
class Given:
    email: str
    source: str = "Approved-by"


@dataclass(frozen=True)
class Case:
    paths: list[str]
    objects: list[str]
    approvals: list[Given]
    authors: list[str]
    platform: bool
    expected: dict[str, bool]


TEAM_A = "queues/team-a/cq.yaml"


@pytest.mark.parametrize("case", [
    pytest.param(Case([TEAM_A], [], [], ["nick@example.com"], True, {"team-a": False}),
                 id="owned-file-without-approval-is-missing"),
    pytest.param(Case([TEAM_A], [], [Given("ann@example.com")], ["nick@example.com"], True, {"team-a": True}),
                 id="maintainer-approval-counts-ignoring-case"),
    pytest.param(Case([TEAM_A], [], [Given("pat@example.com", "merge")], ["nick@example.com"], True,
                      {"team-a": False}), id="approval-by-another-team-does-not-count"),
    pytest.param(Case([TEAM_A], [], [Given("ann@example.com", "merge")], ["ann@example.com"], True,
                      {"team-a": False}), id="maintainer-approving-own-change-does-not-count"),
    pytest.param(Case([TEAM_A], [], [Given("abe@example.com", "merge")], ["ann@example.com"], True,
                      {"team-a": True}), id="other-maintainer-approves-a-maintainers-change"),
    pytest.param(Case(["queues/shared/cq.yaml"], [], [], ["nick@example.com"], False, {}),
                 id="unowned-file-without-platform-team-requires-nothing"),
    pytest.param(Case(["queues/shared/cq.yaml"], [], [], ["nick@example.com"], True, {"platform": False}),
                 id="unowned-file-needs-the-platform-team"),
    pytest.param(Case([TEAM_A], ["ResourceFlavor/gpu"], [Given("ann@example.com")], ["nick@example.com"], True,
                 {"platform": False, "team-a": True}), id="global-object-in-a-team-file-also-needs-platform"),
    pytest.param(Case(["queues/team-z/cq.yaml"], [], [Given("zed@example.com")], ["nick@example.com"], True,
                 {"team-z": False}), id="team-without-maintainer-emails-can-never-approve"),
    pytest.param(Case([], [], [Given("ann@example.com")], ["nick@example.com"], True, {}),
                 id="nothing-touched-requires-nothing"),
])
def test_required_teams_and_whether_their_approval_is_present(case: Case) -> None:
    """Each team the ownership names is required; it is satisfied only by one of its maintainers who is no author."""
    checks = check_approvals(config(case.platform), case.paths, case.objects, case.approvals, case.authors)
    assert {c.team: c.present for c in checks} == case.expected


def test_without_any_configuration_nothing_is_required() -> None:
    """No gitopsq.yaml names no owner, so a change needs nobody's approval."""
    assert check_approvals(None, [TEAM_A], ["Cohort/all"], [], []) == ()


FLAVOR = b"apiVersion: kueue.x-k8s.io/v1beta2\nkind: ResourceFlavor\nmetadata:\n  name: gpu\n"
FLAVOR_LABELLED = FLAVOR + b"spec:\n  nodeLabels: {gpu: a100}\n"
QUEUE = b"---\napiVersion: kueue.x-k8s.io/v1beta2\nkind: LocalQueue\nmetadata:\n  name: main\n  namespace: a\n"


@pytest.mark.parametrize(("old", "new", "expected"), [
    pytest.param(None, FLAVOR, ("ResourceFlavor/gpu",), id="added"),
    pytest.param(FLAVOR, None, ("ResourceFlavor/gpu",), id="removed"),
    pytest.param(FLAVOR, FLAVOR_LABELLED, ("ResourceFlavor/gpu",), id="changed"),
    pytest.param(FLAVOR, b"# comment\n" + FLAVOR, (), id="formatting-only-is-no-change"),
    pytest.param(FLAVOR, FLAVOR + QUEUE, (), id="namespaced-objects-are-not-global"),
    pytest.param(FLAVOR, b"kind: [unclosed", ("ResourceFlavor/gpu",), id="unparseable-side-has-no-objects"),
])
def test_changed_global_objects(old: bytes | None, new: bytes | None, expected: tuple[str, ...]) -> None:
    """Global objects a file adds, removes or changes, compared as data, not text."""
    assert changed_global_objects("platform/flavors.yaml", old, new) == expected


CONFIG_KINDS = {
    "Topology": "spec:\n  levels: [{nodeLabel: kubernetes.io/hostname}]\n",
    "ProvisioningRequestConfig": "spec:\n  provisioningClassName: check-capacity.autoscaling.x-k8s.io\n",
    "MultiKueueConfig": "spec:\n  clusters: [worker]\n",
    "MultiKueueCluster": "spec:\n  clusterSource:\n    kubeConfig: {location: worker}\n",
}


@pytest.mark.parametrize("kind", sorted(CONFIG_KINDS))
def test_kueue_configuration_kinds_are_global(kind: str) -> None:
    """Topologies, provisioning and MultiKueue configurations are shared by every team: a change to one needs the
    platform team even in a file a team owns."""
    doc = f"apiVersion: kueue.x-k8s.io/v1beta2\nkind: {kind}\nmetadata:\n  name: shared\n{CONFIG_KINDS[kind]}"
    changed = doc.replace("name: shared", "name: shared\n  labels: {tier: gold}")
    assert changed_global_objects("queues/team-a/x.yaml", doc.encode(), changed.encode()) == (f"{kind}/shared",)
    assert changed_global_objects("queues/team-a/x.yaml", None, doc.encode()) == (f"{kind}/shared",)
