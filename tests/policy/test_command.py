"""``gitopsq policy test [DIR]``: exit 0 when every embedded test passes on every backend and they agree, else 1."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

POLICY = """apiVersion: gitopsq.dev/v1alpha1
kind: Policy
metadata: {{name: {name}}}
spec:
  match: {{kinds: [LocalQueue]}}
  validations:
    - expression: "{expression}"
      message: "LocalQueue names start with q-"
  tests:
    - name: a good name
      expect: allow
      object: {{apiVersion: kueue.x-k8s.io/v1beta1, kind: LocalQueue, metadata: {{name: q-1, namespace: a}}}}
    - name: a bad name
      expect: deny
      messageContains: "start with q-"
      object: {{apiVersion: kueue.x-k8s.io/v1beta1, kind: LocalQueue, metadata: {{name: x, namespace: a}}}}
"""


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gitopsq", "policy", "test", *args],
                          capture_output=True, text=True, check=False)


def _write(directory: Path, name: str, expression: str) -> None:
    (directory / f"{name}.yaml").write_text(POLICY.format(name=name, expression=expression), encoding="utf-8")


def test_builtin_library_passes() -> None:
    """Without DIR the built-in library is tested on both backends and passes."""
    result = _run()
    assert result.returncode == 0, result.stdout + result.stderr
    assert "12 policies" in result.stdout and "on cel-python, cel-expr-python: 0 failed, 0 backend" in result.stdout


def test_passing_directory(tmp_path: Path) -> None:
    """A directory of correct policies exits 0 and lists each test with --verbose."""
    _write(tmp_path, "names", "object.metadata.name.startsWith('q-')")
    result = _run(str(tmp_path), "--verbose")
    assert result.returncode == 0, result.stdout
    assert "ok   names: a bad name [cel-expr-python]" in result.stdout


def test_failing_test_exits_1_and_says_why(tmp_path: Path) -> None:
    """A policy whose embedded expectation does not hold exits 1 naming the policy, test, backend and reason."""
    _write(tmp_path, "names", "object.metadata.name.startsWith('x')")
    result = _run(str(tmp_path), "--backend", "cel-python")
    assert result.returncode == 1
    assert "FAIL names: a good name [cel-python]: expected allow, got: LocalQueue names start with q-" in result.stdout


def test_backend_disagreement_fails(tmp_path: Path) -> None:
    """An expression only one backend accepts is reported as a disagreement and fails the run."""
    _write(tmp_path, "mixed", "object.metadata.name.startsWith('q-') && 'abc' != 1")
    result = _run(str(tmp_path))
    assert result.returncode == 1
    assert "backends disagree" in result.stdout


def test_syntax_error_names_file_line_and_column(tmp_path: Path) -> None:
    """A policy that does not compile stops the run with exit 1 and its file:line:column."""
    _write(tmp_path, "broken", "object.metadata.name.startsWith('q-'")
    result = _run(str(tmp_path))
    assert result.returncode == 1
    assert result.stderr.startswith("gitopsq: broken.yaml:7:") and "CEL syntax error" in result.stderr


@pytest.mark.parametrize("args", [["/nonexistent/policies"], ["--backend", "cel-go"]],
                         ids=["missing directory", "unknown backend"])
def test_usage_errors_exit_2(args: list[str]) -> None:
    """A directory that does not exist or an unknown backend is a usage error (exit 2)."""
    assert _run(*args).returncode == 2


def test_documented_example_policy_passes_its_tests(tmp_path: Path) -> None:
    """The example policy in docs/policy.md loads and passes its embedded tests on both backends."""
    docs = (Path(__file__).resolve().parents[2] / "docs" / "policy.md").read_text(encoding="utf-8")
    example = next(block.split("\n", 1)[1] for block in docs.split("```yaml")[1:] if "name: gpu-cap" in block)
    (tmp_path / "gpu.yaml").write_text(example.split("```")[0], encoding="utf-8")
    result = _run(str(tmp_path))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "1 policies, 2 tests" in result.stdout
