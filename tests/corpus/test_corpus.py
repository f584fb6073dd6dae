"""Every broken repository of the corpus: `gitopsq check` exits 1 and prints the expected finding at file:line."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from gitopsq.cli import main

from . import harness


def run_check(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exited:
        main(["check", *args])
    out, err = capsys.readouterr()
    return int(exited.value.code or 0), out, err


@pytest.fixture(autouse=True)
def _private_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GITOPSQ_CACHE_DIR", str(tmp_path / "cache"))


def test_corpus_is_large_enough() -> None:
    """The corpus keeps at least the 25 broken repositories issue 2 asks for, each with an expected finding."""
    cases = harness.cases()
    assert len(cases) >= 25
    assert all(harness.expectation(c).get("findings") for c in cases)


@pytest.mark.parametrize("case", harness.cases())
def test_check_reports_the_expected_finding(case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`gitopsq check` on the case's Git repository exits 1, names file and line, and says what is wrong."""
    repo = harness.build(case, tmp_path / "repo")
    started = time.monotonic()
    code, out, err = run_check(capsys, str(repo), "--rev", "main")
    assert time.monotonic() - started < 20, "sanity guard against a hang, not a performance assertion"
    assert code == 1, out + err
    assert "Traceback" not in out + err
    lines = out.splitlines()
    for want in harness.expectation(case)["findings"]:
        where = f"{want['file']}:{want['line']}: error: " if want["line"] else f"{want['file']}: error: "
        matching = [line for line in lines if line.startswith(where) and f"[{want['code']}]" in line]
        assert matching, f"no {where}… [{want['code']}] in:\n{out}"
        assert any(want["message"] in line for line in matching), f"{want['message']!r} not in {matching}"
    assert lines[-1].startswith("✗ "), "the summary line closes the output"


@pytest.mark.parametrize("case", ["duplicate-keys", "cohort-cycle", "config-unknown-key"])
def test_json_output_carries_the_same_finding(case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`--output json` reports the same code, path and line as the text output, and ok=false."""
    repo = harness.build(case, tmp_path / "repo")
    code, out, _ = run_check(capsys, str(repo), "--output", "json")
    assert code == 1
    data = json.loads(out)
    want = harness.expectation(case)["findings"][0]
    assert data["ok"] is False
    assert {"code": want["code"], "path": want["file"], "line": want["line"]} in [
        {"code": f["code"], "path": f["path"], "line": f["line"]} for f in data["findings"]]
