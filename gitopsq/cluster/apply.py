"""The sync executor: reads live objects for a plan, then carries a `Plan` out, nothing more.

Objects of one kind rank are applied in parallel (``concurrency`` requests), ranks one after the other.
All writes are server-side apply (``PATCH`` with ``application/apply-patch+yaml``) under field manager
``gitopsq``; ``force`` is sent only where the plan says the object is ours. ``dry_run`` sends ``dryRun=All``
so the API server validates and defaults without persisting. Every request is retried with exponential
backoff while the API server is unavailable (429, 5xx, refused connection: e.g. a restart); an object the
server refuses (invalid, forbidden, a field-manager conflict) is recorded as failed and the others continue.
Prunes run only when every apply succeeded, so a half-applied revision never deletes anything. Making a revision
all or nothing (dry-run everything first, roll back a failed apply) is the sync's business: gitopsq.sync.whole.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from itertools import groupby
from typing import Final, TypeAlias, cast

import orjson
from kubernetes import client as k8s_client
from kubernetes.client.exceptions import ApiException

from gitopsq.api.model import ObjectKey
from gitopsq.api.raw_objects import JsonObject, JsonValue, children, meta, text
from gitopsq.cluster.kinds import kind_of
from gitopsq.cluster.kube import ClusterConflict, ClusterNotFound, ClusterUnavailable, api_errors
from gitopsq.errors import ClusterError
from gitopsq.reconcile.normalize import FIELD_MANAGER
from gitopsq.reconcile.ordering import apply_rank
from gitopsq.reconcile.pairing import ApplyAction, Plan, PruneAction

APPLY_CONTENT_TYPE: Final = "application/apply-patch+yaml"
NOT_LEADER: Final = "not written: this replica is no longer the leader"
# What a request sends: an object (or patch document), a JSON patch's list of operations, or nothing;
# every mapping will do (a TypedDict shape too): the client serialises it as it is.
RequestBody: TypeAlias = Mapping[str, object] | Sequence[Mapping[str, object]] | None


def collection_path(group: str, version: str, kind: str, namespace: str = "") -> str:
    """The REST path of a kind's collection (in ``namespace`` when namespaced and given)."""
    entry = kind_of(group, kind)
    if entry is None or not entry.synced:
        raise ClusterNotFound(f"gitopsq does not know the API resource of {group or 'core'}/{kind}")
    return entry.collection_path(namespace, version=version)


def object_path(key: ObjectKey, version: str) -> str:
    return f"{collection_path(key.group, version, key.kind, key.namespace)}/{key.name}"


@dataclass(frozen=True, slots=True)
class Backoff:
    """Exponential backoff for unavailable API servers: ``initial`` doubling to ``maximum``, for ``deadline``s."""

    initial: float = 0.2
    maximum: float = 5.0
    deadline: float = 90.0

    def delays(self) -> Iterable[float]:
        delay, spent = self.initial, 0.0
        while spent < self.deadline:
            yield delay
            spent += delay
            delay = min(delay * 2, self.maximum)


class KubeRest:
    """Raw JSON requests through the official ApiClient (its auth, TLS and pool), with retry on unavailability.

    Raw rather than the generated typed APIs because a sync moves thousands of objects: plain ``orjson.loads``
    dicts are several times cheaper than model objects.
    """

    def __init__(self, api_client: k8s_client.ApiClient, *, backoff: Backoff | None = None,
                 sleep: Callable[[float], None] = time.sleep, timeout: float = 30.0) -> None:
        self.api_client = api_client
        self.backoff = backoff or Backoff()
        self._sleep = sleep
        self._timeout = timeout
        self.retries = 0  # requests repeated because the server was unavailable (reported by syncs)
        self._lock = threading.Lock()

    def request(self, method: str, path: str, *, query: Sequence[tuple[str, str]] = (), body: RequestBody = None,
                content_type: str = "application/json", obj: str | None = None, retry: bool = True) -> JsonValue:
        """One request; the decoded JSON answer (None for an empty body): the caller names its shape (a `cast`
        to a raw_objects or api shape, or the `child`/`text` accessors). Raises the kube.py ClusterError
        subclasses."""
        delays = iter(self.backoff.delays()) if retry else iter(())
        while True:
            try:
                return self._once(method, path, query=query, body=body, content_type=content_type, obj=obj)
            except ClusterUnavailable as err:
                delay = next(delays, None)
                if delay is None:
                    raise
                with self._lock:
                    self.retries += 1
                self._sleep(max(delay, min(err.retry_after or 0.0, self.backoff.maximum)))

    def _once(self, method: str, path: str, *, query: Sequence[tuple[str, str]], body: RequestBody,
              content_type: str, obj: str | None) -> JsonValue:
        headers = {"Accept": "application/json", "Content-Type": content_type}
        with api_errors(obj=obj):
            request = self.api_client.param_serialize(method, path, query_params=list(query) or None,
                                                      header_params=headers, body=body,
                                                      auth_settings=["BearerToken"])
            response = self.api_client.call_api(*request, _request_timeout=self._timeout)
            response.read()  # type: ignore[no-untyped-call]
            if not 200 <= response.status <= 299:
                raise ApiException(http_resp=response)
            return cast(JsonValue, orjson.loads(response.data)) if response.data else None

    def list_all(self, path: str, *, page: int = 2000, selector: str | None = None) -> list[JsonObject]:
        """Every item of a collection (matching the label ``selector``), following ``continue`` tokens."""
        items: list[JsonObject] = []
        token = ""
        while True:
            # resourceVersion=0: served from the API server's watch cache, not etcd; a LIST may then be a moment
            # stale, which at worst re-applies an object that was already right (server-side apply is idempotent)
            query = [("limit", str(page)), ("resourceVersion", "0")] + ([("continue", token)] if token else []) + \
                ([("labelSelector", selector)] if selector else [])
            answer = self.request("GET", path, query=query)
            items.extend(children(answer, "items"))
            token = text(answer, "metadata", "continue")
            if not token:
                return items


def read_live(rest: KubeRest, keys: Iterable[tuple[ObjectKey, str]], *, selector: str | None = None,
              get_limit: int = 200) -> dict[ObjectKey, JsonObject | None]:
    """The live object for each (key, version), None when absent: LISTs per kind, not one GET per object.

    With ``selector`` (gitopsq's source label) a LIST returns only this source's objects, so the cost follows
    our object count, not the cluster's; keys it does not return (new objects, objects applied before the label
    existed, objects someone else created) are read by GET, or by an unfiltered LIST when more than
    ``get_limit`` are missing. A kind whose CRD is not installed reads as "nothing live".
    """
    wanted: dict[tuple[str, str, str], set[ObjectKey]] = {}
    for key, version in keys:
        wanted.setdefault((key.group, key.kind, version), set()).add(key)
    out: dict[ObjectKey, JsonObject | None] = {}
    for (group, kind, version), members in sorted(wanted.items()):
        path = collection_path(group, version, kind)
        found = _list_members(rest, path, group=group, version=version, kind=kind, members=members,
                              selector=selector)
        missing = members - set(found)
        if selector is not None and missing:
            if len(missing) <= get_limit:
                found.update(read_objects(rest, [(k, version) for k in sorted(missing)]))
            else:
                found.update(_list_members(rest, path, group=group, version=version, kind=kind, members=missing,
                                           selector=None))
        out.update(found)
        for key in members:
            out.setdefault(key, None)
    return out


def _list_members(rest: KubeRest, path: str, *, group: str, version: str, kind: str, members: set[ObjectKey],
                  selector: str | None) -> dict[ObjectKey, JsonObject | None]:
    try:
        items = rest.list_all(path, selector=selector)
    except ClusterNotFound:
        items = []
    found: dict[ObjectKey, JsonObject | None] = {}
    for item in items:
        about = meta(item)
        key = ObjectKey(group=group, kind=kind, namespace=about.get("namespace") or "", name=about.get("name", ""))
        if key in members:
            item.setdefault("apiVersion", f"{group}/{version}" if group else version)
            item.setdefault("kind", kind)
            found[key] = item
    return found


def read_objects(rest: KubeRest, keys: Iterable[tuple[ObjectKey, str]]) -> dict[ObjectKey, JsonObject | None]:
    """The live object for each (key, version) by one GET each: cheaper than LISTs for a handful of keys."""
    out: dict[ObjectKey, JsonObject | None] = {}
    for key, version in keys:
        try:
            obj = cast(JsonObject, rest.request("GET", object_path(key, version), obj=str(key)))
            obj.setdefault("apiVersion", f"{key.group}/{version}" if key.group else version)
            obj.setdefault("kind", key.kind)
            out[key] = obj
        except ClusterNotFound:
            out[key] = None
    return out


@dataclass(frozen=True, slots=True)
class Failure:
    """One object the executor could not apply or prune, and why (``conflict``: another field manager)."""

    key: ObjectKey
    operation: str  # apply | prune
    reason: str
    conflict: bool = False

    def to_json(self) -> dict[str, JsonValue]:
        return {"object": str(self.key), "operation": self.operation, "reason": self.reason,
                "conflict": self.conflict}


@dataclass(frozen=True, slots=True)
class Execution:
    """What executing a plan did. Never a success unless every apply and prune went through."""

    dry_run: bool
    applied: tuple[ObjectKey, ...] = ()
    pruned: tuple[ObjectKey, ...] = ()
    failed: tuple[Failure, ...] = ()
    not_attempted: tuple[ObjectKey, ...] = ()  # prunes held back because an apply failed
    unverified: tuple[ObjectKey, ...] = ()  # dry run: the namespace is created by the same plan, so unchecked
    retries: int = 0
    live_after: Mapping[ObjectKey, JsonObject] = field(default_factory=dict, compare=False)

    @property
    def ok(self) -> bool:
        return not self.failed and not self.not_attempted


class Executor:
    """Carries out a Plan with server-side apply; stateless apart from its REST client."""

    def __init__(self, rest: KubeRest, *, field_manager: str = FIELD_MANAGER, concurrency: int = 8,
                 may_write: Callable[[], bool] | None = None) -> None:
        self.rest = rest
        self.field_manager = field_manager
        self.concurrency = concurrency
        # checked before every write: a replica that lost its Lease mid-sync stops writing at once
        self.may_write = may_write or (lambda: True)

    def execute(self, plan: Plan, *, dry_run: bool = False,
                advance: Callable[[int], None] | None = None) -> Execution:
        """Carry ``plan`` out (or dry-run it); ``advance(n)`` is told of every n objects done (a progress line)."""
        tick = advance or (lambda _n: None)
        retries_before = self.rest.retries
        applied: list[ObjectKey] = []
        failed: list[Failure] = []
        live_after: dict[ObjectKey, JsonObject] = {}
        unverified: list[ObjectKey] = []
        new_namespaces = {a.key.name for a in plan.applies if a.key.kind == "Namespace" and a.reason == "create"}

        def one(action: ApplyAction) -> tuple[ApplyAction, JsonObject | None, Failure | None, bool]:
            if not self.may_write():
                return action, None, Failure(action.key, "apply", NOT_LEADER), False
            try:
                return action, self.apply(action, dry_run=dry_run), None, False
            except ClusterNotFound as err:
                if dry_run and action.key.namespace in new_namespaces:  # a dry run created no namespace
                    return action, None, None, True
                return action, None, Failure(action.key, "apply", _reason(err)), False
            except ClusterError as err:
                return action, None, Failure(action.key, "apply", _reason(err), isinstance(err, ClusterConflict)), \
                    False

        # One kind rank after the other (Namespaces before the LocalQueues in them); within a rank, in parallel.
        for _, group in groupby(plan.applies, key=lambda a: apply_rank(a.key)[0]):
            actions = list(group)
            if self.concurrency > 1 and len(actions) > 1:
                with ThreadPoolExecutor(max_workers=min(self.concurrency, len(actions))) as pool:
                    outcomes = list(pool.map(one, actions))
            else:
                outcomes = [one(a) for a in actions]
            tick(len(outcomes))
            for action, answer, failure, unchecked in outcomes:
                if failure is not None:
                    failed.append(failure)
                    continue
                applied.append(action.key)
                if unchecked:
                    unverified.append(action.key)
                elif answer is not None:
                    live_after[action.key] = answer
        pruned: list[ObjectKey] = []
        held: list[ObjectKey] = []
        for prune in plan.prunes:
            if failed or not self.may_write():
                held.append(prune.key)
                continue
            try:
                self.prune(prune, dry_run=dry_run)
                pruned.append(prune.key)
                tick(1)
            except ClusterError as err:
                failed.append(Failure(prune.key, "prune", _reason(err), isinstance(err, ClusterConflict)))
        return Execution(dry_run, tuple(applied), tuple(pruned), tuple(failed), tuple(held), tuple(unverified),
                         self.rest.retries - retries_before, live_after)

    def apply(self, action: ApplyAction, *, dry_run: bool = False) -> JsonObject:
        version = action.api_version.rsplit("/", 1)[-1]
        query = [("fieldManager", self.field_manager)]
        if action.force:
            query.append(("force", "true"))
        if dry_run:
            query.append(("dryRun", "All"))
        answer = self.rest.request("PATCH", object_path(action.key, version), query=query, body=dict(action.body),
                                   content_type=APPLY_CONTENT_TYPE, obj=str(action.key))
        return cast(JsonObject, answer)  # an apply answers with the object as it now is

    def prune(self, action: PruneAction, *, dry_run: bool = False) -> None:
        version = action.api_version.rsplit("/", 1)[-1]
        query = [("propagationPolicy", "Background")] + ([("dryRun", "All")] if dry_run else [])
        try:
            self.rest.request("DELETE", object_path(action.key, version), query=query, obj=str(action.key))
        except ClusterNotFound:
            return  # already gone: the goal is reached


def _reason(err: ClusterError) -> str:
    causes = getattr(err, "causes", ())
    return f"{err.reason} ({'; '.join(causes)})" if causes else err.reason
