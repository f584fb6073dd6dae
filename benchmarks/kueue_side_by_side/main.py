"""Kueue's own scheduler benchmark against Kueue's controller and against gitopsq's admission loop.

Usage: benchmarks/kueue-side-by-side [--scale 1.0|0.2] [--config baseline|large-scale|all] [--rate 50|200]
                                     [--only kueue|gitopsq] [--keep DIR] [--stop-after SECONDS]

For each controller, back to back: a fresh test rig (kube-apiserver + etcd, tests/envtest_rig's implementation),
that controller's CRDs (Kueue's from its module, gitopsq's own), the controller with a client limited to ``--rate``
requests/s, burst twice that (50/100 is minimalkueue's wiring; other rates rebuild minimalkueue with those two
numbers changed, see kueuebuild.minimalkueue_at_rate), then Kueue's ``runner`` (test/performance/scheduler/runner,
v0.19.2) creating the generator config's objects against the same API server with the client envtest would give
it (1,000 requests/s, burst 2,000). gitopsq runs as it ships: ``gitopsq controller --admission-only`` with the
Helm chart's defaults (leader election on a Lease, metrics and health served, events on); both controllers'
metrics are scraped once a second. When the runner has written its summary the controller gets SIGINT; its wall
time, CPU and peak RSS come from wait4, the API server's CPU seconds from /proc/<pid>/stat between the
controller's start and the summary. The harness also watches every Workload to time its creation, admission and finish,
and prints each run's write floor (floor.py), each controller's figures as multiples of it, and the run's first
minutes as a timeline (timeline.py: when the quota, not the budget, held admissions back).
``--scale`` multiplies each workload set's count (0.2: 3,000 Workloads instead of 15,000).
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "hack" / "envtest"))
sys.path.insert(0, str(REPO / "hack" / "kueue"))
sys.path.insert(0, str(REPO / "benchmarks"))

import kueuebuild  # noqa: E402
from envtestrig import Rig, prepare  # noqa: E402

from kueue_side_by_side import probe, timeline  # noqa: E402
from kueue_side_by_side.floor import write_floor  # noqa: E402
from kueue_side_by_side.measure import (  # noqa: E402
    RunFigures,
    apiserver_requests,
    by_reason,
    cpu_seconds,
    read_runner_output,
    table,
)
from kueue_side_by_side.observe import MetricsScraper, WorkloadClock  # noqa: E402

RUNNER_QPS, RUNNER_BURST = 1000, 2000  # what envtest hands the runner when it starts minimalkueue itself


def scaled_config(config: str, scale: float, out: Path) -> tuple[Path, int]:
    """Kueue's generator config with every workload set's count multiplied by ``scale``; and the total."""
    source = kueuebuild.module_dir() / "test" / "performance" / "scheduler" / "configs" / config / "generator.yaml"
    doc = yaml.safe_load(source.read_text())
    total = 0
    for cohort in doc["cohorts"]:
        for qset in cohort["queuesSets"]:
            for wset in qset["workloadsSets"]:
                wset["count"] = max(1, round(wset["count"] * scale))
                total += cohort["count"] * qset["count"] * wset["count"] * len(wset["workloads"])
    path = out / f"generator-{config}-{scale:g}.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path, total


def install_kueue_crds(kubeconfig: Path, crd_dir: Path) -> None:
    kubectl = ["kubectl", "--kubeconfig", str(kubeconfig)]
    subprocess.run([*kubectl, "apply", "--server-side", "-f", str(crd_dir)], check=True, capture_output=True)
    subprocess.run([*kubectl, "wait", "--for=condition=Established", "crd", "--all", "--timeout=60s"],
                   check=True, capture_output=True)


def install_gitopsq_crds(kubeconfig: Path) -> None:
    from gitopsq.cluster.crds import install_crds
    from gitopsq.cluster.kube import load_api_client

    with load_api_client(str(kubeconfig)) as api:
        install_crds(api)


CONTROLLER_NAMESPACE = "gitopsq-system"  # the chart's release namespace: the Lease and the Events live there


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def controller_argv(name: str, kubeconfig: Path, minimalkueue: Path, *, rate: int, metrics_port: int,
                    work: Path) -> list[str]:
    """The command line of each side. gitopsq's is what the Helm chart runs with ``mode: admission`` and its
    default values (charts/gitopsq/templates/_container.tpl), with loopback ports and a kubeconfig instead of
    the in-cluster account; the Job webhook is served as the chart serves it, though the runner makes Workloads,
    not Jobs, so nothing calls it."""
    if name == "kueue":
        return [str(minimalkueue), "--kubeconfig", str(kubeconfig), f"--metricsPort={metrics_port}"]
    return [str(REPO / ".venv" / "bin" / "python"), "-m", "gitopsq", "controller", "--admission-only",
            f"--kubeconfig={kubeconfig}", f"--namespace={CONTROLLER_NAMESPACE}", "--integrations=batch/job",
            "--leader-elect", "--lease-name=gitopsq-controller", "--lease-duration=15s", "--renew-deadline=10s",
            "--retry-period=2s", f"--health-addr=127.0.0.1:{free_port()}",
            f"--metrics-addr=127.0.0.1:{metrics_port}", f"--webhook-addr=127.0.0.1:{free_port()}",
            f"--webhook-cert-dir={work / 'webhook-certs'}", "--log-format=json",
            f"--qps={rate}", f"--burst={2 * rate}"]


def create_namespace(kubeconfig: Path, name: str) -> None:
    subprocess.run(["kubectl", "--kubeconfig", str(kubeconfig), "create", "namespace", name], check=True,
                   capture_output=True)


def run_one(name: str, binaries: kueuebuild.KueueBinaries, minimalkueue: Path, generator: Path, *, rate: int,
            timeout_min: int, work: Path, crds: str = "own", stop_after: float | None = None) -> RunFigures:
    label = {"kueue": f"Kueue {binaries.version} (minimalkueue)",
             "gitopsq": "gitopsq controller --admission-only"}[name]
    figures = RunFigures(label)
    figures.rate = rate
    out = work / name
    out.mkdir(parents=True)
    rig = Rig.start(prepare(log=False), work / f"rig-{name}")
    try:
        if name == "kueue" or crds == "kueue":
            install_kueue_crds(rig.kubeconfig, binaries.crd_dir)
        else:
            install_gitopsq_crds(rig.kubeconfig)
        if name == "gitopsq":
            create_namespace(rig.kubeconfig, CONTROLLER_NAMESPACE)
        apiserver = rig.state.apiserver_pid
        api_before = cpu_seconds(apiserver)
        log = (out / f"{name}.log").open("wb")
        metrics_port = free_port()
        started, started_wall = time.monotonic(), time.time()
        clock = WorkloadClock(rig.kubeconfig, started, started_wall)
        clock.start()
        argv = controller_argv(name, rig.kubeconfig, minimalkueue, rate=rate, metrics_port=metrics_port, work=out)
        controller = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, cwd=REPO)
        scraper = MetricsScraper(f"http://127.0.0.1:{metrics_port}/metrics")
        scraper.start()
        runner_log = (out / "runner.log").open("wb")
        runner = subprocess.Popen(
            [str(binaries.runner), "--o", str(out), "--generatorConfig", str(generator),
             f"--qps={RUNNER_QPS}", f"--burst={RUNNER_BURST}", f"--timeout={timeout_min}m", "--zap-log-level=info"],
            stdout=runner_log, stderr=subprocess.STDOUT, env={**os.environ, "KUBECONFIG": str(rig.kubeconfig),
                 # test/util's init looks for the project's Makefile unless told where the project is
                 "PROJECT_DIR": str(kueuebuild.module_dir(binaries.version) / "Makefile")})
        summary = out / "summary.yaml"
        while not summary.exists() and runner.poll() is None and controller.poll() is None:
            if stop_after is not None and time.monotonic() - started >= stop_after:
                figures.stopped_after_s = stop_after
                runner.kill()  # its creations and finishes stop here; the figures cover the first stop_after s
                break
            time.sleep(0.2)
        figures.apiserver_cpu_s = cpu_seconds(apiserver) - api_before
        figures.runner_wall_s = time.monotonic() - started
        figures.scrapes = scraper.stop()
        if scraper.last:
            (out / "controller-metrics.txt").write_bytes(scraper.last)
            figures.by_reason = by_reason(scraper.last.decode("utf-8", errors="replace"))
        times = clock.stop()
        figures.times = times
        if times.created:
            figures.floor = write_floor(list(times.created.values()), rate, 2 * rate)
        figures.apiserver_requests = apiserver_metrics(rig.kubeconfig, out)
        if controller.poll() is None:
            controller.send_signal(signal.SIGINT)
        _, status, usage = os.wait4(controller.pid, 0)
        figures.wall_s = time.monotonic() - started
        controller.returncode = os.waitstatus_to_exitcode(status)
        figures.exit_code = controller.returncode
        figures.user_s, figures.sys_s = usage.ru_utime, usage.ru_stime
        figures.maxrss_mib = usage.ru_maxrss / 1024
        try:
            runner.wait(timeout=60)  # its cleanup of the generated objects
        except subprocess.TimeoutExpired:
            runner.kill()
            runner.wait()
        if summary.exists():
            time.sleep(0.5)  # the CSVs follow the summary
            read_runner_output(out, figures)
        elif figures.stopped_after_s is None:
            figures.note = f"runner ended without a summary (exit {runner.returncode}); see {out}/runner.log"
        if name == "gitopsq":
            figures.requests = gitopsq_requests(out / f"{name}.log")
    finally:
        rig.stop()
    return figures


def apiserver_metrics(kubeconfig: Path, out: Path) -> str:
    """The API server's request and watch-event counts so far (kept in ``out``), summarised."""
    answer = subprocess.run(["kubectl", "--kubeconfig", str(kubeconfig), "get", "--raw", "/metrics"],
                            capture_output=True, text=True, check=False, timeout=60)
    if answer.returncode != 0:
        return f"API server metrics not read: {answer.stderr.strip()[:200]}"
    (out / "apiserver-metrics.txt").write_text(answer.stdout)
    return apiserver_requests(answer.stdout)


def gitopsq_requests(log: Path) -> str:
    """The request counts the admission loop logs when it stops (the client's, over every leadership term), and
    how many terms the run had: a Lease renewal past its deadline on the saturated server ends one, and the next
    starts from a new LIST, so such a run is not comparable with one that kept the Lease."""
    import json

    lines = log.read_text(errors="replace").splitlines()
    terms = sum(1 for line in lines if '"runnables started"' in line)
    lost = f"; LEASE LOST {terms - 1} time(s): {terms} leadership terms" if terms > 1 else ""
    for line in reversed(lines):
        if "admission loop stopped" in line:
            record = json.loads(line)
            kinds = ", ".join(f"{k} {v}" for k, v in sorted(record.get("by_kind", {}).items()))
            return (f"{record['passes']} passes; requests: {kinds}; events sent {record.get('events_sent')}, "
                    f"dropped {record.get('events_dropped')}; {record['throttled_seconds']} s waiting for tokens"
                    + lost)
    return ""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--config", choices=["baseline", "large-scale", "all"], default="baseline",
                        help="all: baseline, then large-scale, one table each")
    parser.add_argument("--rate", type=int, default=50,
                        help="both controllers' client: requests/s (burst twice that); 50 is minimalkueue's")
    parser.add_argument("--only", choices=["kueue", "gitopsq"], action="append")
    parser.add_argument("--crds", choices=["own", "kueue"], default="own",
                        help="own: each controller on its own CRDs (what ships); kueue: both on Kueue's, to tell how "
                             "much of the API server's CPU is the schema (Kueue's Workload schema validates every "
                             "pod template, gitopsq's keeps templates free-form)")
    parser.add_argument("--keep", type=Path, help="keep the runners' output (summary, CSVs, logs) here")
    parser.add_argument("--stop-after", type=float, metavar="SECONDS",
                        help="end each run this long after the controller started, summary or not: the first "
                             "minutes (the creations and what the quota let through) without the rest")
    args = parser.parse_args(argv)
    binaries = kueuebuild.prepare()
    minimalkueue = kueuebuild.minimalkueue_at_rate(args.rate, 2 * args.rate)
    prepare(log=True)
    ok = True
    for config in ["baseline", "large-scale"] if args.config == "all" else [args.config]:
        ok = _compare(config, args, binaries, minimalkueue) and ok
    return 0 if ok else 1


def _compare(config: str, args: argparse.Namespace, binaries: kueuebuild.KueueBinaries, minimalkueue: Path) -> bool:
    """Both controllers on one generator config, back to back; prints the table; whether every run was clean."""
    timeout_min = {"baseline": 25, "large-scale": 60}[config]  # generous: a busy machine is slow
    with tempfile.TemporaryDirectory(prefix="gitopsq-kueue-sbs-") as tmp:
        work = args.keep or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        generator, total = scaled_config(config, args.scale, work)
        speed_before = probe.rate()
        runs = []
        for name in args.only or ["kueue", "gitopsq"]:
            sys.stderr.write(f"kueue-side-by-side: {name}: {total} workloads ({config}, scale {args.scale:g})\n")
            figures = run_one(name, binaries, minimalkueue, generator, rate=args.rate, timeout_min=timeout_min,
                              work=work / datetime.datetime.now().strftime("%H%M%S"), crds=args.crds,
                              stop_after=args.stop_after)
            sys.stderr.write(f"kueue-side-by-side: {name}: done in {figures.wall_s:.0f} s {figures.note}\n")
            # This run's column at once: a comparison stopped half way still leaves the figures of the first.
            sys.stderr.write(table([figures], sorted(figures.admission_ms)) + "\n")
            runs.append(figures)
    classes = sorted({c for r in runs for c in r.admission_ms}, key=["large", "medium", "small"].index
                     if all(c in ("large", "medium", "small") for r in runs for c in r.admission_ms) else str)
    speed = probe.describe(speed_before, probe.rate())
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    cpu = _cpu_model()
    print(f"Kueue scheduler benchmark, config {config}, scale {args.scale:g} ({total} workloads); "
          f"{now}; {os.cpu_count()} cores ({cpu}), {platform.system()} {platform.release()}; "
          f"controllers at {args.rate} requests/s, burst {2 * args.rate}; CRDs: "
          + ("each controller's own" if args.crds == "own" else "Kueue's, for both"))
    print(speed)
    print()
    print(table(runs, classes))
    for r in runs:
        if r.note or r.dropped_events:
            print(f"\n{r.controller}: {r.note} dropped workload events {r.dropped_events}")
        if r.times is not None and r.times.error:
            print(f"\n{r.controller}: the harness's Workload watch restarted {r.times.watch_restarts} times; "
                  f"last error: {r.times.error}")
        if r.stopped_after_s is not None:
            print(f"\n{r.controller}: stopped {r.stopped_after_s:g} s after the controller started (--stop-after): "
                  "no runner summary, the controller's and API server's figures cover that time")
        if r.times is not None:
            print(f"\n{r.controller}: Workloads created, holding quota and finished, by their own timestamps\n\n"
                  f"{timeline.describe(r.times.stamps)}")
        if r.requests:
            print(f"\n{r.controller}: {r.requests}")
        if r.apiserver_requests:
            print(f"\n{r.controller}: {r.apiserver_requests}")
    print(flush=True)
    return all(r.exit_code == 0 and not r.note for r in runs)


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


if __name__ == "__main__":
    raise SystemExit(main())
