"""Simulation scenarios (shared/interfaces.md §4): YAML text → a validated `Scenario`, or a `ScenarioError`.

Queue definitions under ``objects`` go through the same decoder as `gitopsq check` (gitopsq.api.codec), so an
invalid object gets the same finding, pointing at its line in the scenario file. Extensions of the format,
all optional and backwards compatible:

- ``settings.admissionChecks: {<check>: {state: Ready|Retry|Rejected, after: <seconds>}}`` — how every
  admission check answers, ``after`` seconds from quota reservation; by default a check is Ready at once.
- ``workloads[].admissionChecks`` — the same, for one workload (overrides the settings). A ``Retry`` answer
  applies to the first reservation only; later reservations see the check Ready after the same delay.
- ``workloads[].podSets[]`` accepts ``nodeSelector`` and ``tolerations`` next to ``requests``, or a full
  ``template`` (a pod template, read like a Job's).
- ``expect.finished`` and ``expect.quotaReserved`` next to ``admitted``, ``pending`` and ``preempted``.
- ``objects`` may hold Budgets (``gitopsq.dev/v1alpha1``, docs/budgets.md): each stands for the ClusterQueue and
  LocalQueues it compiles into, exactly as ``gitopsq render`` prints them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml

from gitopsq.admission.topology import BATCHED, FEATURE_GATES, REQUEUE_MODES, STRATEGIES, Settings
from gitopsq.api import findings
from gitopsq.api import model as m
from gitopsq.api.codec import decode
from gitopsq.api.findings import Finding
from gitopsq.api.frozenmap import FrozenMap
from gitopsq.api.reader import FieldPath, LineOf, Reader
from gitopsq.api.shared_fields import decode_tolerations
from gitopsq.api.workload_codec import decode_pod_template
from gitopsq.errors import Location, ScenarioError
from gitopsq.manifests.budget_compile import compile_budget
from gitopsq.manifests.budgets import is_budget, parse_budget
from gitopsq.manifests.check_report import LoadedObject
from gitopsq.manifests.object_rules import validate_object

CHECK_STATES = ("Ready", "Retry", "Rejected")
EXPECT_KINDS = ("admitted", "quotaReserved", "pending", "preempted", "finished")


@dataclass(frozen=True, slots=True)
class CheckPlan:
    state: str
    after: float = 0.0


@dataclass(frozen=True, slots=True)
class InitialAdmission:
    cluster_queue: str
    flavors: Mapping[str, Mapping[str, str]]
    at: float


@dataclass(frozen=True, slots=True)
class TraceWorkload:
    name: str
    namespace: str
    queue: str
    priority: int | None
    priority_class: str | None
    submit_at: float
    runtime: float | None
    pod_sets: tuple[m.PodSet, ...]
    admitted: InitialAdmission | None = None
    checks: Mapping[str, CheckPlan] = field(default_factory=dict)
    line: int | None = None

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True, slots=True)
class Expectation:
    kind: str  # admitted | quotaReserved | pending | preempted | finished
    workload: str
    fields: Mapping[str, Any]
    line: int | None


@dataclass(frozen=True, slots=True)
class Scenario:
    name: str
    file: str
    settings: Settings
    objects: tuple[m.QueueObject, ...]
    workloads: tuple[TraceWorkload, ...]
    horizon: float | None = None
    expectations: tuple[Expectation, ...] = ()
    check_defaults: Mapping[str, CheckPlan] = field(default_factory=dict)
    description: str = ""


def load_yaml(text: str, file: str) -> tuple[Any, dict[FieldPath, int]]:
    """Parse one YAML document; also return the 1-based line of every field path."""
    try:
        loader = yaml.SafeLoader(text)
        try:
            node = loader.get_single_node()
            data = loader.construct_document(node) if node is not None else None
        finally:
            loader.dispose()
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        line = mark.line + 1 if mark is not None else None
        raise ScenarioError(f"not valid YAML: {getattr(err, 'problem', None) or err}",
                            location=Location(file, line)) from err
    lines: dict[FieldPath, int] = {}

    def walk(n: yaml.Node, path: FieldPath) -> None:
        lines[path] = n.start_mark.line + 1
        if isinstance(n, yaml.MappingNode):
            for k, v in n.value:
                walk(v, (*path, str(k.value)))
                lines[(*path, str(k.value))] = k.start_mark.line + 1
        elif isinstance(n, yaml.SequenceNode):
            for i, v in enumerate(n.value):
                walk(v, (*path, i))

    if node is not None:
        walk(node, ())
    return data, lines


class _Parser:
    def __init__(self, text: str, file: str) -> None:
        self.file = file
        self.data, self.lines = load_yaml(text, file)
        self.findings: list[Finding] = []

    def line(self, path: FieldPath) -> int | None:
        while path and path not in self.lines:
            path = path[:-1]
        return self.lines.get(path)

    def _lines_under(self, base: FieldPath) -> LineOf:
        return lambda p: self.line((*base, *p))

    def reader(self, base: FieldPath, obj: str) -> Reader:
        return Reader(file=self.file, doc_line=self.line(base), obj=obj,
                      line_of=lambda p: self.line((*base, *p)))

    def parse(self) -> Scenario:
        r = self.reader((), "scenario")
        top = r.mapping(self.data, (), allowed=("name", "description", "settings", "objects", "workloads",
                                                "horizon", "expect"))
        settings, defaults = self._settings(top.get("settings"))
        objects = self._objects(top.get("objects"))
        workloads = self._workloads(top.get("workloads"))
        horizon = self._number(r, top.get("horizon"), ("horizon",))
        expectations = self._expect(top.get("expect"))
        self._check_admitted(objects, workloads)
        self.findings.extend(r.findings)
        errors = sorted((f for f in self.findings if f.is_error), key=Finding.sort_key)
        if errors:
            raise ScenarioError("invalid scenario:\n  " + "\n  ".join(str(f) for f in errors),
                                location=errors[0].location)
        return Scenario(name=r.string(top.get("name"), ("name",)) or self.file, file=self.file, settings=settings,
                        objects=objects, workloads=workloads, horizon=horizon, expectations=expectations,
                        check_defaults=defaults, description=r.string(top.get("description"), ("description",)))

    def _check_admitted(self, objects: tuple[m.QueueObject, ...], workloads: tuple[TraceWorkload, ...]) -> None:
        """An initially admitted workload must name a ClusterQueue of the scenario and flavors it offers."""
        cqs = {o.meta.name: o for o in objects if isinstance(o, m.ClusterQueue)}
        for i, t in enumerate(workloads):
            if t.admitted is None:
                continue
            loc = Location(self.file, self.line(("workloads", i, "admitted")))
            cq = cqs.get(t.admitted.cluster_queue)
            if cq is None:
                self.findings.append(findings.error(
                    "unknown-reference", f"admitted.clusterQueue {t.admitted.cluster_queue!r} is not a ClusterQueue "
                    "of this scenario", location=loc, obj=f"workload {t.key}"))
                continue
            offered = set(cq.flavor_names())
            for ps, per_res in t.admitted.flavors.items():
                for res, flavor in per_res.items():
                    if flavor not in offered:
                        self.findings.append(findings.error(
                            "unknown-reference", f"admitted.flavors.{ps}.{res}: flavor {flavor!r} is not offered by "
                            f"ClusterQueue {cq.meta.name}", location=loc, obj=f"workload {t.key}"))

    @staticmethod
    def _number(r: Reader, raw: Any, path: FieldPath, *, default: float | None = None) -> float | None:
        if raw is None:
            return default
        if isinstance(raw, bool) or not isinstance(raw, int | float):
            r.error(path, "wrong-type", f"{path[-1]} must be a number of seconds")
            return default
        return float(raw)

    def _checks(self, r: Reader, raw: Any, path: FieldPath) -> dict[str, CheckPlan]:
        out = {}
        for name, plan in _free(r, raw, path).items():
            p = (*path, name)
            body = r.mapping(plan, p, allowed=("state", "after"))
            state = r.string(body.get("state"), (*p, "state"), default="Ready", choices=CHECK_STATES)
            out[str(name)] = CheckPlan(state, self._number(r, body.get("after"), (*p, "after"), default=0.0) or 0.0)
        return out

    def _settings(self, raw: Any) -> tuple[Settings, dict[str, CheckPlan]]:
        r = self.reader(("settings",), "settings")
        body = r.mapping(raw, (), allowed=("fairSharing", "admissionChecks", "inadmissibleRequeue", "featureGates"))
        fair = look_ahead = False
        strategies: tuple[str, ...] = STRATEGIES
        if body.get("fairSharing") is not None:
            fs = r.mapping(body["fairSharing"], ("fairSharing",),
                           allowed=("enable", "preemptionStrategies", "lookAhead"))
            fair = r.boolean(fs.get("enable"), ("fairSharing", "enable"), default=True)
            look_ahead = r.boolean(fs.get("lookAhead"), ("fairSharing", "lookAhead"), default=False)
            if fs.get("preemptionStrategies") is not None:
                strategies = r.string_list(fs["preemptionStrategies"], ("fairSharing", "preemptionStrategies"))
                for i, s in enumerate(strategies):
                    if s not in STRATEGIES:
                        r.error(("fairSharing", "preemptionStrategies", i), "invalid-value",
                                f"unknown preemption strategy {s!r} (use {' or '.join(STRATEGIES)})")
        requeue = r.string(body.get("inadmissibleRequeue"), ("inadmissibleRequeue",), default=BATCHED,
                           choices=REQUEUE_MODES)
        gates = r.mapping(body.get("featureGates") or {}, ("featureGates",), allowed=FEATURE_GATES)
        preserve = r.boolean(gates.get("FlavorFungibilityPreserveScanProgress"),
                             ("featureGates", "FlavorFungibilityPreserveScanProgress"), default=True)
        prioritize = r.boolean(gates.get("PrioritizePreemptorWorkloads"),
                               ("featureGates", "PrioritizePreemptorWorkloads"), default=False)
        defaults = self._checks(r, body.get("admissionChecks"), ("admissionChecks",))
        self.findings.extend(r.findings)
        return Settings(fair_sharing=fair, preemption_strategies=tuple(strategies), inadmissible_requeue=requeue,
                        fair_sharing_look_ahead=look_ahead, preserve_flavor_scan_progress=preserve,
                        prioritize_preemptors=prioritize), defaults

    def _objects(self, raw: Any) -> tuple[m.QueueObject, ...]:
        r = self.reader((), "scenario")
        out: list[m.QueueObject] = []
        for i, doc in enumerate(r.sequence(raw, ("objects",))):
            base: FieldPath = ("objects", i)
            if isinstance(doc, Mapping) and is_budget(doc):
                out.extend(self._budget(doc, base))
                continue
            decoded = decode(doc, file=self.file, line=self.line(base), line_of=self._lines_under(base))
            self.findings.extend(decoded.findings)
            if decoded.obj is not None and not isinstance(decoded.obj, m.Workload):
                out.append(decoded.obj)
                # The same per-object rules as `gitopsq check` (quota values, limits, group shapes, names …).
                lines = {p[2:]: n for p, n in self.lines.items() if p[:2] == base}
                entry = LoadedObject(obj=decoded.obj, path=self.file, line=self.line(base) or 1,
                                     api_version=decoded.api_version, lines=lines)
                self.findings.extend(validate_object(entry))
            elif isinstance(decoded.obj, m.Workload):
                self.findings.append(findings.error("wrong-kind", "Workloads belong under `workloads`",
                                                    location=Location(self.file, self.line(base))))
        self.findings.extend(r.findings)
        return tuple(out)

    def _budget(self, doc: Mapping[str, Any], base: FieldPath) -> list[m.QueueObject]:
        """A Budget (docs/budgets.md) stands for the ClusterQueue and LocalQueues it compiles into."""
        lines = {p[2:]: n for p, n in self.lines.items() if p[:2] == base}
        loaded, found = parse_budget(doc, path=self.file, line=self.line(base) or 1, lines=lines)
        self.findings.extend(found)
        if loaded is None:
            return []
        compiled = compile_budget(loaded)
        for entry in compiled:
            self.findings.extend(validate_object(entry))
        return [entry.obj for entry in compiled]

    def _pod_sets(self, r: Reader, raw: Any, path: FieldPath) -> tuple[m.PodSet, ...]:
        out = []
        items = r.sequence(raw, path)
        if not items:
            r.error(path, "missing-field", "a workload needs at least one pod set")
        for i, item in enumerate(items):
            p = (*path, i)
            body = r.mapping(item, p, allowed=("name", "count", "minCount", "requests", "nodeSelector",
                                               "tolerations", "template"))
            name = r.string(body.get("name"), (*p, "name"), default="main")
            count = r.integer(body.get("count"), (*p, "count"), default=1, minimum=0) or 0
            min_count = r.integer(body.get("minCount"), (*p, "minCount"), minimum=1)
            if body.get("template") is not None:
                out.append(decode_pod_template(r, body["template"], (*p, "template"), name=name, count=count,
                                               min_count=min_count))
                continue
            requests = {}
            for res, q in _free(r, body.get("requests"), (*p, "requests")).items():
                parsed = r.quantity(q, (*p, "requests", res))
                if parsed is not None:
                    requests[str(res)] = parsed
            out.append(m.PodSet(name=name, count=count, min_count=min_count, requests=FrozenMap(requests),
                                node_selector=r.string_map(body.get("nodeSelector"), (*p, "nodeSelector")),
                                tolerations=decode_tolerations(r, body.get("tolerations"), (*p, "tolerations"))))
        return tuple(out)

    def _workloads(self, raw: Any) -> tuple[TraceWorkload, ...]:
        r = self.reader((), "scenario")
        out = []
        seen: set[str] = set()
        for i, item in enumerate(r.sequence(raw, ("workloads",))):
            p: FieldPath = ("workloads", i)
            body = r.mapping(item, p, allowed=("name", "namespace", "queue", "priority", "priorityClass",
                                               "submitAt", "runtime", "podSets", "admitted", "admissionChecks"))
            name = r.string(body.get("name"), (*p, "name"), required=True)
            ns = r.string(body.get("namespace"), (*p, "namespace"), default="default")
            key = f"{ns}/{name}"
            if key in seen:
                r.error((*p, "name"), "duplicate", f"workload {key} is listed twice")
            seen.add(key)
            admitted = None
            if body.get("admitted") is not None:
                ap = (*p, "admitted")
                ab = r.mapping(body["admitted"], ap, allowed=("clusterQueue", "flavors", "at"))
                flavors = {str(ps): dict(r.string_map(v, (*ap, "flavors", ps)))
                           for ps, v in _free(r, ab.get("flavors"), (*ap, "flavors")).items()}
                admitted = InitialAdmission(r.string(ab.get("clusterQueue"), (*ap, "clusterQueue"), required=True),
                                            flavors, self._number(r, ab.get("at"), (*ap, "at"), default=0.0) or 0.0)
            out.append(TraceWorkload(
                name=name, namespace=ns, queue=r.string(body.get("queue"), (*p, "queue"), required=True),
                priority=r.integer(body.get("priority"), (*p, "priority")),
                priority_class=r.optional_string(body.get("priorityClass"), (*p, "priorityClass")),
                submit_at=self._number(r, body.get("submitAt"), (*p, "submitAt"), default=0.0) or 0.0,
                runtime=self._number(r, body.get("runtime"), (*p, "runtime")),
                pod_sets=self._pod_sets(r, body.get("podSets"), (*p, "podSets")), admitted=admitted,
                checks=self._checks(r, body.get("admissionChecks"), (*p, "admissionChecks")),
                line=self.line(p)))
        self.findings.extend(r.findings)
        return tuple(out)

    def _expect(self, raw: Any) -> tuple[Expectation, ...]:
        r = self.reader(("expect",), "expect")
        out = []
        for kind, entries in r.mapping(raw, (), allowed=EXPECT_KINDS).items():
            for key, fields in _free(r, entries, (kind,)).items():
                body = _free(r, fields, (kind, key)) if fields is not None else {}
                out.append(Expectation(kind, str(key), dict(body), self.line(("expect", kind, key))))
        self.findings.extend(r.findings)
        return tuple(out)


def _free(r: Reader, value: Any, path: FieldPath) -> Mapping[str, Any]:
    """A mapping whose keys are names chosen by the user (workloads, resources, checks)."""
    keys = [k for k in value if isinstance(k, str)] if isinstance(value, Mapping) else []
    return r.mapping(value, path, allowed=keys)


def parse_scenario(text: str, file: str) -> Scenario:
    """Parse and validate a scenario; raises `ScenarioError` listing every finding with its file:line."""
    return _Parser(text, file).parse()
