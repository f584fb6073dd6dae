"""Where `gitopsq controller` keeps the Job webhook certificates it generates when no directory is given."""

from __future__ import annotations

import os
import signal
import ssl
import subprocess
import sys
from pathlib import Path

import pytest
from controller_process import free_port, wait_for
from cryptography import x509
from envtest_rig import Envtest

from gitopsq.webhook.certs import default_cert_dir

HOME = Path.home()


@pytest.mark.parametrize(("cache_dir", "env", "expected"), [
    pytest.param("/var/cache/gq", {"GITOPSQ_CACHE_DIR": "/c", "XDG_CACHE_HOME": "/x"}, "/var/cache/gq/webhook-certs",
                 id="cache-dir-flag-wins"),
    pytest.param(None, {"GITOPSQ_CACHE_DIR": "/c", "XDG_CACHE_HOME": "/x"}, "/c/webhook-certs",
                 id="then-GITOPSQ_CACHE_DIR"),
    pytest.param(None, {"XDG_CACHE_HOME": "/x"}, "/x/gitopsq/webhook-certs", id="then-XDG_CACHE_HOME"),
    pytest.param(None, {"XDG_CACHE_HOME": ""}, str(HOME / ".cache/gitopsq/webhook-certs"),
                 id="empty-XDG-means-unset"),
    pytest.param(None, {}, str(HOME / ".cache/gitopsq/webhook-certs"), id="else-the-home-cache"),
])
def test_default_cert_dir(cache_dir: str | None, env: dict[str, str], expected: str) -> None:
    """Without --webhook-cert-dir certificates go to a per-user cache directory, never the working directory."""
    assert default_cert_dir(Path(cache_dir) if cache_dir else None, env) == Path(expected)


@pytest.mark.envtest
def test_generated_certificates_go_to_the_user_cache_not_the_working_directory(kueue_clean: Envtest,
                                                                               tmp_path: Path) -> None:
    """A controller started with --webhook-addr and neither --webhook-cert-dir nor --cache-dir writes its CA and
    serving certificate under $XDG_CACHE_HOME/gitopsq/webhook-certs (mode 0700) and serves that certificate."""
    work, cache = tmp_path / "work", tmp_path / "xdg"
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "GITOPSQ_CACHE_DIR"}
    env.update(XDG_CACHE_HOME=str(cache), PYTHONPATH=str(Path(__file__).resolve().parents[2]))
    port = free_port()
    argv = ["controller", "--admission-only", "--no-leader-elect", "--kubeconfig", str(kueue_clean.kubeconfig),
            "--health-addr", f"127.0.0.1:{free_port()}", "--metrics-addr", "", "--webhook-addr",
            f"127.0.0.1:{port}", "--log-format", "json"]
    with (tmp_path / "controller.log").open("wb") as log:
        proc = subprocess.Popen([sys.executable, "-m", "gitopsq", *argv], cwd=work, env=env, stdout=log,
                                stderr=subprocess.STDOUT)
    try:
        certs = cache / "gitopsq" / "webhook-certs"

        def served() -> str | None:
            try:
                return ssl.get_server_certificate(("127.0.0.1", port), timeout=2)
            except OSError:
                return None

        pem = wait_for(served, message="the webhook serving TLS")
        assert x509.load_pem_x509_certificate(pem.encode()) == \
            x509.load_pem_x509_certificate((certs / "tls.crt").read_bytes())
        assert (certs / "tls.key").stat().st_mode & 0o777 == 0o600
        assert certs.stat().st_mode & 0o777 == 0o700
        assert list(work.iterdir()) == []
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            code = proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            raise
    assert code == 0, (tmp_path / "controller.log").read_text()
