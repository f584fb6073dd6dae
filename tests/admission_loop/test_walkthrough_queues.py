"""Walkthroughs (3)–(5) on the real API server: a namespace outside the selector, a missing ResourceFlavor, and
two teams of a cohort borrowing and then reclaiming with preemption."""

from __future__ import annotations

import time

import pytest
from cluster_rig import (
    admitted,
    apply,
    cluster_queue,
    cond,
    create_job,
    flavors_usage,
    job,
    job_manifest,
    wait_for,
    workload_of,
)
from envtest_rig import Envtest

pytestmark = [pytest.mark.envtest, pytest.mark.usefixtures("admission")]


def cq(name: str, cpu: str, *, flavor: str = "default-flavor", selector: str = "{}", cohort: str = "",
       preemption: str = "") -> str:
    return f"""
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {{name: {name}}}
spec:
  {f"cohortName: {cohort}" if cohort else ""}
  namespaceSelector: {selector}
  {f"preemption: {preemption}" if preemption else ""}
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: {flavor}
      resources: [{{name: cpu, nominalQuota: "{cpu}"}}]
"""


FLAVOR = """
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: default-flavor}
spec: {nodeLabels: {pool: research}}
"""


def lq(ns: str, name: str, cluster_queue_name: str) -> str:
    return f"""
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {{name: {name}, namespace: {ns}}}
spec: {{clusterQueue: {cluster_queue_name}}}
"""


def pending(env: Envtest, ns: str, name: str, reason: str) -> dict[str, str] | None:
    c = cond(workload_of(env, ns, name), "QuotaReserved")
    return c if c is not None and c["status"] == "False" and c["reason"] == reason else None


def test_namespace_outside_selector_waits_until_labelled(kueue_clean: Envtest) -> None:
    """A job from a namespace the ClusterQueue's selector does not match stays Misconfigured; labelling the
    namespace admits it."""
    env = kueue_clean
    ns = env.new_namespace("wt3")
    apply(env, "---".join([FLAVOR, cq("team-cq", "4", selector="{matchLabels: {team: research}}"),
                           lq(ns, "queue", "team-cq")]))
    create_job(env, job_manifest(ns, "outsider", "queue", {"cpu": "1"}))
    c = wait_for("Misconfigured", lambda: pending(env, ns, "outsider", "Misconfigured"))
    assert c["message"] == "workload namespace doesn't match ClusterQueue selector"
    assert job(env, ns, "outsider")["spec"]["suspend"] is True
    env.kubectl("label", "namespace", ns, "team=research")
    wait_for("admitted after labelling", lambda: admitted(env, ns, "outsider"))


def test_missing_flavor_keeps_cluster_queue_inactive_until_applied(
                                                                   kueue_clean: Envtest) -> None:
    """A ClusterQueue naming an absent ResourceFlavor is Active=False (FlavorNotFound) and its workloads wait as
    Suspended; applying the flavor activates it and admits them."""
    env = kueue_clean
    ns = env.new_namespace("wt4")
    apply(env, "---".join([cq("gpu-cq", "4", flavor="spot"), lq(ns, "queue", "gpu-cq")]))
    create_job(env, job_manifest(ns, "early", "queue", {"cpu": "1"}))
    active = wait_for("CQ inactive", lambda: (c := cond(cluster_queue(env, "gpu-cq"), "Active")) and c)
    assert (active["status"], active["reason"], active["message"]) == (
        "False", "FlavorNotFound", "Can't admit new workloads: references missing ResourceFlavor(s): spot.")
    c = wait_for("Suspended", lambda: pending(env, ns, "early", "Suspended"))
    assert c["message"] == "ClusterQueue gpu-cq is inactive"
    local = env.kubectl("get", "localqueue", "queue", "-n", ns, "-o", "jsonpath={.status.conditions[0].reason}")
    assert local.stdout == "ClusterQueueIsInactive"
    apply(env, FLAVOR.replace("default-flavor", "spot"))
    wait_for("admitted once the flavor exists", lambda: admitted(env, ns, "early"))
    active = wait_for("CQ active", lambda: (c := cond(cluster_queue(env, "gpu-cq"), "Active"))
                      and c["status"] == "True" and c)
    assert (active["reason"], active["message"]) == ("Ready", "Can admit new workloads")


def test_cohort_borrowing_then_reclaim_with_preemption(kueue_clean: Envtest) -> None:
    """Team A borrows team B's idle quota; when team B submits, team A's borrowing job is preempted
    (InCohortReclamation), suspended and requeued, and team B's job is admitted."""
    env = kueue_clean
    ns_a, ns_b = env.new_namespace("team-a"), env.new_namespace("team-b")
    reclaim = "{reclaimWithinCohort: Any}"
    apply(env, "---".join([FLAVOR, cq("team-a-cq", "4", cohort="research", preemption=reclaim),
                           cq("team-b-cq", "4", cohort="research", preemption=reclaim),
                           lq(ns_a, "queue", "team-a-cq"), lq(ns_b, "queue", "team-b-cq")]))
    create_job(env, job_manifest(ns_a, "a-own", "queue", {"cpu": "4"}))
    wait_for("a-own admitted", lambda: admitted(env, ns_a, "a-own"))
    # The victim is the most recently reserved (Kueue's candidate order), and reservation times have whole
    # seconds: admitted within the same second, the two tie and the older, a-own, goes first (a CI failure).
    time.sleep(1.0)
    create_job(env, job_manifest(ns_a, "a-borrow", "queue", {"cpu": "4"}))
    wait_for("a-borrow admitted by borrowing", lambda: admitted(env, ns_a, "a-borrow"))
    borrowed = wait_for("team-a borrows 4", lambda: (q := cluster_queue(env, "team-a-cq"))
                        and {(f["name"], r["name"]): r["borrowed"] for f in q["status"]["flavorsUsage"]
                             for r in f["resources"]}.get(("default-flavor", "cpu")) == "4" and q)
    assert flavors_usage(borrowed)[("default-flavor", "cpu")] == "8"

    create_job(env, job_manifest(ns_b, "b-reclaims", "queue", {"cpu": "4"}))
    wait_for("b-reclaims admitted", lambda: admitted(env, ns_b, "b-reclaims"), timeout=30)
    victim = workload_of(env, ns_a, "a-borrow")
    preempted, evicted = cond(victim, "Preempted"), cond(victim, "Evicted")
    assert preempted is not None and (preempted["status"], preempted["reason"]) == ("True", "InCohortReclamation")
    assert evicted is not None and (evicted["status"], evicted["reason"]) == ("True", "Preempted")
    assert preempted["message"].startswith("Preempted to accommodate a workload (UID: ")
    assert "due to reclamation within the cohort; preemptor path: /research/team-b-cq; preemptee path: " \
           "/research/team-a-cq" in preempted["message"]
    assert cond(victim, "QuotaReserved")["status"] == "False"
    assert cond(victim, "Requeued")["reason"] == "Preempted"
    assert "admission" not in victim["status"]
    stopped = wait_for("victim's template restored", lambda: (j := job(env, ns_a, "a-borrow"))
                       and not j["spec"]["template"]["spec"].get("nodeSelector") and j)
    assert stopped["spec"]["suspend"] is True
    # The Job is started (unsuspended, flavor's node labels injected) after its Workload is admitted, in a write
    # of its own: wait for it rather than read once.
    started = wait_for("b-reclaims started on the flavor's nodes", lambda: (j := job(env, ns_b, "b-reclaims"))
                       and not j["spec"]["suspend"] and j["spec"]["template"]["spec"].get("nodeSelector") and j)
    assert started["spec"]["template"]["spec"]["nodeSelector"] == {"pool": "research"}
    assert admitted(env, ns_a, "a-own")
