"""The oracle: upstream Kueue v0.19.2 (oraclekueue, minimalkueue's wiring) replaying a scenario on a real rig.

`KueueOracle.start()` brings up its own kube-apiserver + etcd (never the session rig that other tests share:
Kueue's CRDs replace gitopsq's there) and installs Kueue's CRDs from the Go module cache. `run(scenario)` then:

1. creates namespaces, PriorityClasses and queue objects; already-admitted workloads with their admission and
   reservation times; and the workloads submitted at the first instant;
2. starts oraclekueue, and opens its scheduler only when Kueue's ClusterQueue status shows every one of those
   workloads loaded (so the first cycle sees the whole initial state, as the simulator's first instant does);
3. plays the simulated clock as `gitopsq simulate` does — at each instant finishes workloads whose runtime
   elapsed, then submits the instant's workloads, then lets Kueue settle — and, as the job controller,
   completes every eviction at once by clearing the reservation (as Kueue's benchmark runner does);
4. prints the contract's JSON (`events`, `final`, `summary`), so it compares key for key with the simulator.

"Settled": no Workload changed for `quiet` seconds, no quota was released for `release_quiet` seconds (Kueue
requeues inadmissible workloads in 1 s batches after a release), and every pending workload carries a reason
Kueue keeps (`observe.settled_pending`; one Kueue never evaluated, behind a StrictFIFO head, after
`untried_quiet`), or `transient_quiet` seconds passed without change. Scenarios with ClusterQueues below a
Cohort object also wait for Kueue's requeue after those queues' status updates (`cq_batch_quiet`,
`cohort_requeue_quiet`: the Cohort reconciler asks for the tree's requeue batch on each).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

from differential import kueue_objects as ko
from differential.replay import OracleError, ScenarioRun, Timing

REPO = Path(__file__).resolve().parents[2]


class KueueOracle:
    def __init__(self, rig: Any, kueue: Any, workdir: Path, timing: Timing) -> None:
        from kubernetes import client

        from gitopsq.cluster.kube import load_api_client

        self.rig, self.kueue, self.workdir, self.timing = rig, kueue, workdir, timing
        self.api = load_api_client(str(rig.kubeconfig))
        self.custom = client.CustomObjectsApi(self.api)
        self.core = client.CoreV1Api(self.api)
        self.scheduling = client.SchedulingV1Api(self.api)
        self.runs = 0

    @classmethod
    def start(cls, workdir: Path, timing: Timing | None = None) -> KueueOracle:
        """A fresh rig with Kueue's CRDs, and the Kueue binaries built (or taken from the cache)."""
        import sys

        for sub in ("hack/envtest", "hack/kueue"):
            if str(REPO / sub) not in sys.path:
                sys.path.insert(0, str(REPO / sub))
        import kueuebuild
        from envtestrig import Rig, prepare

        kueue = kueuebuild.prepare(log=True, names=("oraclekueue",))
        binaries = prepare(log=True)
        workdir.mkdir(parents=True, exist_ok=True)
        rig = Rig.start(binaries, workdir / "rig")
        crds = sorted(str(p) for p in kueue.crd_dir.glob("*.yaml"))
        env = {**os.environ, "KUBECONFIG": str(rig.kubeconfig)}
        files = [arg for c in crds for arg in ("-f", c)]
        for argv in (["apply", "--server-side", *files],
                     ["wait", "--for=condition=Established", "--timeout=60s", "crd", "--all"]):
            done = subprocess.run([str(binaries.kubectl), *argv], env=env, capture_output=True, text=True,
                                  check=False)
            if done.returncode != 0:
                rig.stop()
                raise OracleError(f"kubectl {argv[0]} of Kueue's CRDs failed: {done.stderr.strip()[-800:]}")
        return cls(rig, kueue, workdir, timing or Timing())

    def close(self) -> None:
        self.api.close()
        self.rig.stop()

    # -- one scenario ---------------------------------------------------------------------------------------

    def run(self, scenario: dict[str, Any]) -> dict[str, Any]:
        """Replay ``scenario`` on Kueue and return the contract's JSON object (events, final, summary)."""
        plan = ko.plan(scenario)
        self.runs += 1
        try:
            return ScenarioRun(self, plan, scenario).play()
        finally:
            self._clean(plan)

    def _clean(self, plan: ko.Plan) -> None:
        """Leave the rig empty of Kueue objects (finalizers stripped: Kueue is stopped by now)."""
        for kind in ("Workload", *reversed(ko.QUEUE_KINDS)):
            plural = ko.PLURALS[kind]
            listed = self.custom.list_cluster_custom_object(ko.GROUP, ko.VERSION, plural)
            for item in listed["items"]:
                meta = item["metadata"]
                args = (ko.GROUP, ko.VERSION, meta["namespace"], plural, meta["name"]) if kind in ko.NAMESPACED \
                    else (ko.GROUP, ko.VERSION, plural, meta["name"])
                if meta.get("finalizers"):
                    patch = {"metadata": {"finalizers": None}}
                    if kind in ko.NAMESPACED:
                        self.custom.patch_namespaced_custom_object(*args, patch)
                    else:
                        self.custom.patch_cluster_custom_object(*args, patch)
                if kind in ko.NAMESPACED:
                    self.custom.delete_namespaced_custom_object(*args)
                else:
                    self.custom.delete_cluster_custom_object(*args)
        for pc in plan.priority_classes:
            self.scheduling.delete_priority_class(pc["metadata"]["name"])
