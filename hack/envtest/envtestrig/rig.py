"""One rig: etcd and kube-apiserver on loopback, their credentials, a kubeconfig, and the PIDs we started.
The full profile adds kube-controller-manager, kube-scheduler and KWOK (fake nodes and pod lifecycles).

Everything lives in one work directory with a ``state.json`` so that a later process (``scripts/envtest
down``) can stop exactly the processes this rig started, after checking each PID still runs our command.
"""

from __future__ import annotations

import json
import os
import shutil
import ssl
import subprocess
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import asdict, dataclass
from pathlib import Path

from envtestrig import pki
from envtestrig.build import KWOK_DIR, Binaries
from envtestrig.kubeconfig import write_kubeconfig
from envtestrig.processes import alive, cmdline, free_port, listens_on, stop_pid

READY_TIMEOUT_SECONDS = 90.0
START_ATTEMPTS = 3
FAKE_NODE_ANNOTATION = "kwok.x-k8s.io/node"  # KWOK plays every Node annotated with it set to "fake"
KWOK_STAGES = KWOK_DIR / "stages.yaml"
POD_CIDR = "10.244.0.0/16"
# the controllers a Job, its pods and a namespace's life need (docs/envtest.md "Full profile")
CONTROLLERS = (
    "job-controller",
    "garbage-collector-controller",
    "pod-garbage-collector-controller",
    "serviceaccount-controller",
    "serviceaccount-token-controller",
    "root-ca-certificate-publisher-controller",
    "namespace-controller",
    "ttl-after-finished-controller",
    "replicaset-controller",
    "deployment-controller",
)
# each full-profile component and the RigState field holding its PID
COMPONENTS = {
    "kube-controller-manager": "controller_manager_pid",
    "kube-scheduler": "scheduler_pid",
    "kwok": "kwok_pid",
}


class RigError(RuntimeError):
    """The rig could not start, become ready or stop."""


@dataclass(frozen=True, slots=True)
class RigState:
    """What ``state.json`` records: enough to reconnect to or stop a running rig."""

    workdir: str
    etcd_data: str
    etcd_port: int
    etcd_peer_port: int
    apiserver_port: int
    etcd_pid: int
    apiserver_pid: int
    kubernetes_version: str
    profile: str = "bare"  # "full" adds the three components below
    controller_manager_port: int = 0
    scheduler_port: int = 0
    kwok_port: int = 0
    controller_manager_pid: int = 0
    scheduler_pid: int = 0
    kwok_pid: int = 0
    jobset_port: int = 0  # the JobSet controller's health probe (0: not started)
    jobset_webhook_port: int = 0
    jobset_pid: int = 0
    trainer_port: int = 0  # the Trainer controller manager's health probe (0: not started)
    trainer_pid: int = 0
    kuberay_port: int = 0  # the KubeRay operator's health probe (0: not started)
    kuberay_pid: int = 0


def _fresh_state(root: Path, version: str, full: bool) -> RigState:
    shm = Path("/dev/shm")  # tmpfs: etcd's fsyncs cost nothing there
    data_parent = shm if shm.is_dir() and os.access(shm, os.W_OK) else root
    etcd_data = tempfile.mkdtemp(prefix=f"gitopsq-envtest-etcd-{root.name}-", dir=data_parent)
    return RigState(
        workdir=str(root),
        etcd_data=etcd_data,
        etcd_port=free_port(),
        etcd_peer_port=free_port(),
        apiserver_port=free_port(),
        etcd_pid=0,
        apiserver_pid=0,
        kubernetes_version=version,
        profile="full" if full else "bare",
        controller_manager_port=free_port() if full else 0,
        scheduler_port=free_port() if full else 0,
        kwok_port=free_port() if full else 0,
    )


class Rig:
    """A running (or stopped) rig rooted at ``workdir``."""

    def __init__(self, state: RigState) -> None:
        self.state = state
        self.workdir = Path(state.workdir)
        self.pki_dir = self.workdir / "pki"
        self.kubeconfig = self.workdir / "kubeconfig"
        self.api_url = f"https://127.0.0.1:{state.apiserver_port}"

    # ---- starting -------------------------------------------------------------------------------------

    @property
    def full(self) -> bool:
        return self.state.profile == "full"

    @classmethod
    def start(cls, binaries: Binaries, workdir: Path | None = None, full: bool = False, jobset: bool = True,
              kuberay: bool = True) -> Rig:
        """Start etcd and kube-apiserver on free loopback ports; return once /readyz answers ok.

        ``full`` also starts kube-controller-manager, kube-scheduler and KWOK (``binaries`` must come from
        ``prepare(full=True)``) and returns once each answers its health check; and, unless ``jobset`` is
        False (a test that installs it later, `install_jobset`), the JobSet CRD and controller and the Kubeflow
        Trainer CRDs and controller manager (`install_trainer`); likewise ``kuberay``: the Ray CRDs and the KubeRay
        operator (`install_kuberay`).
        """
        if full and not binaries.full:
            raise RigError("the full profile needs the controller-manager, scheduler and kwok: prepare(full=True)")
        root = Path(workdir) if workdir else Path(tempfile.mkdtemp(prefix="gitopsq-envtest-"))
        root.mkdir(parents=True, exist_ok=True)
        (root / "logs").mkdir(exist_ok=True)
        credentials = pki.generate(root / "pki")
        tokens = root / "tokens.json"
        tokens.write_text(json.dumps({"admin": credentials.admin_token, "nobody": credentials.nobody_token}))
        tokens.chmod(0o600)
        for attempt in range(1, START_ATTEMPTS + 1):
            rig = cls(_fresh_state(root, binaries.kubernetes_version, full))
            rig._binaries = binaries
            try:
                rig._start_etcd()
                rig._start_apiserver()
                write_kubeconfig(rig.kubeconfig, rig.api_url, credentials)
                if full:
                    rig._start_components()
                    if jobset and binaries.jobset is not None:
                        rig.install_jobset()
                        if binaries.trainer is not None:
                            rig.install_trainer()
                    if kuberay and binaries.kuberay is not None:
                        rig.install_kuberay()
                return rig
            except RigError as err:
                rig.stop()
                # another process may grab a port between free_port() and the bind: try fresh ports
                if "address already in use" not in str(err) or attempt == START_ATTEMPTS:
                    raise
            except BaseException:
                rig.stop()
                raise
        raise AssertionError("unreachable")

    @classmethod
    def load(cls, workdir: Path) -> Rig:
        """Reconnect to a rig started by another process (for ``down``, ``env``, ``status``)."""
        state_file = Path(workdir) / "state.json"
        if not state_file.exists():
            raise RigError(f"no rig state in {workdir}")
        return cls(RigState(**json.loads(state_file.read_text())))

    _binaries: Binaries | None = None

    def _save(self) -> None:
        (self.workdir / "state.json").write_text(json.dumps(asdict(self.state), indent=2) + "\n")

    def _replace_state(self, **changes: object) -> None:
        self.state = RigState(**{**asdict(self.state), **changes})
        self._save()

    def _spawn(self, argv: list[str], log_name: str, env: dict[str, str] | None = None) -> int:
        log = (self.workdir / "logs" / log_name).open("ab")
        try:
            process = subprocess.Popen(
                argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, start_new_session=True, env=env
            )
        finally:
            log.close()
        return process.pid

    def _start_etcd(self) -> None:
        assert self._binaries is not None
        s = self.state
        client = f"http://127.0.0.1:{s.etcd_port}"
        peer = f"http://127.0.0.1:{s.etcd_peer_port}"
        argv = [
            str(self._binaries.etcd), "--name", "envtest", "--data-dir", s.etcd_data,
            "--listen-client-urls", client, "--advertise-client-urls", client,
            "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
            "--initial-cluster", f"envtest={peer}", "--initial-cluster-state", "new",
            "--log-level", "warn", "--logger", "zap", "--quota-backend-bytes", str(4 << 30),
        ]  # fmt: skip
        self._replace_state(etcd_pid=self._spawn(argv, "etcd.log"))
        self._wait_http(f"{client}/health", pid=self.state.etcd_pid, log_name="etcd.log", context=None)

    def apiserver_argv(self) -> list[str]:
        assert self._binaries is not None
        s, p = self.state, self.pki_dir
        return [
            str(self._binaries.kube_apiserver),
            f"--etcd-servers=http://127.0.0.1:{s.etcd_port}",
            "--bind-address=127.0.0.1", "--advertise-address=127.0.0.1", f"--secure-port={s.apiserver_port}",
            f"--cert-dir={self.workdir / 'apiserver-certs'}",
            f"--tls-cert-file={p / 'apiserver.crt'}", f"--tls-private-key-file={p / 'apiserver.key'}",
            f"--client-ca-file={p / 'client-ca.crt'}", f"--token-auth-file={p / 'tokens.csv'}",
            "--authorization-mode=RBAC",
            f"--service-account-key-file={p / 'service-account.key'}",
            f"--service-account-signing-key-file={p / 'service-account.key'}",
            "--service-account-issuer=https://kubernetes.default.svc",
            "--service-cluster-ip-range=10.0.0.0/24",
            # bare: no controller-manager creates default service accounts, so pods would be refused.
            # full: no node-lifecycle controller lifts the not-ready taint this plugin puts on every new Node
            f"--disable-admission-plugins={'TaintNodesByCondition' if self.full else 'ServiceAccount'}",
            # full: Debian's etcd 3.4 has no watch progress requests, so with WatchList on, every watch from
            # resourceVersion 0 (KWOK's) is turned into a watch-list and refused: KWOK would only see re-lists
            *(["--feature-gates=WatchList=false"] if self.full else []),
            "--allow-privileged=true", "--profiling=false", "--v=1",
        ]  # fmt: skip

    def _start_apiserver(self) -> None:
        self._replace_state(apiserver_pid=self._spawn(self.apiserver_argv(), "kube-apiserver.log"))
        self.wait_ready()

    # ---- the full profile's components -----------------------------------------------------------------

    def component_argv(self, name: str) -> list[str]:
        """Command line of one full-profile component; each names this rig's kubeconfig (``down`` checks it)."""
        assert self._binaries is not None
        s, p, kubeconfig = self.state, self.pki_dir, str(self.kubeconfig)
        if name == "kube-controller-manager":
            return [
                str(self._binaries.kube_controller_manager), f"--kubeconfig={kubeconfig}", "--leader-elect=false",
                f"--controllers={','.join(CONTROLLERS)}",
                f"--service-account-private-key-file={p / 'service-account.key'}",
                f"--root-ca-file={p / 'serving-ca.crt'}", "--use-service-account-credentials=false",
                "--bind-address=127.0.0.1", f"--secure-port={s.controller_manager_port}",
                f"--cert-dir={self.workdir / 'controller-manager-certs'}",
                # upstream's default, stated because tests rely on it: finished pods stay readable
                "--terminated-pod-gc-threshold=12500", "--profiling=false", "--v=1",
            ]  # fmt: skip
        if name == "kube-scheduler":
            return [
                str(self._binaries.kube_scheduler), f"--kubeconfig={kubeconfig}", "--leader-elect=false",
                "--bind-address=127.0.0.1", f"--secure-port={s.scheduler_port}",
                f"--cert-dir={self.workdir / 'scheduler-certs'}", "--profiling=false", "--v=1",
            ]  # fmt: skip
        if name == "kwok":
            return [
                str(self._binaries.kwok), f"--kubeconfig={kubeconfig}", f"--config={KWOK_STAGES}",
                "--manage-all-nodes=false", f"--manage-nodes-with-annotation-selector={FAKE_NODE_ANNOTATION}=fake",
                f"--cidr={POD_CIDR}", "--node-ip=10.0.0.1", "--node-lease-duration-seconds=40",
                f"--server-address=127.0.0.1:{s.kwok_port}",
            ]  # fmt: skip
        raise RigError(f"unknown component {name}")

    def _start_components(self) -> None:
        """Spawn all three at once (they wait for the API themselves), then wait for each health check."""
        # and no client asks for watch-lists either (see the WatchList gate in apiserver_argv)
        env = {**os.environ, "KUBE_FEATURE_WatchListClient": "false"}
        for name, field in COMPONENTS.items():
            self._replace_state(**{field: self._spawn(self.component_argv(name), f"{name}.log", env)})
        insecure = ssl.create_default_context()
        insecure.check_hostname = False
        insecure.verify_mode = ssl.CERT_NONE  # self-signed serving certificates made by the components
        s = self.state
        self._wait_http(f"https://127.0.0.1:{s.controller_manager_port}/healthz", pid=s.controller_manager_pid,
                        log_name="kube-controller-manager.log", context=insecure)  # fmt: skip
        self._wait_http(f"https://127.0.0.1:{s.scheduler_port}/healthz", pid=s.scheduler_pid,
                        log_name="kube-scheduler.log", context=insecure)  # fmt: skip
        self._wait_http(f"http://127.0.0.1:{s.kwok_port}/healthz", pid=s.kwok_pid, log_name="kwok.log", context=None)

    def _component_pids(self) -> dict[str, int]:
        recorded = asdict(self.state)
        pids = {name: int(recorded[field]) for name, field in COMPONENTS.items()}
        if self.state.jobset_pid:
            pids["jobset"] = self.state.jobset_pid
        if self.state.trainer_pid:
            pids["trainer"] = self.state.trainer_pid
        if self.state.kuberay_pid:
            pids["kuberay"] = self.state.kuberay_pid
        return pids

    def install_jobset(self) -> None:
        """The JobSet CRD and controller on this rig (operators.py)."""
        from envtestrig.operators import install_jobset

        install_jobset(self)

    def install_trainer(self) -> None:
        """The Kubeflow Trainer CRDs and controller manager on this rig (trainer.py); JobSet must run already."""
        from envtestrig.trainer import install_trainer

        install_trainer(self)

    def install_kuberay(self) -> None:
        """The Ray CRDs and the KubeRay operator on this rig (kuberay.py)."""
        from envtestrig.kuberay import install_kuberay

        install_kuberay(self)

    # ---- health ---------------------------------------------------------------------------------------

    def ssl_context(self) -> ssl.SSLContext:
        return ssl.create_default_context(cafile=str(self.pki_dir / "serving-ca.crt"))

    def admin_token(self) -> str:
        tokens: dict[str, str] = json.loads((self.workdir / "tokens.json").read_text())
        return tokens["admin"]

    def nobody_token(self) -> str:
        tokens: dict[str, str] = json.loads((self.workdir / "tokens.json").read_text())
        return tokens["nobody"]

    def wait_ready(self, timeout: float = READY_TIMEOUT_SECONDS) -> None:
        self._wait_http(
            f"{self.api_url}/readyz", pid=self.state.apiserver_pid, log_name="kube-apiserver.log",
            context=self.ssl_context(), token=self.admin_token(), timeout=timeout,
        )  # fmt: skip

    def _wait_http(
        self,
        url: str,
        *,
        pid: int,
        log_name: str,
        context: ssl.SSLContext | None,
        token: str | None = None,
        timeout: float = READY_TIMEOUT_SECONDS,
    ) -> None:
        deadline = time.monotonic() + timeout
        last = "no answer"
        while time.monotonic() < deadline:
            if not alive(pid):
                raise RigError(f"{log_name.removesuffix('.log')} exited during start-up:\n{self.log_tail(log_name)}")
            request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"} if token else {})
            try:
                with urllib.request.urlopen(request, timeout=2, context=context) as answer:
                    # the answer must come from our process, not from another one already on that port
                    if answer.status == 200 and listens_on(pid, int(urllib.parse.urlsplit(url).port or 0)):
                        return
                    last = f"HTTP {answer.status}, or the port belongs to another process"
            except (urllib.error.URLError, OSError) as err:
                last = str(err)
            time.sleep(0.1)
        raise RigError(f"{url} not ready after {timeout:.0f}s ({last}):\n{self.log_tail(log_name)}")

    def log_tail(self, log_name: str, lines: int = 25) -> str:
        path = self.workdir / "logs" / log_name
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:]) if path.exists() else ""

    def pids(self) -> dict[str, int]:
        """Every process of this rig's profile and its recorded PID."""
        base = {"etcd": self.state.etcd_pid, "kube-apiserver": self.state.apiserver_pid}
        return {**base, **self._component_pids()} if self.full else base

    def running(self) -> dict[str, bool]:
        markers = {"etcd": self.state.etcd_data, "kube-apiserver": str(self.pki_dir)}
        ours = f"--kubeconfig={self.kubeconfig}"  # on every component's command line
        return {name: alive(pid) and markers.get(name, ours) in cmdline(pid) for name, pid in self.pids().items()}

    # ---- restarting and stopping ----------------------------------------------------------------------

    def restart_apiserver(self) -> None:
        """Stop kube-apiserver and start it again on the same port and etcd; data survives."""
        if self._binaries is None:
            raise RigError("restart needs the binaries; use the Rig returned by Rig.start")
        stop_pid(self.state.apiserver_pid, str(self.pki_dir))
        self._start_apiserver()

    def stop_apiserver(self) -> None:
        """Stop kube-apiserver only (etcd keeps the data); ``start_apiserver`` brings it back."""
        stop_pid(self.state.apiserver_pid, str(self.pki_dir))

    def start_apiserver(self) -> None:
        if self._binaries is None:
            raise RigError("start needs the binaries; use the Rig returned by Rig.start")
        self._start_apiserver()

    def stop(self, remove_data: bool = True) -> None:
        """Stop every process by its recorded PID (components first), then delete etcd's data directory."""
        for pid in self._component_pids().values():
            stop_pid(pid, f"--kubeconfig={self.kubeconfig}")
        stop_pid(self.state.apiserver_pid, str(self.pki_dir))
        stop_pid(self.state.etcd_pid, self.state.etcd_data)
        if remove_data:
            shutil.rmtree(self.state.etcd_data, ignore_errors=True)
