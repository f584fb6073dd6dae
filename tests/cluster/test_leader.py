"""Leader election on a real coordination.k8s.io Lease: one leader, release, expiry, renew deadline."""

from __future__ import annotations

import uuid

import pytest
from envtest_rig import Envtest

from gitopsq.cluster.apply import KubeRest
from gitopsq.cluster.leader import LeaderElector, LeaseConfig

pytestmark = pytest.mark.envtest

NAMESPACE = "gitopsq-system"


class FakeClock:
    """A monotonic clock the test advances by hand, so expiry needs no sleeping."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def candidates(env: Envtest, *names: str) -> tuple[list[LeaderElector], list[FakeClock]]:
    lease = f"lease-{uuid.uuid4().hex[:8]}"
    clocks = [FakeClock() for _ in names]
    electors = [LeaderElector(KubeRest(env.api_client()), LeaseConfig(NAMESPACE, lease, name, 4.0, 3.0, 1.0),
                              monotonic=clock) for name, clock in zip(names, clocks, strict=True)]
    electors[0].ensure_namespace()
    return electors, clocks


def holder(env: Envtest, elector: LeaderElector) -> str:
    lease = KubeRest(env.api_client()).request(
        "GET", f"/apis/coordination.k8s.io/v1/namespaces/{NAMESPACE}/leases/{elector.config.name}")
    return str(lease["spec"].get("holderIdentity") or "")


def test_exactly_one_of_two_candidates_leads(envtest: Envtest) -> None:
    """Two candidates racing for a new Lease: one leads, the other does not, and the Lease names the leader."""
    (a, b), _ = candidates(envtest, "a", "b")
    results = [a.step(), b.step(), a.step(), b.step()]
    assert results == [True, False, True, False]
    assert holder(envtest, a) == "a"


def test_release_hands_over_at_once(envtest: Envtest) -> None:
    """A leader that releases lets the standby take the Lease on its next round, without waiting for expiry."""
    (a, b), _ = candidates(envtest, "a", "b")
    assert a.step() and not b.step()
    a.release()
    assert not a.is_leading()
    assert b.step() and holder(envtest, b) == "b"


def test_standby_takes_over_only_after_the_lease_expires(envtest: Envtest) -> None:
    """A silent leader keeps the Lease for lease_duration as the standby measures it; after that it is taken."""
    (a, b), (_, clock_b) = candidates(envtest, "a", "b")
    assert a.step()
    assert not b.step()
    clock_b.now += 3.5  # less than the 4 s lease duration
    assert not b.step()
    clock_b.now += 1.0
    assert b.step() and holder(envtest, b) == "b"


def test_leader_stops_when_its_renew_deadline_passes(envtest: Envtest) -> None:
    """Without a successful renewal within renew_deadline a leader stops leading by itself."""
    (a,), (clock_a,) = candidates(envtest, "a")
    assert a.step() and a.is_leading()
    clock_a.now += 3.1
    assert not a.is_leading()


def test_leader_that_lost_the_lease_stops_at_once(envtest: Envtest) -> None:
    """When another candidate holds the Lease, the former leader's next round ends its leadership immediately."""
    (a, b), (clock_a, clock_b) = candidates(envtest, "a", "b")
    assert a.step()
    b.step()
    clock_b.now += 5
    assert b.step()
    assert a.is_leading()  # it has not noticed yet
    assert not a.step() and not a.is_leading()
    assert clock_a.now == 1000.0


def test_invalid_timing_is_refused() -> None:
    """retry_period < renew_deadline < lease_duration is required, as in client-go."""
    with pytest.raises(ValueError, match="leader election"):
        LeaseConfig("ns", "l", "me", lease_duration=5, renew_deadline=6, retry_period=1)
