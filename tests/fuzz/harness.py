"""Fuzzing harness shared by the bounded test suite (tests/fuzz/test_fuzz.py) and the on-demand run
(benchmarks/fuzz.py): seed documents, a structure-aware YAML mutator, the targets and the property.

The property, for every input: the target returns (exit 0 or 1 in CLI terms) with every problem a finding that
names the file and, except for whole-file refusals, the line; it never raises anything else, never runs more
than `MAX_SECONDS` and never grows memory past `MAX_MB` (enforced by the on-demand script's address-space limit).
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from gitopsq.api.quantity import QuantityError, parse_quantity
from gitopsq.errors import PolicyError
from gitopsq.manifests.config import parse_config
from gitopsq.manifests.loader import load_file
from gitopsq.policy import SourcedObject, build_policy_input, evaluate, parse_policies
from gitopsq.policy.library import builtin_files
from tests.policy.helpers import repo_config

ROOT: Final = Path(__file__).resolve().parents[2]
# Chosen from measurement (see docs/check.md, "Loader limits"): the slowest of a million inputs took well under
# a tenth of these; a real queue file loads in milliseconds.
MAX_SECONDS: Final = 2.0
MAX_MB: Final = 512
# Codes of findings about a whole file, which have no line to name.
FILE_LEVEL: Final = frozenset({"file-too-large", "yaml-syntax", "config-invalid"})


def seeds() -> dict[str, list[bytes]]:
    """Real documents to mutate: the repository template's manifests and config, the built-in policies."""
    template = ROOT / "repo-template"
    manifests = [p.read_bytes() for p in sorted(template.glob("platform/*.yaml"))]
    manifests += [p.read_bytes() for p in sorted(template.glob("teams/*/*.yaml"))]
    return {"manifest": manifests, "config": [(template / "gitopsq.yaml").read_bytes()],
            "policy": [text.encode() for _, text in builtin_files()]}


TRICKY_SCALARS: Final = [
    "1:30", "0x10", "0o7", "+5", ".5", "1_000", "yes", "on", "y", "~", "!!null \"0\"", "!!bool maybe", "!!int \"\"",
    "!!float \"\"", "!!binary aGk=", "!!binary !!", "!!timestamp x", "!!set {a: 1}", "!!python/object:os.system x",
    "\"5 \"", "\"5\\n\"", "\"5\\u00a0\"", "1e999", ".nan", "-.inf", "9223372036854775808", "'it''s'", "|\n  block",
    ">-\n  folded", "&a 1", "*a", "*undefined", "{<<: *a}", "[1, [2, [3]]]", "{}", "[]", "\"\\x00\"", "'\t'",
    "2001-12-14", "!!str", "!", "!local x", "? complex", "- item", "@reserved", "`reserved", "%YAML 1.1",
]


def _lines(data: bytes) -> list[str]:
    return data.decode("utf-8", errors="replace").split("\n")


def mutate(data: bytes, rnd: random.Random, rounds: int = 3) -> bytes:
    """A few structure-aware edits of one YAML document: duplicate, alias, merge, tag, quote and indent."""
    lines = _lines(data)
    for _ in range(rnd.randint(1, rounds)):
        if not lines:
            lines = [""]
        i = rnd.randrange(len(lines))
        line = lines[i]
        key, sep, value = line.partition(": ")
        indent = line[: len(line) - len(line.lstrip(" "))]
        op = rnd.randrange(14)
        if op == 0:  # duplicate a line (duplicate keys, list items)
            lines.insert(i, line)
        elif op == 1 and sep:  # anchor a value and alias it elsewhere
            lines[i] = f"{key}: &x{i} {value}"
            j = rnd.randrange(len(lines))
            k2, s2, _ = lines[j].partition(": ")
            if s2:
                lines[j] = f"{k2}: *x{i}"
        elif op == 2 and sep:  # merge key, sometimes recursive
            anchor = f"m{i}"
            lines[i] = f"{key}: &{anchor} {{{value.strip() and 'v: ' + value.strip() + ', '}<<: *{anchor}}}" \
                if rnd.random() < 0.3 else f"{indent}<<: *x{rnd.randrange(len(lines))}"
        elif op == 3 and sep:  # explicit tag or tricky scalar
            lines[i] = f"{key}: {rnd.choice(TRICKY_SCALARS)}"
        elif op == 4 and sep:  # requote
            quote = rnd.choice(["'", '"', ""])
            lines[i] = f"{key}: {quote}{value.strip(chr(34) + chr(39))}{quote}"
        elif op == 5:  # re-indent
            delta = rnd.choice([-2, -1, 1, 2, 4])
            lines[i] = (" " * max(0, len(indent) + delta)) + line.lstrip(" ")
        elif op == 6:  # tab
            lines[i] = "\t" + line
        elif op == 7:  # truncate
            lines[i] = line[: rnd.randrange(len(line) + 1)]
        elif op == 8:  # delete
            del lines[i]
        elif op == 9:  # alias bomb built from merges or aliases
            width, depth = rnd.randint(2, 10), rnd.randint(2, 9)
            bomb = ["b0: &b0 {k: v}" if rnd.random() < 0.5 else "b0: &b0 {}"]
            for d in range(1, depth):
                refs = ", ".join([f"*b{d - 1}"] * width)
                bomb.append(f"b{d}: &b{d} {{<<: [{refs}]}}" if rnd.random() < 0.5 else f"b{d}: &b{d} [{refs}]")
            lines[i:i] = bomb
        elif op == 10:  # deep flow nesting
            n = rnd.choice([10, 63, 64, 65, 200, 5000])
            lines[i:i] = ["deep: " + "[" * n + "]" * n]
        elif op == 11:  # document separators and directives
            lines.insert(i, rnd.choice(["---", "...", "--- !!str", "%YAML 1.2", "--- |", "---\n- a"]))
        elif op == 12:  # swap two lines
            j = rnd.randrange(len(lines))
            lines[i], lines[j] = lines[j], lines[i]
        else:  # splice a random byte-level edit
            pos = rnd.randrange(len(line) + 1)
            lines[i] = line[:pos] + rnd.choice(["\x00", "\ufeff", "\u00a0", ":", "#", "&", "*", "!", "|", "{", "]",
                                                "\\", "\r", "\u2028", "'", '"', "%", "@"]) + line[pos:]
    return "\n".join(lines).encode("utf-8", errors="surrogatepass")


@dataclass(frozen=True, slots=True)
class Failure:
    target: str
    data: bytes
    problem: str


def _located(findings: tuple[object, ...], path: str) -> str | None:
    for f in findings:
        loc = getattr(f, "location", None)
        code = getattr(f, "code", "")
        if loc is None or loc.path != path:
            return f"finding without the file: {f}"
        if loc.line is None and code not in FILE_LEVEL:
            return f"finding without a line: {f}"
    return None


def check_manifest(data: bytes) -> str | None:
    result = load_file("teams/fuzz/q.yaml", data)
    return _located(result.findings, "teams/fuzz/q.yaml")


def check_config(data: bytes) -> str | None:
    return _located(parse_config(data).findings, "gitopsq.yaml")


_OBJECTS: Final = [SourcedObject("teams/a/q.yaml", {
    "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": "team-a"},
    "spec": {"cohortName": "shared", "resourceGroups": [{"coveredResources": ["cpu"], "flavors": [
        {"name": "default", "resources": [{"name": "cpu", "nominalQuota": "4"}]}]}]}}, 1)]


def check_policy(data: bytes, backend: str = "cel-python") -> str | None:
    text = data.decode("utf-8", errors="replace")
    try:
        policies = parse_policies("policies/fuzz.yaml", text, backend)
    except PolicyError as err:
        loc = err.location
        if loc is None or loc.path != "policies/fuzz.yaml":
            return f"policy error without the file: {err}"
        return None
    pi = build_policy_input([], _OBJECTS, repo_config(), repo_config())
    for verdict in evaluate(policies, pi, backend):
        if not verdict.allowed and not verdict.message:
            return f"a denial with no message: {verdict}"
    return None


def check_quantity(data: bytes) -> str | None:
    text = data.decode("utf-8", errors="replace")
    try:
        parse_quantity(text)
    except QuantityError as err:
        if not err.reason:
            return "a refusal with no reason"
    return None


TARGETS: Final[dict[str, Callable[[bytes], str | None]]] = {
    "manifest": check_manifest, "config": check_config, "policy": check_policy, "quantity": check_quantity,
}


def run_one(target: str, data: bytes) -> tuple[float, str | None]:
    """(seconds, problem) for one input; an exception is a problem carrying its traceback."""
    import traceback

    started = time.perf_counter()
    try:
        problem = TARGETS[target](data)
    except Exception:
        problem = "traceback:\n" + traceback.format_exc()
    except RecursionError:  # pragma: no cover - a subclass of Exception, listed for the reader
        problem = "RecursionError"
    seconds = time.perf_counter() - started
    if problem is None and seconds > MAX_SECONDS:
        problem = f"took {seconds:.2f} s (limit {MAX_SECONDS} s)"
    return seconds, problem


def quantity_input(rnd: random.Random) -> bytes:
    """A quantity-like string: digits, points, signs, suffix letters, white space and look-alikes."""
    alphabet = "0123456789.+-eEinumkKMGTP \n\u00a0:_xob١"
    if rnd.random() < 0.5:
        return "".join(rnd.choice(alphabet) for _ in range(rnd.randint(0, 40))).encode()
    text = rnd.choice(["", "-", "+"]) + str(rnd.randint(0, 10 ** rnd.randint(0, 25)))
    if rnd.random() < 0.5:
        text += "." + str(rnd.randint(0, 10 ** rnd.randint(0, 12)))
    return (text + rnd.choice(["", "m", "Ki", "Ei", "e3", "e-20", "e99999999999", "E", "n", "i", "k"])).encode()


def generate(target: str, rnd: random.Random, pool: dict[str, list[bytes]]) -> bytes:
    """One input for ``target``: a mutated seed (or, now and then, raw bytes)."""
    if target == "quantity":
        return quantity_input(rnd)
    if rnd.random() < 0.05:
        return rnd.randbytes(rnd.randint(0, 200))
    return mutate(rnd.choice(pool[target]), rnd)
