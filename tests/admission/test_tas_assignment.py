"""topologyAssignment encodings (gitopsq.admission.tas_assignment) against Kueue v0.19.2's
pkg/util/tas/tas_assignment_test.go: each test names the Go test (and case) it reproduces."""

from __future__ import annotations

from typing import Any

import pytest

from gitopsq.admission.tas_assignment import (
    AssignmentError,
    by_hostname_prefix,
    from_v1beta1,
    from_v1beta2,
    placement_of,
    single_slice,
    v1beta1,
    v1beta2,
)
from gitopsq.admission.tas_placement import Placement

HOST = "kubernetes.io/hostname"


def placement(levels: tuple[str, ...], *domains: tuple[tuple[str, ...], int]) -> Placement:
    return placement_of(levels, list(domains))


def one_slice(count: int, pods: dict[str, Any], *values: dict[str, Any]) -> dict[str, Any]:
    return {"domainCount": count, "valuesPerLevel": list(values), "podCounts": pods}


@pytest.mark.parametrize(("p", "want"), [
    pytest.param(placement(("a", "b")), {"levels": ["a", "b"]}, id="empty"),
    pytest.param(placement(("a", "b"), (("a1", "b1"), 1)),
                 {"levels": ["a", "b"], "slices": [one_slice(1, {"universal": 1}, {"universal": "a1"},
                                                             {"universal": "b1"})]}, id="one domain"),
    pytest.param(placement(("a", "b"), (("a1", "b1"), 1), (("a2", "b2"), 1)),
                 {"levels": ["a", "b"], "slices": [one_slice(
                     2, {"universal": 1}, {"individual": {"prefix": "a", "roots": ["1", "2"]}},
                     {"individual": {"prefix": "b", "roots": ["1", "2"]}})]},
                 id="multiple domains, same counts, no common prefix"),
    pytest.param(placement(("a", "b"), (("p.a1.s", "p.b1.s"), 1), (("p.a2.s", "p.b2.s"), 2)),
                 {"levels": ["a", "b"], "slices": [one_slice(
                     2, {"individual": [1, 2]},
                     {"individual": {"prefix": "p.a", "suffix": ".s", "roots": ["1", "2"]}},
                     {"individual": {"prefix": "p.b", "suffix": ".s", "roots": ["1", "2"]}})]},
                 id="multiple domains, different counts, common prefix and suffix"),
    pytest.param(placement(("a", "b"), (("a1", "x"), 1), (("a1", "y"), 2)),
                 {"levels": ["a", "b"], "slices": [one_slice(
                     2, {"individual": [1, 2]}, {"universal": "a1"}, {"individual": {"roots": ["x", "y"]}})]},
                 id="multiple domains, universal value"),
    pytest.param(placement(("a",), (("a123",), 1), (("a12",), 1), (("a1",), 1), (("a13",), 1)),
                 {"levels": ["a"], "slices": [one_slice(
                     4, {"universal": 1}, {"individual": {"prefix": "a1", "roots": ["23", "2", "", "3"]}})]},
                 id="multiple domains, same counts, shrinking prefix"),
    pytest.param(placement(("a",), (("123b",), 1), (("23b",), 1), (("3b",), 1), (("13b",), 1)),
                 {"levels": ["a"], "slices": [one_slice(
                     4, {"universal": 1}, {"individual": {"suffix": "3b", "roots": ["12", "2", "", "1"]}})]},
                 id="multiple domains, same counts, shrinking suffix"),
    pytest.param(placement(("a",), (("abacacada",), 1), (("abacada",), 1)),
                 {"levels": ["a"], "slices": [one_slice(
                     2, {"universal": 1}, {"individual": {"prefix": "ab", "suffix": "acada", "roots": ["ac", ""]}})]},
                 id="multiple domains, same counts, max prefix & suffix overlap partially"),
    pytest.param(placement(("a",), (("ababa",), 1), (("aba",), 1)),
                 {"levels": ["a"], "slices": [one_slice(
                     2, {"universal": 1}, {"individual": {"suffix": "aba", "roots": ["ab", ""]}})]},
                 id="multiple domains, same counts, max prefix & suffix overlap fully, shrinking strings"),
    pytest.param(placement(("a",), (("aba",), 1), (("ababa",), 1)),
                 {"levels": ["a"], "slices": [one_slice(
                     2, {"universal": 1}, {"individual": {"suffix": "aba", "roots": ["", "ab"]}})]},
                 id="multiple domains, same counts, max prefix & suffix overlap fully, growing strings"),
])
def test_v1beta2_from_internal(p: Placement, want: dict[str, Any]) -> None:
    """Go: TestV1Beta2FromInternal (bothWaysTestCases, the case named by the test id)."""
    assert v1beta2(p) == want


def test_hostname_prefix_runs() -> None:
    """Go: TestCompactTopologyAssignmentEncodingWithHostnamePrefixRuns, cases "GKE node pools" and "AWS EKS
    private DNS names"."""
    gke = placement((HOST,), (("gke-c-pool-a-hash1-aa",), 3), (("gke-c-pool-a-hash1-bb",), 3),
                    (("gke-c-pool-b-hash2-cc",), 4), (("gke-c-pool-b-hash2-dd",), 5))
    assert by_hostname_prefix(gke)["slices"] == [
        one_slice(2, {"universal": 3}, {"individual": {"prefix": "gke-c-pool-a-hash1-", "roots": ["aa", "bb"]}}),
        one_slice(2, {"individual": [4, 5]}, {"individual": {"prefix": "gke-c-pool-b-hash2-", "roots": ["cc", "dd"]}}),
    ]
    eks = placement((HOST,), (("ip-10-24-34-0.us-west-2.compute.internal",), 2),
                    (("ip-10-24-34-1.us-west-2.compute.internal",), 2),
                    (("ip-10-24-35-0.us-west-2.compute.internal",), 3),
                    (("ip-10-24-35-1.us-west-2.compute.internal",), 4))
    suffix = ".us-west-2.compute.internal"
    assert by_hostname_prefix(eks)["slices"] == [
        one_slice(2, {"universal": 2}, {"individual": {"prefix": "ip-10-24-34-", "suffix": suffix,
                                                       "roots": ["0", "1"]}}),
        one_slice(2, {"individual": [3, 4]}, {"individual": {"prefix": "ip-10-24-35-", "suffix": suffix,
                                                             "roots": ["0", "1"]}}),
    ]


def test_hostname_prefix_runs_keep_domain_order() -> None:
    """Go: TestCompactTopologyAssignmentEncodingWithHostnamePrefixRuns_preservesDomainOrder (four slices)."""
    p = placement((HOST,), (("gke-c-pool-a-hash1-aa",), 1), (("gke-c-pool-b-hash2-cc",), 2),
                  (("gke-c-pool-a-hash1-bb",), 3), (("gke-c-pool-b-hash2-dd",), 4))
    slices = by_hostname_prefix(p)["slices"]
    assert isinstance(slices, list) and len(slices) == 4


def _pools(count: int) -> Placement:
    half = count // 2
    return placement((HOST,), *(((f"pool-{'a' if i < half else 'b'}-node-{i if i < half else i - half:05d}",), 1)
                                for i in range(count)))


@pytest.mark.parametrize(("count", "by_prefix"), [
    pytest.param(1, True, id="enabled keeps one-slice hostname-prefix encoding"),
    pytest.param(4, False, id="enabled uses smaller single-slice encoding"),
    pytest.param(20, True, id="enabled uses smaller hostname-prefix encoding"),
])
def test_shorter_encoding_wins(count: int, by_prefix: bool) -> None:
    """Go: TestV1Beta2FromInternal_hostnamePrefixFeatureGateAndFallback (the gate on, as by default)."""
    p = _pools(count)
    assert v1beta2(p) == (by_hostname_prefix(p) if by_prefix else single_slice(p))
    assert by_hostname_prefix(p) != single_slice(p) or count == 1


def test_v1beta1() -> None:
    """The v1beta1 form: levels, and values and count per domain (Kueue's v1beta1 TopologyAssignment)."""
    p = placement((HOST,), (("x1",), 2), (("x3",), 1))
    assert v1beta1(p) == {"levels": [HOST], "domains": [{"values": ["x1"], "count": 2},
                                                       {"values": ["x3"], "count": 1}]}


@pytest.mark.parametrize("p", [
    placement(("a", "b"), (("a1", "b1"), 1)),
    placement(("a",), (("a123",), 1), (("a12",), 1), (("a1",), 1), (("a13",), 1)),
    placement((HOST,), (("gke-c-pool-a-hash1-aa",), 3), (("gke-c-pool-a-hash1-bb",), 3),
              (("gke-c-pool-b-hash2-cc",), 4), (("gke-c-pool-b-hash2-dd",), 5)),
    _pools(20),
])
def test_read_back(p: Placement) -> None:
    """Go: TestInternalFromV1Beta2 (both ways): what is written reads back to the same domains and leaves."""
    for doc in (v1beta2(p), single_slice(p), by_hostname_prefix(p)):
        got = from_v1beta2(doc, "wl.status.admission.podSetAssignments[0].topologyAssignment")
        assert (got.levels, got.domains, got.leaves) == (p.levels, p.domains, p.leaves)
    got = from_v1beta1(v1beta1(p), "x")
    assert (got.levels, got.domains, got.leaves) == (p.levels, p.domains, p.leaves)


@pytest.mark.parametrize(("doc", "message"), [
    ({"levels": "a"}, "ps.levels: expected a list of strings"),
    ({"levels": ["a"], "slices": [{"domainCount": 2, "valuesPerLevel": [{"universal": "x"}],
                                   "podCounts": {"individual": [1]}}]},
     "ps.slices[0].podCounts.individual: expected 2 counts"),
    ({"levels": ["a", "b"], "slices": [{"domainCount": 1, "valuesPerLevel": [{"universal": "x"}],
                                        "podCounts": {"universal": 1}}]},
     "ps.slices[0].valuesPerLevel: expected one entry per level (2)"),
    ({"levels": ["a"], "slices": [{"domainCount": 1, "valuesPerLevel": [{"universal": "x"}],
                                   "podCounts": {"universal": -1}}]},
     "ps.slices[0].podCounts.universal: expected a count (a non-negative integer), got -1"),
])
def test_bad_assignments_are_named(doc: dict[str, Any], message: str) -> None:
    """A topologyAssignment that cannot be read is an error naming the field, not a traceback."""
    with pytest.raises(AssignmentError) as err:
        from_v1beta2(doc, "ps")
    assert str(err.value) == message


def test_large_assignment_backs_off_to_fit_the_slice_limit() -> None:
    """Go: TestV1Beta2FromInternal_largeHostnameAssignmentWithManyPools: 2,000 pools of 100 nodes would take
    2,000 slices by pool; a shorter shared prefix takes two slices of 100,000 domains."""
    p = placement((HOST,), *(((f"gke-cluster-pool-{pool:04d}-{pool:08x}-{node:04x}",), 1)
                             for pool in range(2000) for node in range(100)))
    slices = v1beta2(p)["slices"]
    assert isinstance(slices, list) and [s["domainCount"] for s in slices if isinstance(s, dict)] == [100_000] * 2
