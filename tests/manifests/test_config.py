"""gitopsq.yaml: every rule of docs/config.md, path ownership, include matching and the policy view."""

from __future__ import annotations

from pathlib import Path

import pytest

from gitopsq.manifests.config import parse_config, signing_key_problem
from gitopsq.policy.repo import normalise_repo_config

TEMPLATE = Path(__file__).resolve().parents[2] / "repo-template" / "gitopsq.yaml"
ED25519 = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIJC04diCEa3gzTia5X1EsQlkPdfQi2GctMpg6dBbyyfh alice@laptop"

MINIMAL = """apiVersion: gitopsq.dev/v1alpha1
kind: RepositoryConfig
include: [platform/, teams/]
platformTeam: platform
teams:
  - name: platform
    paths: ["platform/**", "teams/**"]
  - name: team-a
    paths: ["teams/a/**"]
    namespaces: [team-a]
    cohorts: [research]
"""


def parsed(text: str):  # type: ignore[no-untyped-def]
    return parse_config(text.encode())


def test_template_config_is_valid_and_complete() -> None:
    """The repository template's gitopsq.yaml parses without findings into every documented block."""
    result = parse_config(TEMPLATE.read_bytes())
    assert result.ok, [str(f) for f in result.findings]
    config = result.config
    assert config is not None
    assert [t.name for t in config.teams] == ["platform", "ml-research", "data-science", "serving"]
    assert str(config.capacity["a100"]["nvidia.com/gpu"]) == "64"
    assert config.signing_mode == "optional"
    assert config.admission.fair_sharing


@pytest.mark.parametrize(("path", "owner"), [
    ("teams/a/queues.yaml", "team-a"),
    ("teams/b/queues.yaml", "platform"),
    ("platform/flavors.yaml", "platform"),
    ("gitopsq.yaml", "platform"),
    ("elsewhere/x.yaml", None),
], ids=["team-pattern-more-specific", "platform-catch-all", "platform-own", "config-file-is-platforms",
        "unowned"])
def test_owner_of_picks_the_most_specific_pattern(path: str, owner: str | None) -> None:
    """owner_of: the longest literal prefix wins; gitopsq.yaml belongs to the platform team."""
    config = parsed(MINIMAL).config
    assert config is not None
    assert config.owner_of(path) == owner


@pytest.mark.parametrize(("path", "selected"), [
    ("platform/flavors.yaml", True), ("teams/a/deep/q.yml", True), ("teams/a/README.md", False),
    ("docs/x.yaml", False), ("gitopsq.yaml", False), ("platformer/x.yaml", False),
], ids=["dir-entry", "recursive-yml", "not-yaml", "outside", "config-itself", "prefix-is-not-directory"])
def test_include_selects_yaml_under_directories(path: str, selected: bool) -> None:
    """Directory entries cover every YAML file below them and nothing beside them."""
    config = parsed(MINIMAL).config
    assert config is not None
    assert config.selects(path) is selected


def test_exclude_and_policy_paths_are_not_queue_files() -> None:
    """Excluded globs and policyPaths are left out of the include set."""
    config = parsed(MINIMAL.replace("include: [platform/, teams/]",
                                    "include: ['**']\nexclude: ['**/drafts/**']\npolicyPaths: [policies/]")).config
    assert config is not None
    assert config.selects("teams/a/q.yaml")
    assert not config.selects("teams/a/drafts/q.yaml")
    assert not config.selects("policies/limits.yaml")


BROKEN = [
    ("apiVersion: gitopsq.dev/v1alpha1\n", "apiVersion: gitopsq.dev/v1\n", "invalid-value", 1),
    ("kind: RepositoryConfig\n", "kind: Config\n", "invalid-value", 2),
    ("include: [platform/, teams/]\n", "include: []\n", "invalid-value", 3),
    ("include: [platform/, teams/]\n", "include: ['../x/']\n", "config-invalid-pattern", 3),
    ("platformTeam: platform\n", "platformTeam: nobody\n", "config-unknown-team", 4),
    ("  - name: team-a\n", "  - name: Team_A\n", "config-invalid-name", 8),
    ("  - name: team-a\n", "  - name: platform\n", "config-duplicate", 8),
    ('    paths: ["teams/a/**"]\n', '    paths: ["teams/**"]\n', "config-conflict", 9),
    ("    namespaces: [team-a]\n", "    namespaces: [Team.A]\n", "config-invalid-name", 10),
    ("    cohorts: [research]\n", "    cohorts: [re_search]\n", "config-invalid-name", 11),
    ("    cohorts: [research]\n", "    cohorts: [research]\n    owner: me\n", "unknown-field", 12),
]


@pytest.mark.parametrize(("old", "new", "code", "line"), BROKEN,
                         ids=["api-version", "kind", "empty-include", "dotdot-pattern", "unknown-platform-team",
                              "team-name-not-label", "duplicate-team", "pattern-owned-twice",
                              "namespace-not-label", "cohort-not-label", "unknown-team-key"])
def test_each_rule_reports_at_its_line(old: str, new: str, code: str, line: int) -> None:
    """A broken gitopsq.yaml yields the rule's code at the line of the offending key."""
    result = parsed(MINIMAL.replace(old, new, 1))
    assert (code, line) in [(f.code, f.location.line if f.location else None) for f in result.findings]


@pytest.mark.parametrize(("extra", "code"), [
    ("capacity:\n  a100: {nvidia.com/gpu: lots}\n", "invalid-quantity"),
    ("capacity:\n  a100: {cpu: '-1'}\n", "invalid-quantity"),
    ("capacity:\n  A100: {cpu: '1'}\n", "config-invalid-name"),
    ("trustZones:\n  - {name: z, teams: [ghost], cohorts: [research]}\n", "config-unknown-team"),
    ("trustZones:\n  - {name: z1, teams: [team-a], cohorts: [research]}\n"
     "  - {name: z2, teams: [team-a], cohorts: [research]}\n", "config-conflict"),
    ("signing: {mode: always}\n", "invalid-value"),
    ("audit: {batchSeconds: 0}\n", "invalid-value"),
    ("audit: {branch: '../main'}\n", "invalid-value"),
    ("admission: {fairSharing: {preemptionStrategies: [Fastest]}}\n", "invalid-value"),
    ("admission: {manageJobsWithoutQueueName: true}\n", "unknown-field"),
    ("allowKinds: [ConfigMap]\n", "invalid-value"),
    ("policies: {disabled: [x], enabled: [y]}\n", "unknown-field"),
], ids=["capacity-not-quantity", "capacity-negative", "capacity-key-not-flavor-name", "zone-unknown-team",
        "cohort-in-two-zones", "signing-mode", "batch-seconds-zero", "branch-dotdot", "unknown-strategy",
        "unsupported-admission-key", "allow-kind-without-version", "unknown-policies-key"])
def test_optional_blocks_are_validated(extra: str, code: str) -> None:
    """capacity, trustZones, signing, audit, admission, allowKinds and policies are each checked."""
    assert code in [f.code for f in parsed(MINIMAL + extra).findings]


def test_missing_include_makes_config_unusable() -> None:
    """Without include the configuration cannot select files: no config, and a missing-field finding."""
    result = parsed(MINIMAL.replace("include: [platform/, teams/]\n", ""))
    assert result.config is None
    assert "missing-field" in [f.code for f in result.findings]


def test_config_must_be_one_document() -> None:
    """Two documents in gitopsq.yaml are refused rather than silently reading the first."""
    result = parsed(MINIMAL + "---\n" + MINIMAL)
    assert result.config is None
    assert [f.code for f in result.findings] == ["config-invalid"]


@pytest.mark.parametrize(("key", "ok"), [
    (ED25519, True),
    ("0123456789ABCDEF0123456789ABCDEF01234567", True),
    ("ssh-ed25519 AAAA", False),
    ("ssh-rsa AAAAC3NzaC1lZDI1NTE5AAAAIJC04diCEa3gzTia5X1EsQlkPdfQi2GctMpg6dBbyyfh", False),
    ("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIJC04diCEa3gzTia5X1EsQlkPdfQi2GctMpg6dBb", False),
    ("not a key", False),
], ids=["ed25519", "gpg-fingerprint", "truncated-base64", "type-mismatch", "short-ed25519-body", "garbage"])
def test_signing_keys_are_well_formed(key: str, ok: bool) -> None:
    """Signing keys are authorized_keys lines whose body matches their type, or 40-hex GPG fingerprints."""
    assert (signing_key_problem(key) is None) is ok


def test_policy_view_matches_the_policy_engines_normalisation() -> None:
    """as_policy_dict equals what gitopsq.policy builds from the same raw file, so policies see one shape."""
    config = parse_config(TEMPLATE.read_bytes()).config
    assert config is not None
    ours = config.as_policy_dict()
    theirs = normalise_repo_config(config.raw)
    for key in ("include", "exclude", "policyPaths", "allowKinds", "platformTeam", "teams", "teamsByName",
                "capacity", "trustZones", "trustZonesByName", "signing", "policies", "namespaceOwner",
                "cohortZone"):
        assert ours[key] == theirs[key], key
    assert ours["namespaceOwner"]["serving-batch"] == "serving"
    assert ours["cohortZone"] == {"research": "research", "production": "production"}
    assert ours["audit"] == {"repository": "", "branch": "gitopsq/audit", "batchSeconds": 5, "batchRecords": 500}
