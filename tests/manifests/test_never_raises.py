"""Whatever bytes a repository holds, checking it yields findings, never an exception."""

from __future__ import annotations

from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gitopsq.manifests import ParseCache, check_files, load_file

CONFIG = b"apiVersion: gitopsq.dev/v1alpha1\nkind: RepositoryConfig\ninclude: [q/]\nplatformTeam: p\n" \
         b"teams: [{name: p, paths: ['**']}]\n"
KINDS = ["ResourceFlavor", "ClusterQueue", "LocalQueue", "Cohort", "WorkloadPriorityClass", "AdmissionCheck",
         "Namespace", "PriorityClass", "Workload", "Pod"]
VERSIONS = ["kueue.x-k8s.io/v1beta1", "kueue.x-k8s.io/v1beta2", "v1", "scheduling.k8s.io/v1", "x/v9"]
FIELDS = ["name", "namespace", "spec", "resourceGroups", "coveredResources", "flavors", "resources",
          "nominalQuota", "borrowingLimit", "lendingLimit", "cohortName", "cohort", "parentName", "clusterQueue",
          "preemption", "borrowWithinCohort", "policy", "flavorFungibility", "preference", "admissionChecks",
          "admissionChecksStrategy", "onFlavors", "labels", "nodeTaints", "value", "key", "effect", "podSets"]

scalars = st.one_of(st.none(), st.booleans(), st.integers(-10**20, 10**20), st.floats(allow_nan=True),
                    st.sampled_from(["", "cpu", "1.5.3", "-1", "1e400", "default", "Never", "TryNextFlavor",
                                     "x" * 300]),
                    st.text(max_size=12))
values = st.recursive(scalars, lambda children: st.one_of(
    st.lists(children, max_size=4),
    st.dictionaries(st.one_of(st.sampled_from(FIELDS), st.text(max_size=6)), children, max_size=5)),
    max_leaves=30)


def manifest(kind: str, version: str, meta: Any, spec: Any) -> dict[str, Any]:
    return {"apiVersion": version, "kind": kind, "metadata": meta, "spec": spec}


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.binary(max_size=400))
def test_arbitrary_bytes_never_raise(data: bytes) -> None:
    """Random bytes as a manifest file: load_file returns (possibly with findings) and never raises."""
    load_file("q/x.yaml", data)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(docs=st.lists(st.builds(manifest, st.sampled_from(KINDS), st.sampled_from(VERSIONS),
                               st.one_of(values, st.builds(dict, name=st.sampled_from(["a", "b", "A_1"]),
                                                           namespace=st.sampled_from(["ns", "a", None]))),
                               values), min_size=1, max_size=4))
def test_arbitrary_manifests_never_raise(docs: list[dict[str, Any]]) -> None:
    """Well-formed YAML with arbitrary shapes under every kind: the whole pipeline returns a report."""
    text = yaml.safe_dump_all(docs).encode()
    report = check_files({"q/x.yaml": text, "q/y.yaml": text}, CONFIG, cache=ParseCache())
    assert all(f.code and f.message for f in report.findings)


quota = st.fixed_dictionaries({"name": st.one_of(st.sampled_from(["cpu", "memory"]), scalars),
                               "nominalQuota": scalars},
                              optional={"borrowingLimit": scalars, "lendingLimit": scalars})
flavor = st.fixed_dictionaries({"name": st.one_of(st.sampled_from(["default", "spot"]), scalars),
                                "resources": st.one_of(st.lists(quota, max_size=3), values)})
group = st.fixed_dictionaries({"coveredResources": st.one_of(st.lists(st.sampled_from(["cpu", "memory"]),
                                                                      max_size=3), values),
                               "flavors": st.one_of(st.lists(flavor, max_size=3), values)})
spec = st.fixed_dictionaries({}, optional={
    "cohortName": st.one_of(st.sampled_from(["c", "d"]), scalars), "parentName": st.sampled_from(["c", "d"]),
    "resourceGroups": st.one_of(st.lists(group, max_size=3), values),
    "preemption": st.one_of(values, st.fixed_dictionaries({}, optional={
        "reclaimWithinCohort": st.sampled_from(["Never", "Any", "x"]),
        "borrowWithinCohort": st.one_of(values, st.fixed_dictionaries({"policy": st.sampled_from(
            ["Never", "LowerPriority", "y"])}))})),
    "flavorFungibility": values, "admissionChecks": values, "admissionChecksStrategy": values})


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(docs=st.lists(st.builds(manifest, st.sampled_from(["ClusterQueue", "Cohort"]),
                               st.sampled_from(VERSIONS[:2]), st.builds(dict, name=st.sampled_from(["c", "d", "e"])),
                               spec), min_size=1, max_size=4))
def test_arbitrary_quota_trees_never_raise(docs: list[dict[str, Any]]) -> None:
    """ClusterQueues and Cohorts with arbitrary resource groups, limits and cohort links: a report, no exception."""
    report = check_files({"q/x.yaml": yaml.safe_dump_all(docs).encode()}, CONFIG, cache=ParseCache())
    assert all(f.code and f.message for f in report.findings)
