"""The no-cluster tour behind `gitopsq demo` (shell: files, Git, the audit writer; docs/demo.md).

Steps, each reported as a `Step` (ok or failed — never faked):

1. **repository**: copy ``repo-template/`` into ``<dir>/queues`` and commit it on ``main`` (pygit2);
2. **sync**: open it through `gitopsq.source` as the controller would, and resolve ``main``;
3. **check**: validate the revision with the same pipeline as `gitopsq check` (`gitopsq.manifests.check_revision`);
4. **simulate**: replay the template's ``traces/sample.yaml`` on the admission engine, with the queue objects
   and the ``admission`` settings of the synced revision (the trace's own ``objects`` are ignored, so the demo
   shows the repository's truth);
5. **audit**: record the sync and every admission, preemption, eviction and completion on the audit branch
   gitopsq.yaml names (default ``gitopsq/audit``) through `AuditTrail`, at the simulated times (t=0 is the commit
   time);
6. **report**: write ``report.txt`` (timeline and per-ClusterQueue table), ``result.json`` (the ``simulate
   --output json`` object) and ``usage.html`` / ``usage.svg``;
7. **fleet** (when the template holds ``fleet/``, the two-cluster layout of docs/fleet.md: a kustomize base and
   an overlay per cluster): commit it as its own repository, propose more GPUs for ml-research on prod-us by
   editing that overlay's patch on a branch, and plan that pull request cluster by cluster (``fleet-plan.txt``):
   prod-us changes, prod-eu is left alone, and each changed field names the patch line that set it. Without a
   kustomize to build the overlays (docs/kustomize.md) the step is skipped, saying so.
"""

from __future__ import annotations

import dataclasses
import re
import shutil
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pygit2

from gitopsq import logs
from gitopsq.admission.topology import STRATEGIES, Settings
from gitopsq.audit import AuditTrail, TrailSettings, records
from gitopsq.audit.git_approvals import commit_info
from gitopsq.errors import GitopsqError, UsageError
from gitopsq.kustomize.runner import find_command
from gitopsq.manifests.config import CONFIG_PATH, parse_config
from gitopsq.simulate import chart
from gitopsq.simulate.chart import nominal_quotas
from gitopsq.simulate.replay import simulate
from gitopsq.simulate.result import to_json
from gitopsq.simulate.scenario import parse_scenario
from gitopsq.simulate.text_report import render_text
from gitopsq.source import open_source
from gitopsq.validation import validate_revision

_log = logs.get("demo")

TRACE_PATH = "traces/sample.yaml"
REPO_DIR = "queues"
FLEET_DIR = "fleet"  # the template's two-cluster layout (docs/fleet.md), a repository of its own
FLEET_CHANGE = ("overlays/prod-us/teams/ml-research/gpu-budget.yaml", "nvidia.com/gpu: 8,", "nvidia.com/gpu: 16,")
DEMO_AUTHOR = ("gitopsq demo", "demo@gitopsq.invalid")
# The first commit is the platform team's: in the template's gitopsq.yaml Alice is a platform maintainer, so the
# built-in policies (platform-only-global, team-owns-path) accept the repository's first revision.
PLATFORM_ADMIN = ("Alice Admin", "alice@example.com")
OK, FAILED, SKIPPED = "ok", "failed", "skipped"


@dataclass(frozen=True, slots=True)
class Step:
    name: str
    status: str  # ok | failed | skipped (cannot run here, and says why)
    detail: str


@dataclass
class DemoOutcome:
    """Where everything is and what each step did."""

    directory: Path
    repository: Path
    revision: str = ""
    steps: list[Step] = field(default_factory=list)
    result: Any = None  # gitopsq.simulate.result.Result once the simulation ran
    scenario: Any = None  # the replayed gitopsq.simulate.scenario.Scenario (with the repository's objects)
    report: Path | None = None
    result_json: Path | None = None
    charts: tuple[Path, ...] = ()
    audit_branch: str | None = None
    audit_records: int = 0
    fleet: Any = None  # the fleet's pull-request plan (gitopsq.plan.fleet_plan.FleetPlan), when the template has one
    fleet_plan: Path | None = None

    @property
    def ok(self) -> bool:
        return all(s.status != FAILED for s in self.steps)

    def add(self, name: str, status: str, detail: str) -> None:
        self.steps.append(Step(name, status, detail))
        _log.debug("demo_step", step=name, status=status, detail=detail)


def find_template(explicit: Path | None = None) -> Path:
    """The template to copy: ``explicit``, else the copy the package carries (``gitopsq/data/repo-template``;
    ``repo-template/`` at the project's root is a link to it)."""
    candidate = explicit if explicit is not None else Path(__file__).resolve().parent / "data" / "repo-template"
    if (candidate / "gitopsq.yaml").is_file():
        return candidate
    hint = "" if explicit is not None else " (this installation of gitopsq lacks its data files: reinstall it)"
    raise UsageError(f"no repository template found (looked for gitopsq.yaml in {candidate}){hint}; "
                     "pass --template DIR")


def prepare_directory(directory: Path) -> Path:
    """Create ``directory`` (it may exist only if empty) and return it resolved."""
    directory = directory.expanduser().resolve()
    if directory.exists() and (not directory.is_dir() or any(directory.iterdir())):
        raise UsageError(f"{directory} is not an empty directory; pick a new --dir")
    directory.mkdir(parents=True, exist_ok=True)
    return directory


def make_repository(template: Path, target: Path, when: datetime, who: tuple[str, str] = PLATFORM_ADMIN,
                    committer: tuple[str, str] | None = None) -> str:
    """Copy ``template`` to ``target`` as a fresh Git repository with one commit on ``main``, authored by ``who``
    (and committed by ``committer``, default ``who``); its id."""
    def ignore(directory: str, names: list[str]) -> set[str]:
        top = Path(directory) == template  # the fleet layout is a repository of its own (step 7)
        return {n for n in names if n in (".git", "__pycache__") or (top and n == FLEET_DIR)}

    shutil.copytree(template, target, ignore=ignore)
    repo = pygit2.init_repository(str(target), bare=False, initial_head="main")
    repo.index.add_all()
    repo.index.write()
    tree = repo.index.write_tree()
    author = pygit2.Signature(*who, int(when.timestamp()), 0)
    by = pygit2.Signature(*committer, int(when.timestamp()), 0) if committer is not None else author
    commit = repo.create_commit("refs/heads/main", author, by,
                                "Queue definitions from the gitopsq repository template\n", tree, [])
    return str(commit)


def _commit_change(target: Path, branch: str, change: tuple[str, str, str], who: tuple[str, str],
                   when: datetime) -> None:
    """Commit ``change`` (path, old text, new text) on a new ``branch`` off main, leaving main checked out."""
    repo = pygit2.Repository(str(target))
    path, old, new = change
    main = repo.branches["main"].peel(pygit2.Commit)
    text = (target / path).read_text(encoding="utf-8")
    blob = repo.create_blob(text.replace(old, new).encode())
    index = pygit2.Index()
    index.read_tree(main.tree)
    index.add(pygit2.IndexEntry(path, blob, pygit2.enums.FileMode.BLOB))
    signature = pygit2.Signature(*who, int(when.timestamp()) + 60, 0)
    repo.create_commit(f"refs/heads/{branch}", signature, signature, f"{branch}: {path}\n",
                       index.write_tree(repo), [main.id])


# --- sync and check: the same source and pipeline as the controller and `gitopsq check` ------------------------

def _sync_and_check(outcome: DemoOutcome) -> tuple[Any, Any] | None:
    """The source and the check report of ``main``, or None after recording the failed step."""
    try:
        source = open_source(str(outcome.repository))
        outcome.revision = source.resolve("main")
    except GitopsqError as err:
        outcome.add("sync", FAILED, str(err))
        return None
    outcome.add("sync", OK, f"read {source.display} at main = {outcome.revision[:12]} through gitopsq.source")
    report = validate_revision(source, outcome.revision).report
    if report.errors:
        first = report.errors[0]
        outcome.add("check", FAILED, f"{len(report.errors)} error(s); first: {first}")
        return None
    warned = f", {len(report.warnings)} warning(s)" if report.warnings else ""
    outcome.add("check", OK, f"{len(report.files)} files, {len(report.entries)} objects valid{warned} "
                             "(the `gitopsq check` pipeline: schema, references, CEL policies)")
    return source, report


# --- simulate, audit, report -------------------------------------------------------------------------------------

def _settings(config: Any, fallback: Any) -> Any:
    """The repository's ``admission`` block as simulation settings, when gitopsq.yaml declares one."""
    admission = getattr(config, "admission", None)
    if admission is None or not admission.declared:
        return fallback
    return Settings(fair_sharing=admission.fair_sharing,
                    preemption_strategies=tuple(admission.preemption_strategies) or STRATEGIES,
                    fair_sharing_look_ahead=admission.fair_sharing_look_ahead,
                    inadmissible_requeue=admission.inadmissible_requeue)


def _simulate(outcome: DemoOutcome, source: Any, report: Any) -> Any:
    text = source.read_file(outcome.revision, TRACE_PATH)
    if text is None:
        outcome.add("simulate", FAILED, f"{TRACE_PATH} is missing from the repository")
        return None
    try:
        scenario = parse_scenario(text.decode("utf-8"), f"{outcome.repository.name}/{TRACE_PATH}")
    except GitopsqError as err:
        outcome.add("simulate", FAILED, str(err))
        return None
    scenario = dataclasses.replace(scenario, objects=tuple(report.objects),
                                   settings=_settings(report.config, scenario.settings))
    result = simulate(scenario)
    outcome.result, outcome.scenario = result, scenario
    outcome.add("simulate", OK, f"{len(scenario.workloads)} workloads replayed until t={result.end:g}s: "
                                f"{result.count('Admitted')} admitted, {result.count('Preempted')} preempted, "
                                f"{result.count('Finished')} finished")
    return result


def _usage_at(result: Any, time: float) -> dict[str, Any]:
    """Per-ClusterQueue usage once instant ``time`` settled (the last timeline entry at or before it)."""
    usage: dict[str, Any] = {}
    for at, snapshot in result.timeline:
        if at > time:
            break
        usage = snapshot
    return usage


def audit_records(result: Any, *, repository: str, revision: str, start: datetime, scenario: Any = None,
                  nominal: Mapping[str, Mapping[tuple[str, str], int]] | None = None, commit: Any = None) -> list[Any]:
    """The audit records of a demo run: the sync, then one record per admission, preemption, eviction, finish.

    With the ``scenario`` and the ``nominal`` quotas, records also carry what auditors' evidence reads: the
    LocalQueue and priority, the milestones (created, quotaReserved, admitted) and, for an admission, whether
    the ClusterQueue stayed within its nominal quota. ``commit`` (an audit ``CommitInfo``) says who wrote the
    synced revision, as the controller's sync records do.
    """
    out = [records.sync_attempt(time=start, source_url=repository, revision=revision, previous_revision=None,
                                result="applied", actor="gitopsq demo", commit=commit,
                                message="demo: template synced and checked; sample trace replayed")]

    def at(seconds: float) -> datetime:
        return start + timedelta(seconds=seconds)

    traces = {t.key: t for t in (scenario.workloads if scenario is not None else ())}
    classes = {o.meta.name: o.value for o in (scenario.objects if scenario is not None else ())
               if getattr(o, "KIND", "") == "WorkloadPriorityClass"}
    kinds = {"Admitted": "admitted", "Preempted": "preempted", "Evicted": "evicted", "Finished": "finished"}
    reserved: dict[str, float] = {}
    for event in result.events:
        if event.type == "QuotaReserved":
            reserved[event.workload] = event.time
        transition = kinds.get(event.type)
        if transition is None:
            continue
        namespace, _, name = event.workload.partition("/")
        trace = traces.get(event.workload)
        times = {transition: at(event.time)}
        within = None
        if trace is not None:
            times["created"] = at(trace.submit_at)
        if transition == "admitted":
            times["quotaReserved"] = at(reserved.get(event.workload, event.time))
            if nominal is not None and event.cluster_queue in nominal:
                quota = nominal[event.cluster_queue]
                used = _usage_at(result, event.time).get(event.cluster_queue, {})
                within = all(v <= quota.get(fr, 0) for fr, v in used.items())
        preemptor = re.search(r"UID: ([^/,]+)/([^,]+),", event.message) if transition == "preempted" else None
        out.append(records.admission(
            transition, time=at(event.time), workload=records.WorkloadRef(namespace, name),
            cluster_queue=event.cluster_queue, flavors={ps: dict(res) for ps, res in event.flavors},
            reason=event.reason, message=event.message, times=times, within_nominal_quota=within,
            preempted_by=records.WorkloadRef(*preemptor.groups()) if preemptor else None,
            local_queue=trace.queue if trace else None,
            priority=(trace.priority if trace.priority is not None else classes.get(trace.priority_class or ""))
            if trace else None))
    return out


def _commit_record(outcome: DemoOutcome) -> Any:
    """The synced commit as the audit trail records it (author, committer, signature state), or None."""
    try:
        return commit_info(open_source(str(outcome.repository)).commit_info(outcome.revision))
    except GitopsqError:
        return None


def _audit(outcome: DemoOutcome, start: datetime, config: Any) -> None:
    recs = audit_records(outcome.result, repository=str(outcome.repository), revision=outcome.revision,
                         start=start, scenario=outcome.scenario, nominal=nominal_quotas(outcome.scenario.objects),
                         commit=_commit_record(outcome))
    branch = getattr(getattr(config, "audit", None), "branch", "") or TrailSettings().branch
    settings = TrailSettings(branch=branch, batch_seconds=0.1, identity=DEMO_AUTHOR)
    try:
        trail = AuditTrail.open(str(outcome.repository), outcome.directory / "audit-wal", settings=settings,
                                clock=lambda: start)
        try:
            for rec in recs:
                trail.submit(rec)
            pushed = trail.flush(timeout=60.0)
        finally:
            trail.close()
    except GitopsqError as err:
        outcome.add("audit", FAILED, str(err))
        return
    if not pushed:
        outcome.add("audit", FAILED, "the audit records did not reach the audit branch within 60 s")
        return
    outcome.audit_branch, outcome.audit_records = settings.branch, len(recs)
    outcome.add("audit", OK, f"{len(recs)} records committed to branch {settings.branch}")


def _report(outcome: DemoOutcome, objects: list[Any]) -> None:
    outcome.report = outcome.directory / "report.txt"
    outcome.report.write_text(render_text(outcome.result) + "\n", encoding="utf-8")
    outcome.result_json = outcome.directory / "result.json"
    outcome.result_json.write_text(to_json(outcome.result) + "\n", encoding="utf-8")
    nominal = chart.nominal_quotas(objects)
    paths = []
    for suffix in (".html", ".svg"):
        path = outcome.directory / f"usage{suffix}"
        path.write_text(chart.render_chart(outcome.result, suffix, nominal), encoding="utf-8")
        paths.append(path)
    outcome.charts = tuple(paths)
    written = [outcome.report.name, outcome.result_json.name, *(p.name for p in paths)]
    outcome.add("report", OK, f"wrote {', '.join(written)}")


def write_chart(result: Any, path: Path, objects: list[Any] | None = None) -> Path:
    """Write the usage chart of ``result`` to ``path`` (.svg or .html); UsageError for another suffix."""
    try:
        text = chart.render_chart(result, path.suffix, chart.nominal_quotas(objects or []))
    except ValueError as err:
        raise UsageError(f"{path}: {err}") from err
    path.write_text(text, encoding="utf-8")
    return path


def run_demo(directory: Path, template: Path | None = None, *, now: datetime | None = None) -> DemoOutcome:
    """Run every step in ``directory`` (new or empty); a failed step stops the ones that need it."""
    directory = prepare_directory(directory)
    template = find_template(template)
    start = (now or datetime.now(UTC)).replace(microsecond=0)
    outcome = DemoOutcome(directory=directory, repository=directory / REPO_DIR)
    commit = make_repository(template, outcome.repository, start)
    outcome.add("repository", OK, f"{outcome.repository} from {template}, commit {commit[:12]} on main")
    synced = _sync_and_check(outcome)
    if synced is None:
        return outcome
    source, report = synced
    if _simulate(outcome, source, report) is None:
        return outcome
    _audit(outcome, start, report.config)
    _report(outcome, list(report.objects))
    fleet = template / FLEET_DIR
    if (fleet / "gitopsq.yaml").is_file():
        if not _can_build(fleet):
            outcome.add("fleet", SKIPPED, "skipped: the fleet layout's overlays are built by kustomize "
                        "(docs/kustomize.md) and none was found; run scripts/kustomize-prepare (needs Go) or put "
                        "kustomize on PATH, then run the demo again")
        else:
            _fleet(outcome, fleet, start)
    return outcome


def _can_build(template: Path) -> bool:
    """False when the template holds a kustomization and no kustomize can run here (docs/kustomize.md)."""
    command = find_command()
    return (command is not None and shutil.which(command[0]) is not None) or not any(
        p.name in ("kustomization.yaml", "kustomization.yml", "Kustomization") for p in template.rglob("*"))


def _fleet(outcome: DemoOutcome, template: Path, start: datetime) -> None:
    """Step 7: the two-cluster layout as its own repository, and a pull request's plan cluster by cluster."""
    # Imported on use: only a template with a fleet layout needs the plan stack.
    from gitopsq.plan.fleet_plan import ClusterPlan, FleetPlan
    from gitopsq.plan.pr_plan import build_plan
    from gitopsq.plan.render_fleet import fleet_text

    target = outcome.directory / FLEET_DIR
    base = make_repository(template, target, start)
    _commit_change(target, "more-gpus", FLEET_CHANGE, ("Carol Chen", "carol@example.com"), start)
    try:
        source = open_source(str(target))
        head = source.resolve("more-gpus")
        config = parse_config(source.read_file(head, CONFIG_PATH) or b"").config
        names = config.cluster_names() if config is not None else ()
        plans = []
        for name in names:
            checked = validate_revision(source, head, base=base, cluster=name)
            plans.append(ClusterPlan(name, build_plan(
                repository=source.display, base_ref="main", base_sha=base, base=checked.base_report,
                head_ref="more-gpus", head_sha=head, head=checked.report, touched_paths=checked.touched,
                history="ancestor", policies=checked.policies)))
    except GitopsqError as err:
        outcome.add("fleet", FAILED, str(err))
        return
    fleet = FleetPlan(tuple(plans))
    outcome.fleet, outcome.fleet_plan = fleet, outcome.directory / "fleet-plan.txt"
    outcome.fleet_plan.write_text(fleet_text(fleet), encoding="utf-8")
    changed = ", ".join(p.cluster for p in fleet.changed) or "none"
    verdict = "rejected" if fleet.rejected else "accepted"
    outcome.add("fleet", FAILED if fleet.rejected else OK,
                f"{len(names)} clusters, one repository of kustomize overlays; branch more-gpus edits "
                f"{FLEET_CHANGE[0]}: the plan changes {changed}, leaves {', '.join(fleet.unchanged) or 'none'} "
                f"alone, {verdict}")
