"""Running the chart's container spec as a local process: volumes become directories, Secrets become files, and
the rendered args and env are used unchanged except for mount paths (a pod's filesystem, rooted in a temp dir)."""

from __future__ import annotations

import base64
import re
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from chart_helm import Rendered


def translate(value: str, mounts: Mapping[str, Path]) -> str:
    """Replace every mount path (as a whole path or a path prefix, anywhere in the string) by its local
    directory, in one pass so a replaced path is never rewritten again."""
    if not mounts:
        return value
    pattern = "|".join(re.escape(m) for m in sorted(mounts, key=len, reverse=True))
    return re.sub(f"(?<![\\w/.:-])({pattern})(?=/|$|\\s)", lambda match: str(mounts[match.group(1)]), value)


class PodFiles:
    """The container's filesystem and process settings: volumes as directories under ``root``, Secrets written
    as the kubelet would, and the rendered args and env with mount paths mapped into ``root``."""

    def __init__(self, rendered: Rendered, root: Path, *, secrets: Mapping[str, Mapping[str, bytes]],
                 namespace: str, kubeconfig: Path) -> None:
        container, pod = rendered.container, rendered.pod
        volumes = {v["name"]: v for v in pod["volumes"]}
        self.mounts: dict[str, Path] = {}
        for mount in container["volumeMounts"]:
            local = root / "pod" / mount["mountPath"].lstrip("/")
            local.mkdir(parents=True, exist_ok=True)
            self.mounts[mount["mountPath"]] = local
            secret = volumes[mount["name"]].get("secret")
            if secret is not None:
                data = secrets[secret["secretName"]]
                items = secret.get("items") or [{"key": k, "path": k} for k in data]
                for item in items:
                    target = local / item["path"]
                    target.write_bytes(data[item["key"]])
                    target.chmod(secret.get("defaultMode", 0o644))
        self.args = [translate(a, self.mounts) for a in container["args"]]
        env: dict[str, str] = {"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin", "KUBECONFIG": str(kubeconfig)}
        for item in container.get("env", []):
            if "value" in item:
                env[item["name"]] = translate(str(item["value"]), self.mounts)
            elif item["valueFrom"].get("fieldRef", {}).get("fieldPath") == "metadata.namespace":
                env[item["name"]] = namespace
            else:
                raise AssertionError(f"unsupported env source {item}")
        self.env = env
        self.root = root


class PodProcess:
    """The controller container as a subprocess against a kubeconfig instead of in-cluster."""

    def __init__(self, files: PodFiles) -> None:
        self.files = files
        self.log = files.root / "controller.log"
        executable = Path(sys.executable).parent / "gitopsq"  # the image's ENTRYPOINT
        with self.log.open("wb") as out:
            self.proc = subprocess.Popen([str(executable), *files.args], env=files.env, stdout=out,
                                         stderr=subprocess.STDOUT,
                                         cwd=files.mounts.get("/var/cache/gitopsq", files.root))

    def logs(self) -> str:
        return self.log.read_text(errors="replace")

    def http(self, port: int, path: str, *, body: bytes | None = None, headers: Mapping[str, str] | None = None,
             timeout: float = 30.0) -> tuple[int, bytes]:
        request = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=body, headers=dict(headers or {}),
                                         method="POST" if body is not None else "GET")
        try:
            with urllib.request.urlopen(request, timeout=timeout) as answer:
                return answer.status, answer.read()
        except urllib.error.HTTPError as err:
            return err.code, err.read()

    def wait_http(self, port: int, path: str, status: int = 200, timeout: float = 60.0) -> bytes:
        deadline = time.monotonic() + timeout
        last: Any = None
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"controller exited {self.proc.returncode}:\n{self.logs()[-3000:]}")
            try:
                code, body = self.http(port, path)
                if code == status:
                    return body
                last = code
            except OSError as err:
                last = err
            time.sleep(0.3)
        raise AssertionError(f"GET :{port}{path} never answered {status} (last: {last}):\n{self.logs()[-3000:]}")

    def wait_series(self, port: int, path: str, series: list[bytes], timeout: float = 60.0) -> bytes:
        """The metrics page once it holds every one of ``series``: a counter follows the change it counts (a
        status write, a Job's unsuspension), so on a loaded machine a single scrape may come in between."""
        deadline = time.monotonic() + timeout
        while True:
            body = self.wait_http(port, path, timeout=timeout)
            missing = [s for s in series if s not in body]
            if not missing:
                return body
            assert time.monotonic() < deadline, f"{path} never showed {missing}:\n{self.logs()[-3000:]}"
            time.sleep(0.3)

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode


def secret_manifest(name: str, namespace: str, data: Mapping[str, bytes]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name, "namespace": namespace},
            "data": {k: base64.b64encode(v).decode() for k, v in data.items()}}

