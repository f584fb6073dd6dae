"""Topology requests from pod template annotations (gitopsq.admission.tas_requests), against Kueue v0.19.2's
``TestPodSetTopologyRequestBuilder`` (pkg/controller/jobframework/tas_test.go): each case names the Go case."""

from __future__ import annotations

import pytest

from gitopsq.admission.tas_requests import (
    GROUP,
    PREFERRED,
    REQUIRED,
    SLICE_CONSTRAINTS,
    SLICE_REQUIRED,
    SLICE_SIZE,
    UNCONSTRAINED,
    TopologyRequest,
    TopologyRequestError,
    parse_annotations,
)

WHERE = "Job team-a/train pod set main"


@pytest.mark.parametrize(("annotations", "want"), [
    pytest.param({REQUIRED: "cloud.com/block"}, TopologyRequest(required="cloud.com/block"), id="required annotation"),
    pytest.param({REQUIRED: "cloud.com/block", GROUP: "block"},
                 TopologyRequest(required="cloud.com/block", group="block"),
                 id="required annotation with sub group and pod set group name annotation"),
    pytest.param({PREFERRED: "cloud.com/block"}, TopologyRequest(preferred="cloud.com/block"),
                 id="preferred annotation"),
    pytest.param({UNCONSTRAINED: "true"}, TopologyRequest(unconstrained=True), id="unconstrained annotation (true)"),
    pytest.param({UNCONSTRAINED: "false"}, TopologyRequest(unconstrained=False),
                 id="unconstrained annotation (false)"),
    pytest.param({SLICE_REQUIRED: "cloud.com/block", SLICE_SIZE: "1"},
                 TopologyRequest(slice_topology="cloud.com/block", slice_size=1), id="slice-only topology"),
    pytest.param({SLICE_REQUIRED: "cloud.com/block"}, None, id="slice-only topology - only slice required annotation"),
    pytest.param({SLICE_SIZE: "1"}, None, id="slice-only topology - only slice size annotation"),
    pytest.param({SLICE_REQUIRED: "cloud.com/block", SLICE_SIZE: "1", GROUP: "block"},
                 TopologyRequest(slice_topology="cloud.com/block", slice_size=1),
                 id="slice-only topology with sub group and pod set group name annotation"),
    pytest.param({}, None, id="no annotations"),
])
def test_parse(annotations: dict[str, str], want: TopologyRequest | None) -> None:
    """Go: TestPodSetTopologyRequestBuilder, the case named by the test id (the group name only goes with a
    required or preferred request)."""
    assert parse_annotations(annotations, WHERE) == want


@pytest.mark.parametrize(("annotations", "message"), [
    pytest.param({UNCONSTRAINED: "invalid"}, f"{WHERE}: {UNCONSTRAINED}: 'invalid' is not a boolean",
                 id="invalid unconstrained topology annotation value"),
    pytest.param({SLICE_REQUIRED: "cloud.com/block", SLICE_SIZE: "invalid"},
                 f"{WHERE}: {SLICE_SIZE}: 'invalid' is not an integer",
                 id="invalid podset slice size annotation value"),
    pytest.param({SLICE_REQUIRED: "cloud.com/block", SLICE_SIZE: "4294967296"},
                 f"{WHERE}: {SLICE_SIZE}: '4294967296' is out of range", id="slice size beyond int32"),
    pytest.param({SLICE_CONSTRAINTS: "[]"}, f"{WHERE}: {SLICE_CONSTRAINTS} (multi-layer slices) is not supported by "
                 "gitopsq's admission engine yet", id="multi-layer constraints"),
])
def test_bad_annotations_name_the_pod_set(annotations: dict[str, str], message: str) -> None:
    """Go: "invalid unconstrained topology annotation value", "invalid podset slice size annotation value"
    (Kueue: strconv.ErrSyntax); gitopsq's error names the pod set, the annotation and the value."""
    with pytest.raises(TopologyRequestError) as err:
        parse_annotations(annotations, WHERE)
    assert str(err.value) == message


def test_required_wins_over_the_others() -> None:
    """Kueue reads the required annotation first: preferred and unconstrained beside it are ignored."""
    got = parse_annotations({REQUIRED: "r", PREFERRED: "p", UNCONSTRAINED: "true"}, WHERE)
    assert got == TopologyRequest(required="r")
    assert got is not None and got.explicit()
    assert TopologyRequest(group="g").explicit() is False
