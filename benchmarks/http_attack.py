"""The controller's HTTP endpoints under attack while the API server calls its Job webhook (loopback only).

Run: .venv/bin/python benchmarks/http_attack.py [--idle 15] [--rate 10] [--slow 500] [--bodies 20]
     [--malformed 2000] [--replays 10000]

The rig is the basic one (kube-apiserver and etcd, docs/envtest.md) with gitopsq's CRDs. gitopsq runs as its own
process, as the chart runs it: ``gitopsq controller`` with the sync loop on a local repository, the push webhook
(``--webhook-secret-file``), the Job webhook on 127.0.0.1 over TLS, no leader election. A Mutating and a
Validating WebhookConfiguration point the API server at it for one labelled namespace, where a client creates
queued Jobs at ``--rate`` per second; each creation passes through both webhooks. A second client POSTs
AdmissionReviews straight to the webhook, a new TLS connection each, at the same rate.

First ``--idle`` seconds without attack, then the attack, all at once and bounded in count:
``--slow`` connections to the Job webhook that finish the TLS handshake and then send a header line every 2 s
(reopened when the server closes them); for each bad Content-Length (negative, not a number, missing, smaller
than the body, larger than the limit) ``--bodies`` concurrent requests to ``/hooks/git`` that each try to send
100 MB; ``--malformed`` connections with a malformed request line, half to each port; ``--replays`` signed
copies of one push delivery (one delivery id) from 8 keep-alive clients.

Prints: p50/p99 of both latencies idle, under attack and under attack after its first 3 s (when the slow
connections' TLS handshakes are done), the controller's peak RSS (VmHWM), connections answered
503 or refused, Job creations lost (refused or not suspended by the webhook), syncs the replays triggered,
tracebacks in the controller's output.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import hmac
import http.client
import json
import os
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "hack" / "envtest"))

from envtestrig import Rig, prepare  # noqa: E402

from gitopsq.cluster.apply import KubeRest  # noqa: E402
from gitopsq.cluster.crds import install_crds  # noqa: E402
from gitopsq.cluster.kube import load_api_client  # noqa: E402
from gitopsq.errors import ClusterError  # noqa: E402
from gitopsq.webhook.certs import MUTATE_PATH, ensure_certificates, webhook_configurations  # noqa: E402

NS = "http-attack"
SECRET = b"bench-secret"
BODY = 100 << 20
LENGTHS = {"negative": "-1", "not-a-number": "abc", "missing": None, "too-small": "10", "too-large": str(BODY)}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


class Tally:
    """Counts shared by the attack threads."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.counts: Counter[str] = Counter()

    def add(self, key: str, n: int = 1) -> None:
        with self.lock:
            self.counts[key] += n


def status_of(data: bytes) -> str:
    return data.split(b" ", 2)[1].decode() if data.startswith(b"HTTP/1.") else "closed"


# -- what the API server and a direct client measure ------------------------------------------------------------

def job(name: str) -> dict[str, Any]:
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "namespace": NS, "labels": {"kueue.x-k8s.io/queue-name": "main"}},
            "spec": {"template": {"spec": {"restartPolicy": "Never",
                                           "containers": [{"name": "c", "image": "busybox"}]}}}}


def create_jobs(rest: KubeRest, rate: float, stop: threading.Event, out: list[tuple[float, float, bool]]) -> None:
    """Create queued Jobs at ``rate`` per second: (start, seconds, suspended by the webhook) each; -1 s: lost."""
    i = 0
    while not stop.is_set():
        i += 1
        started = time.monotonic()
        try:
            created = rest.request("POST", f"/apis/batch/v1/namespaces/{NS}/jobs", body=job(f"j-{os.getpid()}-{i}"),
                                   retry=False)
            out.append((started, time.monotonic() - started, created["spec"].get("suspend") is True))
        except ClusterError:
            out.append((started, -1.0, False))
        stop.wait(max(0.0, 1 / rate - (time.monotonic() - started)))


def review_directly(port: int, ca: bytes, rate: float, stop: threading.Event,
                    out: list[tuple[float, float, bool]]) -> None:
    context = ssl.create_default_context(cadata=ca.decode())
    review = json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": "probe", "operation": "CREATE", "kind": {"group": "batch", "kind": "Job"},
        "object": job("probe")}}).encode()
    while not stop.is_set():
        started = time.monotonic()
        try:
            conn = http.client.HTTPSConnection("127.0.0.1", port, context=context, timeout=10)
            conn.request("POST", MUTATE_PATH, review, {"Content-Type": "application/json"})
            answer = conn.getresponse()
            ok = answer.status == 200 and json.loads(answer.read())["response"]["allowed"] is True
            conn.close()
            out.append((started, time.monotonic() - started, ok))
        except (OSError, ValueError, http.client.HTTPException):
            out.append((started, -1.0, False))
        stop.wait(max(0.0, 1 / rate - (time.monotonic() - started)))


# -- the attacks --------------------------------------------------------------------------------------------------

def slow_headers(port: int, count: int, stop: threading.Event, tally: Tally) -> None:
    """``count`` TLS connections that never finish their headers; one closed by the server is opened again."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
    slots: list[ssl.SSLSocket | None] = [None] * count
    while not stop.is_set():
        for i, held in enumerate(slots):
            if stop.is_set():
                break
            sock = held
            try:
                if sock is None:
                    raw = socket.create_connection(("127.0.0.1", port), timeout=5)
                    sock = slots[i] = context.wrap_socket(raw, server_hostname="localhost")
                    sock.sendall(f"POST {MUTATE_PATH} HTTP/1.1\r\nHost: localhost\r\n".encode())
                    tally.add("slow opened")
                else:
                    sock.sendall(b"X-Slow: 1\r\n")
                sock.settimeout(0.001)
                with contextlib.suppress(TimeoutError, ssl.SSLWantReadError):
                    data = sock.recv(64)
                    if data.startswith(b"HTTP/1.1 503"):
                        tally.add("slow answered 503")
                    raise OSError("closed")
                sock.settimeout(5)
            except OSError as err:
                tally.add("slow refused" if isinstance(err, ConnectionRefusedError) else "slow closed by server")
                if sock is not None:
                    sock.close()
                slots[i] = None
        stop.wait(2.0)
    for sock in slots:
        if sock is not None:
            sock.close()


def big_body(port: int, length: str | None, tally: Tally, variant: str) -> None:
    head = b"POST /hooks/git HTTP/1.1\r\nHost: gitopsq\r\nX-Hub-Signature-256: sha256=00\r\n"
    if length is not None:
        head += f"Content-Length: {length}\r\n".encode()
    chunk, sent = b"x" * (1 << 20), 0
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
            sock.sendall(head + b"\r\n")
            with contextlib.suppress(OSError):
                while sent < BODY:
                    sock.sendall(chunk)
                    sent += len(chunk)
                sock.shutdown(socket.SHUT_WR)
            answer = b""
            with contextlib.suppress(OSError):
                answer = sock.recv(256)
    except OSError:
        answer = b""
    tally.add(f"body {variant}: {status_of(answer)}")
    tally.add(f"body {variant}: MiB sent before the server stopped taking it (all requests)", sent >> 20)


def malformed(port: int, tls: bool, i: int, tally: Tally) -> None:
    lines = [b"GARBAGE\r\n\r\n", b"GET /healthz HTTP/9.9\r\n\r\n", b"GET " + b"/" * 20000 + b" HTTP/1.1\r\n\r\n",
             b"\x00\x01\x02\r\n\r\n", b"POST /hooks/git HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n"]
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
            sock: socket.socket = raw
            if tls:
                context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
                context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
                sock = context.wrap_socket(raw, server_hostname="localhost")
            sock.sendall(lines[i % len(lines)])
            tally.add(f"malformed: {status_of(sock.recv(256))}")
    except OSError:
        tally.add("malformed: closed")


def replays(port: int, total: int, tally: Tally) -> None:
    body = json.dumps({"ref": "refs/heads/main"}).encode()
    headers = {"Content-Type": "application/json", "X-GitHub-Event": "push", "X-GitHub-Delivery": "replayed-1",
               "X-Hub-Signature-256": "sha256=" + hmac.new(SECRET, body, hashlib.sha256).hexdigest()}

    def client(n: int) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        for _ in range(n):
            try:
                conn.request("POST", "/hooks/git", body, headers)
                answer = conn.getresponse()
                answer.read()
                tally.add(f"replay: {answer.status}")
            except (OSError, http.client.HTTPException):
                tally.add("replay: error")
                conn.close()
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        conn.close()

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(client, [total // 8] * 8))


# -- the run ---------------------------------------------------------------------------------------------------------

def git_repo(path: Path) -> None:
    path.mkdir()
    (path / "README.md").write_text("queues\n")
    for argv in (["init", "-q", "-b", "main"], ["add", "."], ["-c", "user.name=bench", "-c", "user.email=b@b",
                                                            "commit", "-qm", "queues"]):
        subprocess.run(["git", *argv], cwd=path, check=True)


def peak_rss(pid: int, field: str = "VmHWM") -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) << 10
    return 0


def resident(pid: int) -> int:
    return peak_rss(pid, "VmRSS")


def cpu_seconds(pid: int) -> float:
    """User and system CPU seconds of process ``pid`` so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def summary(samples: list[tuple[float, float, bool]], since: float, until: float) -> tuple[str, int]:
    chosen = [s for s in samples if since <= s[0] < until]
    ok = [1000 * s[1] for s in chosen if s[1] >= 0 and s[2]]
    lost = len(chosen) - len(ok)
    return f"{len(chosen)} requests, p50 {percentile(ok, 0.5):.1f} ms, p99 {percentile(ok, 0.99):.1f} ms", lost


def run(args: argparse.Namespace, tmp: Path) -> int:
    rig = Rig.start(prepare(log=False), tmp / "rig")
    controller: subprocess.Popen[bytes] | None = None
    stop_probes, stop_slow = threading.Event(), threading.Event()
    try:
        api = load_api_client(str(rig.kubeconfig))
        install_crds(api)
        rest = KubeRest(api)
        rest.request("POST", "/api/v1/namespaces", body={"apiVersion": "v1", "kind": "Namespace",
                                                         "metadata": {"name": NS, "labels": {"http-attack": "on"}}})
        certs = ensure_certificates(tmp / "certs", ["127.0.0.1", "localhost"])
        git_repo(tmp / "queues")
        (tmp / "secret").write_bytes(SECRET)
        health, hook, log = free_port(), free_port(), tmp / "controller.log"
        argv = [sys.executable, "-m", "gitopsq", "controller", "--repo", str(tmp / "queues"), "--interval", "1h",
                "--drift-interval", "1h", "--kubeconfig", str(rig.kubeconfig), "--no-leader-elect",
                "--health-addr", f"127.0.0.1:{health}", "--metrics-addr", "", "--webhook-addr",
                f"127.0.0.1:{hook}", "--webhook-cert-dir", str(tmp / "certs"), "--webhook-secret-file",
                str(tmp / "secret"), "--log-format", "json"]
        with log.open("wb") as out:
            controller = subprocess.Popen(argv, cwd=REPO, stdout=out, stderr=subprocess.STDOUT)
        for config in webhook_configurations(certs.ca_pem, url=f"https://127.0.0.1:{hook}", name="http-attack",
                                             namespace_selector={"matchLabels": {"http-attack": "on"}}):
            rest.request("POST", f"/apis/admissionregistration.k8s.io/v1/{config['kind'].lower()}s", body=config)
        deadline = time.monotonic() + 60
        while True:  # until a Job comes back suspended: the controller serves and the API server calls it
            try:
                created = rest.request("POST", f"/apis/batch/v1/namespaces/{NS}/jobs",
                                       body=job(f"warm-{time.time_ns()}"), retry=False)
                if created["spec"].get("suspend") is True:
                    break
            except ClusterError:
                pass
            if time.monotonic() > deadline:
                raise SystemExit("the webhook did not come up: see " + str(log))
            time.sleep(0.5)
        creations: list[tuple[float, float, bool]] = []
        direct: list[tuple[float, float, bool]] = []
        probes = [threading.Thread(target=create_jobs, args=(rest, args.rate, stop_probes, creations)),
                  threading.Thread(target=review_directly, args=(hook, certs.ca_pem, args.rate, stop_probes, direct))]
        for t in probes:
            t.start()
        idle_from, idle_cpu = time.monotonic(), cpu_seconds(controller.pid)
        time.sleep(args.idle)
        idle_rss = resident(controller.pid)
        attack_cpu, own_cpu = cpu_seconds(controller.pid), time.process_time()
        attack_from = time.monotonic()
        tally = Tally()
        slow = threading.Thread(target=slow_headers, args=(hook, args.slow, stop_slow, tally))
        slow.start()
        jobs: list[Callable[[], None]] = []
        for variant, length in LENGTHS.items():
            jobs += [lambda v=variant, n=length: big_body(health, n, tally, v)] * args.bodies
        jobs += [lambda i=i: malformed(hook if i % 2 else health, bool(i % 2), i, tally) for i in range(args.malformed)]
        with ThreadPoolExecutor(24) as pool:
            replaying = pool.submit(replays, health, args.replays, tally)
            list(pool.map(lambda f: f(), jobs))
            replaying.result()
        time.sleep(max(0.0, args.idle - (time.monotonic() - attack_from)))  # at least as long as the idle phase
        stop_slow.set()
        slow.join(30)
        attack_to, done_cpu, own_done = time.monotonic(), cpu_seconds(controller.pid), time.process_time()
        stop_probes.set()
        for t in probes:
            t.join(30)
        rss = peak_rss(controller.pid)
        controller.send_signal(signal.SIGTERM)
        controller.wait(60)
        text = log.read_text(errors="replace")
        triggered = sum(1 for line in text.splitlines() if '"sync triggered"' in line and "webhook" in line)
        print(f"machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f} at the end")
        for name, samples in (("Job creations through the API server (mutating + validating webhook)", creations),
                              ("AdmissionReviews POSTed directly (new TLS connection each)", direct)):
            idle, idle_lost = summary(samples, idle_from, attack_from)
            attacked, attack_lost = summary(samples, attack_from, attack_to)
            steady, _ = summary(samples, attack_from + 3, attack_to)
            print(f"{name}:\n  idle:   {idle}, lost {idle_lost}\n  attack: {attacked}, lost {attack_lost}\n"
                  f"  attack after its first 3 s (the 500 TLS handshakes done): {steady}")
        print(f"attack: {attack_to - attack_from:.1f} s; controller RSS before it {idle_rss / (1 << 20):.0f} MiB, "
              f"peak RSS {rss / (1 << 20):.0f} MiB")
        print(f"controller CPU: idle {(attack_cpu - idle_cpu) / (attack_from - idle_from):.2f} cores, under attack "
              f"{(done_cpu - attack_cpu) / (attack_to - attack_from):.2f} cores; the attacking clients "
              f"{(own_done - own_cpu) / (attack_to - attack_from):.2f} cores")
        for key in sorted(tally.counts):
            print(f"  {key}: {tally.counts[key]}")
        refused = sum(v for k, v in tally.counts.items() if k.endswith((": 503", "503", "refused")))
        print(f"connections answered 503 or refused: {refused}")
        print(f"syncs triggered by {args.replays} copies of one delivery: {triggered}")
        print(f"tracebacks in the controller's output: {text.count('Traceback')}")
        return 0
    finally:
        stop_slow.set()
        stop_probes.set()
        if controller is not None and controller.poll() is None:
            controller.kill()
        rig.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--idle", type=float, default=15.0, help="seconds measured before the attack")
    parser.add_argument("--rate", type=float, default=10.0, help="Job creations (and direct reviews) per second")
    parser.add_argument("--slow", type=int, default=500, help="slow-header connections held open")
    parser.add_argument("--bodies", type=int, default=20, help="concurrent 100 MB bodies per bad Content-Length")
    parser.add_argument("--malformed", type=int, default=2000, help="connections with a malformed request")
    parser.add_argument("--replays", type=int, default=10_000, help="copies of one signed push delivery")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="gitopsq-http-attack-") as tmp:
        return run(args, Path(tmp))


if __name__ == "__main__":
    raise SystemExit(main())
