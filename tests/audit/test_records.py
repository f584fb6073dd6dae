"""Records: schema envelope, stable ids, redaction and canonical JSON."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from gitopsq.audit import records as r
from gitopsq.audit.canonical import GENESIS_HASH, ChainHead, canonical_json, entry_hash, link, link_all
from gitopsq.audit.redact import REDACTED, redact

from .conftest import T0, admitted

COMMIT = r.CommitInfo("abc123", r.Person("Ann", "ann@example.com", T0), r.Person("Bob", "bob@example.com", T0),
                      "raise team-a quota", r.SignatureState("verified", "ann@example.com", "SHA256:xyz"))


def _attempt(**overrides: object) -> r.Record:
    values: dict[str, object] = {
        "time": T0, "source_url": "https://github.com/org/queues.git", "revision": "abc123",
        "previous_revision": "def456", "result": "applied",
        "changes": [r.ObjectChange("ClusterQueue", "team-a-cq", "updated")],
        "verdicts": [r.PolicyVerdict("quota-cap", "ClusterQueue/team-a-cq", "Deny", True)],
        "commit": COMMIT, "approvals": [r.Approval("Bob", "bob@example.com", "Reviewed-by", "abc123", T0)],
        "approval_required": True}
    values.update(overrides)
    return r.sync_attempt(**values)  # type: ignore[arg-type]


BUILDERS = {
    "sync.attempt": _attempt,
    "sync.drift_corrected": lambda: r.sync_drift_corrected(
        time=T0, source_url="https://h/x.git", revision="abc",
        changes=[r.ObjectChange("ClusterQueue", "q", "updated")]),
    "sync.rejected": lambda: r.sync_rejected(time=T0, source_url="https://h/x.git", revision="abc",
                                             reason="PolicyDenied"),
    "admission.admitted": lambda: admitted(1),
    "admission.preempted": lambda: r.admission("preempted", time=T0, workload=r.WorkloadRef("ns", "w", "u"),
                                               cluster_queue="cq", reason="InCohortReclamation"),
    "admission.evicted": lambda: r.admission("evicted", time=T0, workload=r.WorkloadRef("ns", "w", "u"),
                                             cluster_queue="cq", reason="PodsReadyTimeout"),
    "admission.finished": lambda: r.admission("finished", time=T0, workload=r.WorkloadRef("ns", "w", "u"),
                                              cluster_queue="cq"),
}


@pytest.mark.parametrize("record_type", list(BUILDERS), ids=lambda t: f"{t}-has-a-valid-envelope")
def test_every_builder_yields_a_valid_versioned_record(record_type: str) -> None:
    """Each builder produces schemaVersion 1, its own type, an id and an RFC 3339 UTC time."""
    record = BUILDERS[record_type]()
    assert record.type == record_type
    assert r.validate_record(record.data) == []
    assert record.data["schemaVersion"] == 1
    assert record.data["time"].endswith("Z")


def test_same_event_built_twice_has_the_same_id() -> None:
    """Rebuilding a record from the same event yields the same id, so a replay is recognised."""
    assert _attempt().id == _attempt().id
    assert admitted(7).id == admitted(7).id


@pytest.mark.parametrize(("label", "other"), [
    ("another-revision", lambda: _attempt(revision="fff000")),
    ("another-attempt-time", lambda: _attempt(time=T0 + timedelta(seconds=30))),
    ("another-previous-revision", lambda: _attempt(previous_revision="999")),
], ids=lambda v: v if isinstance(v, str) else "")
def test_different_sync_attempts_have_different_ids(label: str, other: object) -> None:
    """Changing an identifying field of a sync attempt changes its id."""
    assert other().id != _attempt().id  # type: ignore[operator]


def test_a_rejected_revision_has_one_id_however_often_it_is_polled() -> None:
    """sync.rejected leaves the time out of its id: polling the same bad revision records it once."""
    first = r.sync_rejected(time=T0, source_url="https://h/x", revision="abc", reason="PolicyDenied")
    later = r.sync_rejected(time=T0 + timedelta(hours=1), source_url="https://h/x", revision="abc",
                            reason="PolicyDenied")
    assert first.id == later.id


def test_admission_ids_differ_per_transition_time_and_type() -> None:
    """The same workload admitted at two times, or admitted vs preempted, gives distinct ids."""
    ref = r.WorkloadRef("ns", "w", "uid-1")
    a = r.admission("admitted", time=T0, workload=ref, cluster_queue="cq")
    b = r.admission("admitted", time=T0 + timedelta(seconds=1), workload=ref, cluster_queue="cq")
    c = r.admission("preempted", time=T0, workload=ref, cluster_queue="cq")
    assert len({a.id, b.id, c.id}) == 3


@pytest.mark.parametrize(("value", "expected"), [
    ({"url": "https://alice:s3cr3t@github.com/org/repo.git"}, {"url": "https://github.com/org/repo.git"}),
    ({"token": "abc", "name": "x"}, {"name": "x"}),
    ({"nested": {"password": "p", "apiKey": "k", "private_key": "k", "ok": 1}}, {"nested": {"ok": 1}}),
    ({"message": "auth header Bearer eyAbc.def-ghi failed"}, {"message": f"auth header {REDACTED} failed"}),
    ({"message": "pushed with ghp_" + "a" * 36}, {"message": f"pushed with {REDACTED}"}),
    ({"message": "key AKIAABCDEFGHIJKLMNOP leaked"}, {"message": f"key {REDACTED} leaked"}),
    ({"m": "-----BEGIN OPENSSH PRIVATE KEY-----\nAAAA\n-----END OPENSSH PRIVATE KEY-----"}, {"m": REDACTED}),
    ({"list": ["fetch ssh://git:pw@h/x failed", "clean"]}, {"list": ["fetch ssh://h/x failed", "clean"]}),
    ({"message": "plain text with no secrets"}, {"message": "plain text with no secrets"}),
], ids=["url-userinfo-stripped", "token-key-dropped", "nested-credential-keys-dropped", "bearer-masked",
        "github-token-masked", "aws-key-masked", "pem-private-key-masked", "userinfo-in-free-text",
        "clean-text-untouched"])
def test_redaction_drops_secret_looking_data(value: dict[str, object], expected: dict[str, object]) -> None:
    """Redaction removes credential keys, URL userinfo and recognisable tokens, and leaves the rest."""
    assert redact(value) == expected


def test_builders_redact_the_source_url_and_messages() -> None:
    """A sync record built from a URL with credentials and a leaky message keeps neither secret."""
    record = _attempt(source_url="https://bot:hunter2@git.example.com/q.git", message="token ghp_" + "b" * 36)
    text = canonical_json(record.data)
    assert "hunter2" not in text and "ghp_" not in text
    assert record.data["source"]["url"] == "https://git.example.com/q.git"


def test_naive_times_are_refused() -> None:
    """An audit time without a zone is ambiguous and rejected."""
    with pytest.raises(ValueError, match="timezone"):
        r.format_time(datetime(2026, 1, 1))


def test_times_are_normalised_to_utc() -> None:
    """A time in another zone is stored as the same instant in UTC."""
    assert r.format_time(datetime(2026, 1, 1, 2, 0, tzinfo=timezone(timedelta(hours=2)))) == "2026-01-01T00:00:00Z"


def test_canonical_json_is_sorted_and_compact() -> None:
    """Canonical JSON sorts keys at every level and uses no whitespace."""
    assert canonical_json({"b": 1, "a": {"d": [1, 2], "c": "é"}}) == '{"a":{"c":"é","d":[1,2]},"b":1}'


def test_chain_links_carry_seq_prev_hash_and_a_recomputable_hash() -> None:
    """Linked entries number from 1, point at the previous hash and hash to their own ``hash``."""
    entries, head = link_all([admitted(1).data, admitted(2).data], ChainHead())
    assert [e["seq"] for e in entries] == [1, 2]
    assert entries[0]["prevHash"] == GENESIS_HASH and entries[1]["prevHash"] == entries[0]["hash"]
    assert all(entry_hash(e) == e["hash"] for e in entries)
    assert head == ChainHead(2, entries[1]["hash"])


def test_editing_any_field_changes_the_hash() -> None:
    """A one-character edit to a chained entry no longer matches its hash."""
    entry, _ = link(admitted(1).data, ChainHead())
    edited = {**entry, "clusterQueue": "cq-b"}
    assert entry_hash(edited) != entry["hash"]


@pytest.mark.parametrize(("field", "value", "problem"), [
    ("schemaVersion", 2, "schemaVersion"), ("type", "sync.unknown", "unknown record type"),
    ("id", "", "missing id"), ("time", "yesterday", "RFC 3339"),
], ids=["future-schema-version", "unknown-type", "empty-id", "unparseable-time"])
def test_validate_record_names_envelope_problems(field: str, value: object, problem: str) -> None:
    """An envelope with a wrong version, type, id or time is reported."""
    data = {**admitted(1).data, field: value}
    assert any(problem in p for p in r.validate_record(data))


def test_utc_constant_is_used_for_records() -> None:
    """Record times built from UTC datetimes keep the instant unchanged."""
    assert r.parse_time(admitted(0).data["time"]) == T0.astimezone(UTC)


def _schema() -> dict[str, object]:
    import json
    from importlib.resources import files

    return json.loads(files("gitopsq.data").joinpath("audit/record.schema.json").read_text(encoding="utf-8"))


@pytest.mark.parametrize("record_type", list(BUILDERS), ids=lambda t: f"{t}-matches-the-published-schema")
def test_chained_records_match_the_published_json_schema(record_type: str) -> None:
    """What the builders and the chain produce is valid against gitopsq/data/audit/record.schema.json."""
    import jsonschema

    entry, _ = link(BUILDERS[record_type]().data, ChainHead())
    jsonschema.validate(entry, _schema())


def test_the_schema_rejects_an_unknown_change_action() -> None:
    """The published schema is strict about enumerations, so a malformed record is caught by other tools too."""
    import jsonschema

    entry, _ = link(_attempt().data, ChainHead())
    entry["changes"][0]["action"] = "deleted"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(entry, _schema())
