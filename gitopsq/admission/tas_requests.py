"""A pod set's topology request, read from Kueue's pod template annotations (Kueue v0.19's jobframework).

One of ``kueue.x-k8s.io/podset-required-topology`` (all pods in one domain of that level),
``podset-preferred-topology`` (one domain if possible, else the next level up, else spread) or
``podset-unconstrained-topology: "true"`` (anywhere with room), optionally with ``podset-slice-required-topology``
and ``podset-slice-size`` (every slice of that many pods in one domain of the slice level), and
``podset-group-name`` (pod sets placed together). A pod set with none of them asks for nothing, unless every
flavor of its ClusterQueue is a TAS flavor: then Kueue places it as if unconstrained (an *implied* request).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

REQUIRED = "kueue.x-k8s.io/podset-required-topology"
PREFERRED = "kueue.x-k8s.io/podset-preferred-topology"
UNCONSTRAINED = "kueue.x-k8s.io/podset-unconstrained-topology"
SLICE_REQUIRED = "kueue.x-k8s.io/podset-slice-required-topology"
SLICE_SIZE = "kueue.x-k8s.io/podset-slice-size"
SLICE_CONSTRAINTS = "kueue.x-k8s.io/podset-slice-required-topology-constraints"
GROUP = "kueue.x-k8s.io/podset-group-name"

_TRUE = ("1", "t", "T", "TRUE", "true", "True")
_FALSE = ("0", "f", "F", "FALSE", "false", "False")


class TopologyRequestError(ValueError):
    """An annotation that Kueue would refuse; the message names the pod set, the annotation and the value."""


@dataclass(frozen=True, slots=True)
class TopologyRequest:
    """Kueue's PodSetTopologyRequest (the fields this engine places by)."""

    required: str | None = None
    preferred: str | None = None
    unconstrained: bool | None = None
    slice_topology: str | None = None
    slice_size: int | None = None
    group: str | None = None

    def explicit(self) -> bool:
        """Kueue's IsExplicitlyRequestingTAS."""
        return (self.unconstrained is not None or self.required is not None or self.preferred is not None
                or self.slice_topology is not None or self.slice_size is not None)

    def slice_only(self) -> bool:
        """Only a slice layer: placed unconstrained at the highest level."""
        return self.required is None and self.preferred is None and self.slice_topology is not None


def _int32(text: str, where: str) -> int:
    body = text[1:] if text[:1] in ("+", "-") else text
    if not body.isdigit() or not body.isascii():
        raise TopologyRequestError(f"{where}: {SLICE_SIZE}: {text!r} is not an integer")
    value = int(text)
    if not -(2 ** 31) <= value < 2 ** 31:
        raise TopologyRequestError(f"{where}: {SLICE_SIZE}: {text!r} is out of range")
    return value


def parse_annotations(annotations: Mapping[str, str], where: str) -> TopologyRequest | None:
    """The topology request of a pod template's annotations (None: it asks for none). ``where`` names the pod
    set in errors, e.g. ``"Job team-a/train pod set main"``."""
    if SLICE_CONSTRAINTS in annotations:
        raise TopologyRequestError(f"{where}: {SLICE_CONSTRAINTS} (multi-layer slices) is not supported by "
                                   "gitopsq's admission engine yet")
    required = annotations.get(REQUIRED)
    preferred = annotations.get(PREFERRED)
    unconstrained: bool | None = None
    slice_topology = annotations.get(SLICE_REQUIRED)
    size_text = annotations.get(SLICE_SIZE)
    if required is None and preferred is None:
        raw = annotations.get(UNCONSTRAINED)
        if raw is not None:
            if raw in _TRUE:
                unconstrained = True
            elif raw in _FALSE:
                unconstrained = False
            else:
                raise TopologyRequestError(f"{where}: {UNCONSTRAINED}: {raw!r} is not a boolean")
        elif slice_topology is None or size_text is None:
            return None
    elif required is not None:
        preferred = None  # Kueue reads the required annotation first and ignores the rest
    slice_size: int | None = None
    if slice_topology is not None and size_text is not None:
        slice_size = _int32(size_text, where)
    else:
        slice_topology = None
    group = annotations.get(GROUP) if (required is not None or preferred is not None) else None
    return TopologyRequest(required=required, preferred=preferred, unconstrained=unconstrained,
                           slice_topology=slice_topology, slice_size=slice_size, group=group)
