"""Module-level structlog loggers follow the configuration and the stream in force when they write."""

from __future__ import annotations

import json

import click
import pytest
from click.testing import CliRunner

from gitopsq import logs

_log = logs.get("leader")  # module-level, as in gitopsq's modules


@click.command()
@click.option("--level", default="info")
def _configure_and_log(level: str) -> None:
    """Configure as the CLI does, under the runner's stand-in stderr, and log once from a module-level logger."""
    logs.configure(json=True, level=level)
    _log.info("inside the runner")


def test_module_logger_survives_a_closed_runner_stream(capsys: pytest.CaptureFixture[str]) -> None:
    """After a CliRunner configured logging and closed its stream, a module-level logger writes to today's stderr."""
    result = CliRunner().invoke(_configure_and_log, [])
    assert result.exit_code == 0, result.output
    _log.info("after the runner", lease="demo")  # went to the runner's stale stream when cached
    line = json.loads(capsys.readouterr().err.strip().splitlines()[-1])
    assert line["event"] == "after the runner"
    assert line["component"] == "leader"
    assert line["lease"] == "demo"


def test_module_logger_follows_a_later_configure(capsys: pytest.CaptureFixture[str]) -> None:
    """A logger already used keeps no stale level: a later `configure` at warning silences its info lines."""
    logs.configure(json=True, level="info")
    _log.info("first")
    assert "first" in capsys.readouterr().err
    logs.configure(json=True, level="warning")
    _log.info("second")
    _log.warning("third")
    err = capsys.readouterr().err
    assert "second" not in err
    assert json.loads(err.strip())["event"] == "third"


def test_secrets_are_redacted(capsys: pytest.CaptureFixture[str]) -> None:
    """A key that looks like a credential is logged as [redacted], whatever its value."""
    logs.configure(json=True)
    logs.get("test").info("login", api_token="s3cret")
    assert json.loads(capsys.readouterr().err.strip())["api_token"] == "[redacted]"
