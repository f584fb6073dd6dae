"""Kueue's validation rules on small revisions, through the pure pipeline (check_files)."""

from __future__ import annotations

import pytest

from gitopsq.manifests import ParseCache, check_files

CONFIG = b"""apiVersion: gitopsq.dev/v1alpha1
kind: RepositoryConfig
include: [q/]
platformTeam: p
teams: [{name: p, paths: ["**"]}]
"""
BASE = """apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: default}
---
apiVersion: v1
kind: Namespace
metadata: {name: team-a}
"""


def check(text: str, *, config: bytes = CONFIG, base: str = BASE):  # type: ignore[no-untyped-def]
    return check_files({"q/base.yaml": base.encode(), "q/x.yaml": text.encode()}, config, cache=ParseCache())


def found(text: str, **kw: object) -> list[tuple[str, str, int | None, str]]:
    report = check(text, **kw)  # type: ignore[arg-type]
    return [(f.code, f.location.path if f.location else "", f.location.line if f.location else None,
             f.severity.value) for f in report.findings]


def cq(spec: str, name: str = "cq") -> str:
    return f"apiVersion: kueue.x-k8s.io/v1beta2\nkind: ClusterQueue\nmetadata:\n  name: {name}\nspec:\n{spec}"


def group(resources: list[str], flavors: list[str], quota: str = '"1"') -> str:
    lines = [f"    - coveredResources: [{', '.join(resources)}]", "      flavors:"]
    for flavor in flavors:
        lines += [f"        - name: {flavor}", "          resources:"]
        lines += [f"            - {{name: {r}, nominalQuota: {quota}}}" for r in resources]
    return "\n".join(lines) + "\n"


def test_valid_revision_has_no_findings() -> None:
    """A ClusterQueue in an implicit cohort (no Cohort object) with a LocalQueue in a declared namespace is clean."""
    text = cq("  cohortName: implicit\n  namespaceSelector: {}\n  resourceGroups:\n"
              + group(["cpu"], ["default"])) + (
        "---\napiVersion: kueue.x-k8s.io/v1beta2\nkind: LocalQueue\nmetadata: {name: q, namespace: team-a}\n"
        "spec: {clusterQueue: cq}\n")
    report = check(text)
    assert report.findings == ()
    assert [o.KIND for o in report.objects] == ["ResourceFlavor", "Namespace", "ClusterQueue", "LocalQueue"]


@pytest.mark.parametrize(("text", "code", "line", "severity"), [
    (cq("  resourceGroups:\n" + group([f"example.com/r{i}" for i in range(65)], ["default"])),
     "too-many", 7, "error"),
    ("---\n".join(f"apiVersion: kueue.x-k8s.io/v1beta2\nkind: ResourceFlavor\nmetadata: {{name: f{i}}}\n"
                  for i in range(65)) + "---\n" + cq("  resourceGroups:\n" + group(["cpu"], [f"f{i}" for i in
                                                                                          range(65)])),
     "too-many", 268, "error"),
    (cq("  resourceGroups:\n" + group(["Bad Resource"], ["default"])), "invalid-resource-name", 7, "error"),
    (cq("  cohortName: Not_A_Name\n"), "invalid-name", 6, "error"),
    ("apiVersion: kueue.x-k8s.io/v1beta2\nkind: LocalQueue\nmetadata:\n  name: " + "q" * 70
     + "\n  namespace: team-a\nspec: {clusterQueue: missing}\n", "queue-name-too-long", 4, "warning"),
    ("apiVersion: kueue.x-k8s.io/v1beta2\nkind: ResourceFlavor\nmetadata:\n  name: spot\n  annotations:\n"
     "    bad key!: x\n", "invalid-label", 6, "error"),
    ("apiVersion: kueue.x-k8s.io/v1beta2\nkind: ResourceFlavor\nmetadata: {name: spot}\nspec:\n  nodeTaints:\n"
     "    - {key: -bad, value: x, effect: NoSchedule}\n", "invalid-label", 6, "error"),
    ("apiVersion: kueue.x-k8s.io/v1beta2\nkind: Cohort\nmetadata: {name: lonely}\n", "unused-cohort", 3,
     "warning"),
    ("apiVersion: kueue.x-k8s.io/v1beta2\nkind: LocalQueue\nmetadata:\n  name: q\n  namespace: elsewhere\n"
     "spec: {clusterQueue: cq}\n---\n" + cq("  namespaceSelector: {}\n"), "undeclared-namespace", 5, "warning"),
    (cq("  resourceGroups:\n" + group(["cpu"], ["default"]) + "  admissionChecksStrategy:\n    admissionChecks:\n"
        "      - {name: prov, onFlavors: [spot]}\n") + "---\napiVersion: kueue.x-k8s.io/v1beta2\n"
     "kind: AdmissionCheck\nmetadata: {name: prov}\nspec: {controllerName: example.com/prov}\n",
     "unknown-flavor", 14, "warning"),
    ("apiVersion: kueue.x-k8s.io/v1beta1\nkind: ClusterQueue\nmetadata: {name: old}\nspec:\n"
     "  admissionChecks: [prov]\n", "unknown-admission-check", 5, "error"),
    ("apiVersion: kueue.x-k8s.io/v1beta2\nkind: Cohort\nmetadata: {name: self}\nspec: {parentName: self}\n",
     "cohort-cycle", 4, "error"),
    (cq("  cohortName: c\n  resourceGroups:\n" + group(["cpu"], ["default"], quota='"4", lendingLimit: "-1"')),
     "negative-quota", 12, "error"),
    (cq("  resourceGroups:\n    - coveredResources: [cpu]\n      flavors: []\n"), "empty-resource-group", 8,
     "error"),
], ids=["covered-resources-over-64", "flavors-over-64", "resource-name", "cohort-name-reference",
        "queue-name-over-label-length", "annotation-key", "taint-key", "unused-cohort-object",
        "undeclared-namespace", "admission-check-on-unused-flavor", "v1beta1-admission-check-reference",
        "cohort-its-own-parent", "negative-lending-limit", "group-without-flavors"])
def test_rule_reports_code_at_line(text: str, code: str, line: int, severity: str) -> None:
    """Each rule's finding carries its code, the file and the line of the field at fault, and its severity."""
    assert (code, "q/x.yaml", line, severity) in found(text)


LQ = "apiVersion: kueue.x-k8s.io/v1beta2\nkind: LocalQueue\nmetadata: {name: q, namespace: team-a}\n" \
     "spec: {clusterQueue: cq}\n---\n"


@pytest.mark.parametrize(("selector", "selected"), [
    ("", False),
    ("  namespaceSelector: {}\n", True),
    ("  namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: team-a}}\n", True),
    ("  namespaceSelector: {matchLabels: {team: b}}\n", False),
    ("  namespaceSelector:\n    matchExpressions: [{key: team, operator: DoesNotExist}]\n", True),
], ids=["no-selector-selects-nothing", "empty-selects-all", "built-in-name-label", "label-mismatch",
        "does-not-exist"])
def test_local_queue_namespace_must_be_selected(selector: str, selected: bool) -> None:
    """A LocalQueue in a namespace its ClusterQueue does not select is warned about at spec.clusterQueue."""
    warnings = [(c, line) for c, _, line, sev in found(LQ + cq(selector)) if sev == "warning"]
    assert warnings == ([] if selected else [("namespace-not-selected", 4)])


def test_cohort_used_as_parent_is_not_unused() -> None:
    """A Cohort that is only another Cohort's parent counts as used."""
    text = ("apiVersion: kueue.x-k8s.io/v1beta2\nkind: Cohort\nmetadata: {name: root}\n---\n"
            "apiVersion: kueue.x-k8s.io/v1beta2\nkind: Cohort\nmetadata: {name: child}\nspec: {parentName: root}\n"
            "---\n" + cq("  cohortName: child\n"))
    assert found(text) == []


def test_duplicate_object_names_both_places() -> None:
    """The same ClusterQueue in two files: the finding names the other file and line."""
    report = check_files({"q/a.yaml": cq("").encode(), "q/b.yaml": ("# x\n" + cq("")).encode()}, CONFIG,
                         cache=ParseCache())
    [dup] = [f for f in report.findings if f.code == "duplicate-object"]
    assert dup.location is not None and (dup.location.path, dup.location.line) == ("q/b.yaml", 2)
    assert "q/a.yaml:1" in dup.message


def test_files_outside_include_are_ignored() -> None:
    """A broken YAML file outside the include paths neither loads nor reports."""
    report = check_files({"q/a.yaml": BASE.encode(), "docs/broken.yaml": b"a: [", "q/notes.txt": b"a: ["},
                         CONFIG, cache=ParseCache())
    assert report.findings == ()
    assert report.files == ("q/a.yaml",)


def test_allow_kinds_pass_through_unchanged() -> None:
    """A kind listed in allowKinds is kept as written and rendered last; other unknown kinds stay errors."""
    config = CONFIG + b"allowKinds: [v1/ConfigMap]\n"
    text = ("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings, namespace: team-a}\ndata: {a: b}\n---\n"
            "apiVersion: v1\nkind: Secret\nmetadata: {name: s, namespace: team-a}\n")
    report = check(text, config=config)
    assert [p.kind for p in report.passthrough] == ["ConfigMap"]
    assert [f.code for f in report.findings] == ["unknown-kind"]


def test_missing_config_is_a_finding() -> None:
    """Without gitopsq.yaml nothing is loaded and the report says why."""
    report = check_files({"q/a.yaml": BASE.encode()}, None)
    assert [f.code for f in report.findings] == ["config-missing"]
    assert not report.ok


def test_v1beta1_objects_are_normalised() -> None:
    """A v1beta1 ClusterQueue (cohort, Borrow fungibility) decodes to the v1beta2 model."""
    text = ("apiVersion: kueue.x-k8s.io/v1beta1\nkind: ClusterQueue\nmetadata: {name: old}\nspec:\n"
            "  cohort: research\n  flavorFungibility: {whenCanBorrow: Borrow}\n")
    [_, _, entry] = check(text).entries
    assert entry.api_version == "kueue.x-k8s.io/v1beta1"
    assert entry.obj.cohort_name == "research"  # type: ignore[union-attr]
    assert entry.obj.flavor_fungibility.when_can_borrow == "MayStopSearch"  # type: ignore[union-attr]
