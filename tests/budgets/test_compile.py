"""The Budget compiler, table-driven: a Budget's fields → the ClusterQueue and LocalQueues, and every bad Budget
→ findings on the Budget's own lines (never a traceback, never a line of compiled output)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from gitopsq.api import model as m
from gitopsq.api.codec import decode, encode
from gitopsq.manifests import check_files, load_file, render_documents
from gitopsq.manifests.budget_compile import compile_objects
from gitopsq.manifests.check_report import Report

CONFIG = b"""apiVersion: gitopsq.dev/v1alpha1
kind: RepositoryConfig
include: [teams/, platform/]
platformTeam: platform
teams:
  - {name: platform, paths: ["platform/**"]}
  - {name: team-a, paths: ["teams/a/**"], namespaces: [team-a, team-a-dev], cohorts: [pool]}
capacity:
  a100: {cpu: "64", memory: 512Gi, nvidia.com/gpu: "16"}
  spot: {cpu: "64", memory: 256Gi}
"""
PLATFORM = b"""apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: a100}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: spot}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: WorkloadPriorityClass
metadata: {name: standard}
value: 100
"""
BUDGET = """apiVersion: gitopsq.dev/v1alpha1
kind: Budget
metadata:
  name: team-a-gpu
spec:
  team: team-a
  namespaces: [team-a, team-a-dev]
  cohort: pool
  priorityClass: standard
  fairShareWeight: "3"
  flavors:
    - name: a100
      committed: {nvidia.com/gpu: 4, cpu: "32"}
      burst: {nvidia.com/gpu: 10}
    - name: spot
      committed: {cpu: "8"}
      burst: {cpu: "16"}
"""


def _compiled(text: str) -> tuple[m.ClusterQueue, list[m.LocalQueue]]:
    result = load_file("teams/a/budget.yaml", text.encode())
    assert not [f for f in result.findings if f.is_error], result.findings
    assert len(result.budgets) == 1
    cq = next(e.obj for e in result.entries if isinstance(e.obj, m.ClusterQueue))
    return cq, [e.obj for e in result.entries if isinstance(e.obj, m.LocalQueue)]


def _quota(cq: m.ClusterQueue, flavor: str, resource: str) -> tuple[str, str | None]:
    fq = next(f for f in cq.resource_groups[0].flavors if f.name == flavor)
    q = fq.quota(resource)
    assert q is not None
    return str(q.nominal_quota), None if q.borrowing_limit is None else str(q.borrowing_limit)


# (case, budget text, flavor, resource, (nominalQuota, borrowingLimit))
QUOTA_CASES = [
    ("committed becomes nominal, burst − committed the borrowing limit", BUDGET, "a100", "nvidia.com/gpu", ("4", "6")),
    ("no burst: no borrowing", BUDGET, "a100", "cpu", ("32", "0")),
    ("a resource another flavor names is offered as 0 here", BUDGET, "spot", "nvidia.com/gpu", ("0", "0")),
    ("burst on a second flavor", BUDGET, "spot", "cpu", ("8", "8")),
    ("a flavor the team may only burst into", BUDGET.replace('committed: {cpu: "8"}', "committed: {}"), "spot", "cpu",
     ("0", "16")),
    ("without a cohort there is no borrowing limit", BUDGET.replace("  cohort: pool\n", "")
     .replace("      burst: {nvidia.com/gpu: 10}\n", "").replace('      burst: {cpu: "16"}\n', ""), "a100",
     "nvidia.com/gpu", ("4", None)),
]


@pytest.mark.parametrize(("text", "flavor", "resource", "want"), [c[1:] for c in QUOTA_CASES],
                         ids=[c[0] for c in QUOTA_CASES])
def test_quota_mapping(text: str, flavor: str, resource: str, want: tuple[str, str | None]) -> None:
    """Each committed/burst pair compiles to the nominalQuota and borrowingLimit docs/budgets.md promises."""
    cq, _ = _compiled(text)
    assert _quota(cq, flavor, resource) == want


def test_cluster_queue_fields() -> None:
    """Name, cohort, preferred flavor order, sorted covered resources, selector, fungibility, preemption, weight."""
    cq, lqs = _compiled(BUDGET)
    assert cq.meta.name == "team-a-gpu" and cq.cohort_name == "pool"
    assert cq.flavor_names() == ("a100", "spot")
    assert cq.resource_groups[0].covered_resources == ("cpu", "nvidia.com/gpu")  # sorted, whatever the map order
    assert cq.namespace_selector is not None
    assert cq.namespace_selector.matches({"kubernetes.io/metadata.name": "team-a-dev"})
    assert not cq.namespace_selector.matches({"kubernetes.io/metadata.name": "team-b"})
    assert (cq.flavor_fungibility.when_can_borrow, cq.flavor_fungibility.when_can_preempt,
            cq.flavor_fungibility.preference) == ("TryNextFlavor", "TryNextFlavor", "BorrowingOverPreemption")
    assert (cq.preemption.within_cluster_queue, cq.preemption.reclaim_within_cohort) == ("LowerPriority", "Any")
    assert cq.fair_sharing is not None and str(cq.fair_sharing.weight) == "3"
    assert [(lq.meta.namespace, lq.meta.name, lq.cluster_queue) for lq in lqs] == [
        ("team-a", "team-a-gpu", "team-a-gpu"), ("team-a-dev", "team-a-gpu", "team-a-gpu")]


def test_ownership_trail() -> None:
    """Every compiled object carries the Budget's name and team as labels and the Budget in an annotation."""
    cq, lqs = _compiled(BUDGET.replace("  cohort: pool\n", "  cohort: pool\n  queueName: gpu\n  workspace: vision\n"))
    for obj in (cq, *lqs):
        assert obj.meta.labels["gitopsq.dev/budget"] == "team-a-gpu"
        assert obj.meta.labels["gitopsq.dev/team"] == "team-a"
        assert obj.meta.labels["gitopsq.dev/workspace"] == "vision"
        assert obj.meta.annotations["gitopsq.dev/compiled-from"] == "Budget/team-a-gpu"  # not the file: see docs
    assert {lq.meta.name for lq in lqs} == {"gpu"}
    assert {lq.meta.annotations["gitopsq.dev/priority-class"] for lq in lqs} == {"standard"}


def test_no_cohort_no_reclaim() -> None:
    """Without a cohort nothing is lent, so nothing is reclaimed: reclaimWithinCohort stays Never."""
    text = BUDGET.replace("  cohort: pool\n", "").replace("      burst: {nvidia.com/gpu: 10}\n", "")
    cq, _ = _compiled(text.replace('      burst: {cpu: "16"}\n', ""))
    assert cq.cohort_name is None and cq.preemption.reclaim_within_cohort == "Never"


def test_compiled_output_is_valid_kueue() -> None:
    """The compiled documents decode again as Kueue objects equal to the compiled ones (no invented fields)."""
    cq, lqs = _compiled(BUDGET)
    for obj in (cq, *lqs):
        again = decode(encode(obj))
        assert again.obj == obj and not again.findings


# (case, replace this text, with this, finding code, line of the finding in the Budget file)
BAD = [
    ("burst below committed", "burst: {nvidia.com/gpu: 10}", "burst: {nvidia.com/gpu: 2}",
     "budget-burst-below-committed", 14),
    ("burst without a cohort", "  cohort: pool\n", "", "budget-burst-without-cohort", 13),
    ("bad quantity", 'committed: {cpu: "8"}', 'committed: {cpu: "8 cores"}', "invalid-quantity", 16),
    ("negative committed", 'committed: {cpu: "8"}', 'committed: {cpu: "-8"}', "negative-quota", 16),
    ("bad resource name", 'committed: {cpu: "8"}', 'committed: {"c p u": "8"}', "invalid-resource-name", 16),
    ("unknown field", "  fairShareWeight:", "  fairShareWieght:", "unknown-field", 10),
    ("no namespaces", "  namespaces: [team-a, team-a-dev]\n", "", "missing-field", 5),
    ("bad namespace", "[team-a, team-a-dev]", "[team-a, Team_A]", "invalid-name", 7),
    ("flavor twice", "    - name: spot", "    - name: a100", "invalid-value", 15),
    ("namespaced Budget", "  name: team-a-gpu\n", "  name: team-a-gpu\n  namespace: team-a\n", "wrong-scope", 5),
]


@pytest.mark.parametrize(("old", "new", "code", "line"), [c[1:] for c in BAD], ids=[c[0] for c in BAD])
def test_bad_budget_points_at_its_line(old: str, new: str, code: str, line: int) -> None:
    """A bad Budget is reported with its code on the Budget's own line, and compiles into nothing."""
    assert old in BUDGET
    result = load_file("teams/a/budget.yaml", BUDGET.replace(old, new).encode())
    found = [(f.code, f.location.line if f.location else None, f.location.path if f.location else None)
             for f in result.findings if f.is_error]
    assert (code, line, "teams/a/budget.yaml") in found, found
    assert not result.entries and not result.budgets


# (case, replace, with, code, line) — rules that need the rest of the revision
REVISION_BAD = [
    ("unknown flavor", "    - name: spot", "    - name: spto", "unknown-flavor", 15),
    ("unknown resource for the flavor's capacity", 'committed: {cpu: "8"}', 'committed: {cpu: "8", nvidia.com/gpu: 1}',
     "budget-unknown-resource", 16),
    ("unknown priority class", "priorityClass: standard", "priorityClass: urgent", "unknown-priority-class", 9),
    ("unknown team", "  team: team-a", "  team: team-z", "budget-unknown-team", 6),
]


@pytest.mark.parametrize(("old", "new", "code", "line"), [c[1:] for c in REVISION_BAD],
                         ids=[c[0] for c in REVISION_BAD])
def test_revision_rules_point_at_the_budget(old: str, new: str, code: str, line: int) -> None:
    """Cross-object problems of a Budget are findings on the Budget's line, not on compiled output."""
    report = check_files({"teams/a/budget.yaml": BUDGET.replace(old, new).encode(),
                          "platform/flavors.yaml": PLATFORM}, CONFIG)
    found = [(f.code, f.location.path if f.location else None, f.location.line if f.location else None)
             for f in report.errors]
    assert (code, "teams/a/budget.yaml", line) in found, found


def test_valid_budget_revision_is_clean() -> None:
    """The example Budget with its flavors and priority class checks clean and yields 3 compiled objects."""
    report = check_files({"teams/a/budget.yaml": BUDGET.encode(), "platform/flavors.yaml": PLATFORM}, CONFIG)
    assert report.ok, report.findings
    assert [b.budget.name for b in report.budgets] == ["team-a-gpu"]
    assert sorted(str(e.key) for e in report.entries if e.path == "teams/a/budget.yaml") == [
        "ClusterQueue/team-a-gpu", "LocalQueue/team-a-dev/team-a-gpu", "LocalQueue/team-a/team-a-gpu"]


@pytest.mark.parametrize("kind", ["ClusterQueue", "LocalQueue"])
def test_conflict_with_hand_written_queue_names_both_files(kind: str) -> None:
    """A hand-written queue the Budget also compiles into is one budget-conflict error naming both files."""
    other = (b"apiVersion: kueue.x-k8s.io/v1beta2\nkind: ClusterQueue\nmetadata: {name: team-a-gpu}\nspec: {}\n"
             if kind == "ClusterQueue" else
             b"apiVersion: kueue.x-k8s.io/v1beta2\nkind: LocalQueue\nmetadata: {name: team-a-gpu, namespace: team-a}\n"
             b"spec: {clusterQueue: team-a-gpu}\n")
    report = check_files({"teams/a/budget.yaml": BUDGET.encode(), "teams/a/queues.yaml": other,
                          "platform/flavors.yaml": PLATFORM}, CONFIG)
    conflicts = [f for f in report.errors if f.code == "budget-conflict"]
    assert len(conflicts) == 1, report.findings
    assert conflicts[0].location is not None and conflicts[0].location.path == "teams/a/budget.yaml"
    assert "teams/a/budget.yaml" in conflicts[0].message and "teams/a/queues.yaml:1" in conflicts[0].message
    assert not [f for f in report.errors if f.code == "duplicate-object"]


def test_two_budgets_of_one_name_conflict() -> None:
    """Two Budgets compiling into one ClusterQueue: the later file's Budget is named with the earlier's place."""
    report = check_files({"teams/a/budget.yaml": BUDGET.encode(), "teams/a/z-budget.yaml": BUDGET.encode(),
                          "platform/flavors.yaml": PLATFORM}, CONFIG)
    conflicts = [f for f in report.errors if f.code == "budget-conflict"]
    assert conflicts and all("Budget 'team-a-gpu' at teams/a/budget.yaml" in f.message for f in conflicts)


def test_compile_objects_is_pure_and_deterministic() -> None:
    """Compiling the same Budget twice gives equal objects (the plan relies on it to see no change)."""
    result = load_file("teams/a/budget.yaml", BUDGET.encode())
    (loaded,) = result.budgets
    assert compile_objects(loaded.budget, loaded.path) == compile_objects(loaded.budget, loaded.path)


def test_hand_written_copy_of_the_labels_is_not_compiled() -> None:
    """A hand-written ClusterQueue that copies a Budget's label and annotation from another file still conflicts
    as written by hand (being compiled means sitting in the Budget's own file)."""
    copy = (b"apiVersion: kueue.x-k8s.io/v1beta2\nkind: ClusterQueue\nmetadata:\n  name: team-a-gpu\n"
            b"  labels: {gitopsq.dev/budget: team-a-gpu}\n"
            b"  annotations: {gitopsq.dev/compiled-from: Budget/team-a-gpu}\n"
            b"spec: {}\n")
    report = check_files({"teams/a/budget.yaml": BUDGET.encode(), "teams/a/copy.yaml": copy,
                          "platform/flavors.yaml": PLATFORM}, CONFIG)
    (conflict,) = [f for f in report.errors if f.code == "budget-conflict"]
    assert "teams/a/copy.yaml:1 (written by hand)" in conflict.message


def test_budget_without_any_resource_is_refused() -> None:
    """Flavors that commit and burst nothing would compile into a queue offering nothing: an error on spec.flavors."""
    text = BUDGET[:BUDGET.index("  flavors:")] + "  flavors:\n    - {name: a100, committed: {}}\n"
    result = load_file("teams/a/budget.yaml", text.encode())
    found = [(f.code, f.location.line if f.location else None) for f in result.findings if f.is_error]
    assert found == [("invalid-value", 11)] and not result.entries


def test_docs_example_is_the_real_output() -> None:
    """docs/budgets.md's worked example shows exactly what `render` prints for its Budget."""
    text = (Path(__file__).resolve().parents[2] / "docs" / "budgets.md").read_text(encoding="utf-8")
    budget = re.search(r"```yaml\n(# teams/ml-research/gpu-budget.yaml\n.*?)```", text, re.S)
    shown = re.search(r"<!-- budget-example:start -->\n```yaml\n(.*?)```\n<!-- budget-example:end -->", text, re.S)
    assert budget is not None and shown is not None
    result = load_file("teams/ml-research/gpu-budget.yaml", budget.group(1).encode())
    assert result.findings == ()
    assert render_documents(Report(None, None, result.entries, ())) == shown.group(1)
