"""Differential checks against the real API server on the rig: quantities and YAML scalars read as it reads them.

* Quantities: a few hundred edge-case and random strings go through `parse_quantity` and through a server-side
  dry-run create of a ClusterQueue (``nominalQuota``): accept/reject must agree. Their exact value goes through
  `kubernetes_value` and the server's own ``resource.ParseQuantity`` (CEL ``isQuantity``/``quantity()`` in a
  probe CRD's validation rule): validity and value must agree.
* YAML scalars: one manifest with a few hundred plain scalars goes through ``kubectl create --dry-run=server``
  (kubectl's sigs.k8s.io/yaml) into a probe that keeps any field; the JSON the server echoes must equal what
  `load_yaml` read.
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import pytest
from kubernetes import client as k8s

from gitopsq.api.quantity import QuantityError, kubernetes_value, parse_quantity
from gitopsq.manifests.yamldoc import load_yaml

pytestmark = pytest.mark.envtest

GROUP = "fuzz.gitopsq.dev"
EDGE = ["0", "1", "5", "5 ", " 5", "5\n", "5\u00a0", "1:30", "0x10", "0o7", "+5", ".5", "5.", "1_000", "1e3",
        "1E3", "1e-3", "1e1.5", "1e.5", "1.5e2", "1e", "e3", "1Ki", "1.5Gi", ".5Ki", "1Ei", "8Ei", "9Ei", "1KI",
        "1K", "1k", "1m", "1u", "1n", "0.1n", "1e-10", "100Mi", "-5", "-0", "+0", "+", "-", ".", "+.5", "-.5",
        "00001", "1.0000000001", "123456789012345678901234567890", "1" * 32, "1" * 33, "9223372036854775807",
        "9223372036854775808", "1e18", "1e19", "1e400", "1e4294967296", "1ee5", "1Gi1", "yes", "", "1.", "1..5",
        "1,5", "١", "１"]
ALPHABET = "0123456789.+-eEinumkKMGTP "


def _random_strings(count: int) -> list[str]:
    rnd = random.Random(19)
    out: list[str] = []
    for _ in range(count):
        if rnd.random() < 0.5:  # well-formed-ish: digits, maybe a point, maybe a suffix
            text = rnd.choice(["", "-", "+"]) + str(rnd.randint(0, 10 ** rnd.randint(0, 20)))
            if rnd.random() < 0.4:
                text += "." + str(rnd.randint(0, 10 ** rnd.randint(0, 12)))
            text += rnd.choice(["", "m", "k", "Ki", "Gi", "Ei", "E", "n", "u", "e3", "e-12", "e+2", "M", "P", "i"])
        else:
            text = "".join(rnd.choice(ALPHABET) for _ in range(rnd.randint(1, 10)))
        out.append(text)
    return out


def _crd(name: str, plural: str, kind: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{GROUP}"},
        "spec": {"group": GROUP, "scope": "Cluster",
                 "names": {"plural": plural, "singular": name, "kind": kind, "listKind": f"{kind}List"},
                 "versions": [{"name": "v1", "served": True, "storage": True,
                               "schema": {"openAPIV3Schema": {"type": "object", "properties": {"spec": spec}}}}]},
    }


QUANTITY_PROBE = _crd("quantityprobe", "quantityprobes", "QuantityProbe", {
    "type": "object", "required": ["q", "valid", "canon"],
    "properties": {"q": {"type": "string", "maxLength": 64}, "canon": {"type": "string", "maxLength": 128},
                   "valid": {"type": "boolean"}},
    "x-kubernetes-validations": [
        {"rule": "isQuantity(self.q) == self.valid", "message": "validity differs"},
        {"rule": "!self.valid || quantity(self.q).compareTo(quantity(self.canon)) == 0", "message": "value differs"},
    ],
})
ECHO_PROBE = _crd("echoprobe", "echoprobes", "EchoProbe",
                  {"type": "object", "x-kubernetes-preserve-unknown-fields": True})


@pytest.fixture(scope="module")
def probes(kueue_crds: Any) -> Iterator[Any]:
    """The rig with the two probe CRDs Established (removed afterwards)."""
    with kueue_crds.api_client() as api:
        ext = k8s.ApiextensionsV1Api(api)
        for crd in (QUANTITY_PROBE, ECHO_PROBE):
            ext.create_custom_resource_definition(crd)
        deadline = time.monotonic() + 60
        for crd in (QUANTITY_PROBE, ECHO_PROBE):
            while True:
                got = ext.read_custom_resource_definition(crd["metadata"]["name"])
                if any(c.type == "Established" and c.status == "True" for c in (got.status.conditions or [])):
                    break
                assert time.monotonic() < deadline, "probe CRD not Established"
                time.sleep(0.2)
        time.sleep(1)  # discovery of the new resources
    yield kueue_crds
    with kueue_crds.api_client() as api:
        for crd in (QUANTITY_PROBE, ECHO_PROBE):
            k8s.ApiextensionsV1Api(api).delete_custom_resource_definition(crd["metadata"]["name"])


def _dry_run(custom: Any, group: str, version: str, plural: str, body: dict[str, Any]) -> str | None:
    """None when the server accepts ``body`` on a dry-run create, else its message."""
    try:
        custom.create_cluster_custom_object(group, version, plural, body, dry_run="All")
    except k8s.ApiException as err:
        if err.status not in (400, 422):
            raise
        return str(json.loads(err.body).get("message", err.body))
    return None


def _exact(value: Decimal) -> str:
    sign, digits, exponent = value.as_tuple()
    return f"{'-' if sign else ''}{''.join(map(str, digits))}e{exponent}"


def _gitopsq_accepts(value: object) -> tuple[bool, str]:
    try:
        parsed = parse_quantity(value)
    except QuantityError as err:
        return False, err.reason
    return parsed.milli >= 0, "negative"


def _cluster_queue(quota: object) -> dict[str, Any]:
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": "probe"},
            "spec": {"resourceGroups": [{"coveredResources": ["cpu"], "flavors": [
                {"name": "default", "resources": [{"name": "cpu", "nominalQuota": quota}]}]}]}}


def test_quantities_agree_with_the_api_server(probes: Any) -> None:
    """For edge cases and a few hundred random strings (and JSON numbers), gitopsq accepts a nominalQuota exactly
    when a dry-run ClusterQueue create does (except where the CRD's pattern lets through what Kueue's
    ParseQuantity refuses, or a value beyond 64 bits), and `kubernetes_value` agrees with the server's
    ParseQuantity on validity and exact value."""
    texts = list(dict.fromkeys(EDGE + _random_strings(300)))
    value_mismatches, verdict_mismatches, leaks = [], [], []
    with probes.api_client() as api:
        custom = k8s.CustomObjectsApi(api)
        for text in texts:
            parsed = kubernetes_value(text)
            canon = _exact(parsed[0]) if parsed is not None else "0"
            if len(text) <= 64:
                refused = _dry_run(custom, GROUP, "v1", "quantityprobes", {
                    "apiVersion": f"{GROUP}/v1", "kind": "QuantityProbe", "metadata": {"name": "p"},
                    "spec": {"q": text, "valid": parsed is not None, "canon": canon}})
                if refused is not None:
                    value_mismatches.append((text, canon, refused))
        for value in [*texts, 5, 0, -1, 1000.0, 1.5, 2**62, 2**63 - 1]:
            # A YAML float with no fraction reaches the server as a JSON integer (Go prints 1000.0 as 1000).
            sent = int(value) if isinstance(value, float) and value.is_integer() else value
            server_refuses = _dry_run(custom, "kueue.x-k8s.io", "v1beta2", "clusterqueues", _cluster_queue(sent))
            ours, reason = _gitopsq_accepts(value)
            if ours and server_refuses is not None:
                verdict_mismatches.append((value, "gitopsq accepts, server refuses", server_refuses))
            elif not ours and server_refuses is None:
                known = isinstance(value, str) and (kubernetes_value(value) is None or "too large" in reason)
                (leaks if known else verdict_mismatches).append((value, "gitopsq refuses, server accepts", reason))
    assert not value_mismatches, value_mismatches[:20]
    assert not verdict_mismatches, verdict_mismatches[:20]
    assert all(isinstance(v, str) for v, *_ in leaks)  # documented: the CRD pattern is looser than ParseQuantity


SCALARS = ["1:30", "0x10", "0X1f", "0o7", "0O17", "0b101", "-0b11", "010", "08", "09.5", "+5", "-5", ".5", "+.5",
           "-.5", "5.", "1_000", "1__0", "0x_1", "1e3", "1E3", "1e-3", "1.5e+2", "1e999", ".5e999", "yes", "Yes",
           "YES", "no", "on", "On", "off", "OFF", "y", "Y", "n", "N", "true", "True", "TRUE", "false", "~", "null",
           "Null", "NULL", "tRue", "yEs", "2001-12-14", "2001-12-14T21:59:43.10-05:00", "0", "-0", "+0", "00",
           "9223372036854775807", "9223372036854775808", "18446744073709551615", "18446744073709551616",
           "-9223372036854775808", "-9223372036854775809", "0xFFFFFFFFFFFFFFFF", "1e3_0", "1.5", "1.", ".",
           "+", "0x", "0b", "0o", "0b2", "0o8", "+0x10", "-0o7", "1:2:3", "190:20:30", "1,000", "5 m",
           "12e", "3.14.15", ".e3", "1e+", "0.", "-.e1", "٣", "1Ki", "500m", "inf", "+inf", "nan"]


def test_yaml_scalars_read_as_the_api_server_reads_them(probes: Any, tmp_path: Any) -> None:
    """Every plain scalar in one manifest reaches the server (through kubectl, i.e. sigs.k8s.io/yaml) with the
    value `load_yaml` gives it: no sexagesimal numbers, Go integer literals, y/n booleans, dropped underscores."""
    fields = "\n".join(f"  v{i}: {s}" for i, s in enumerate(SCALARS))
    text = f"apiVersion: {GROUP}/v1\nkind: EchoProbe\nmetadata:\n  name: e\nspec:\n{fields}\n"
    ours = load_yaml("echo.yaml", text.encode())
    assert not ours.findings, ours.findings
    path = tmp_path / "echo.yaml"
    path.write_text(text, encoding="utf-8")
    done = probes.kubectl("create", "--dry-run=server", "-o", "json", "-f", str(path))
    echoed = json.loads(done.stdout)["spec"]
    mine = ours.documents[0].data["spec"]

    def same(theirs: object, ours: object) -> bool:
        if isinstance(ours, float) and isinstance(theirs, int | float) and not isinstance(theirs, bool):
            return float(theirs) == ours  # Go prints a float64 like 9.2e18 as 9223372036854776000
        return theirs == ours and type(theirs) is type(ours)

    diffs = [(SCALARS[i], echoed[f"v{i}"], mine[f"v{i}"]) for i in range(len(SCALARS))
             if not same(echoed[f"v{i}"], mine[f"v{i}"])]
    assert not diffs, diffs


@pytest.mark.parametrize(("scalar", "accepted"), [
    ('!!null "0"', False), ("!!bool maybe", False), ('!!int ""', False), ('!!float ""', False), ("!!float 5", True),
    ("!!str 5", True), ("!!int 0x10", True), ("!!bool yes", True), ('!!null ""', True), (".nan", False),
    (".inf", False), ("!!binary aGk=", True),
])
def test_explicit_tags_agree_with_the_api_server(probes: Any, tmp_path: Any, scalar: str, accepted: bool) -> None:
    """An explicitly tagged scalar is refused by `load_yaml` exactly when kubectl/the API server refuses it, and
    an accepted one carries the same value."""
    text = f"apiVersion: {GROUP}/v1\nkind: EchoProbe\nmetadata:\n  name: e\nspec:\n  v: {scalar}\n"
    ours = load_yaml("echo.yaml", text.encode())
    path = tmp_path / "echo.yaml"
    path.write_text(text, encoding="utf-8")
    done = probes.kubectl("create", "--dry-run=server", "-o", "json", "-f", str(path), check=False)
    assert (done.returncode == 0) is accepted, done.stderr
    assert (not ours.findings) is accepted, ours.findings
    if accepted:
        assert json.loads(done.stdout)["spec"]["v"] == ours.documents[0].data["spec"]["v"]


def test_non_text_keys_reach_the_server_as_load_yaml_reads_them(probes: Any, tmp_path: Any) -> None:
    """Boolean and integer keys (`on:`, `n:`, `1:`, `0x10:`) reach the server as the text `load_yaml` gives them."""
    text = f"apiVersion: {GROUP}/v1\nkind: EchoProbe\nmetadata:\n  name: e\nspec:\n  on: a\n  n: b\n  1: c\n  0x10: d\n"
    (doc,) = load_yaml("echo.yaml", text.encode()).documents
    path = tmp_path / "echo.yaml"
    path.write_text(text, encoding="utf-8")
    done = probes.kubectl("create", "--dry-run=server", "-o", "json", "-f", str(path))
    assert json.loads(done.stdout)["spec"] == doc.data["spec"]
