"""A lab started with ``rotate_lab.control.up`` (fast profile), as the lab tests drive it:
its directory, the environment of its env file, and kubectl/OpenBao/readyz helpers.

``user_env`` is the environment a user has after ``. DIR/env`` (without any
BAO_/VAULT_/ROTATE_/KUBECONFIG of the caller's shell).
"""

from __future__ import annotations

import base64
import json
import os
import shlex
import shutil
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest


def read_env_file(path: Path) -> dict[str, str]:
    env: dict[str, str] = {}
    for line in path.read_text().splitlines():
        if line.startswith("export "):
            key, _, value = line[len("export "):].partition("=")
            env[key] = shlex.split(value)[0] if value else ""
    return env


def user_env(lab_env: dict[str, str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("BAO_", "VAULT_", "ROTATE_", "CONFIG_CENTER_"))
           and k != "KUBECONFIG"}
    env.update(lab_env)
    env.update({"NO_COLOR": "1", "TERM": "dumb"})
    return env


@dataclass
class LabHandle:
    dir: Path
    env: dict[str, str]
    up_result: dict[str, Any] = field(default_factory=dict)

    @property
    def kubeconfig(self) -> Path:
        return Path(self.env["KUBECONFIG"])

    @property
    def process_env(self) -> dict[str, str]:
        return user_env(self.env)

    def down(self) -> list[str]:
        from rotate_lab import control

        return control.down(self.dir)

    def kubectl(self, *args: str, check: bool = True,
                timeout: float = 30) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run(["kubectl", *args], env=self.process_env, capture_output=True,
                              text=True, timeout=timeout)
        if check and proc.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed: {proc.stderr}")
        return proc

    def kjson(self, *args: str) -> Any:
        return json.loads(self.kubectl(*args, "-o", "json").stdout)

    def bao(self, method: str, path: str, timeout: float = 5.0, **kw: Any) -> httpx.Response:
        return httpx.request(method, f"{self.env['BAO_ADDR']}/v1/{path}", timeout=timeout,
                             headers={"X-Vault-Token": self.env["BAO_TOKEN"]}, **kw)

    def bao_password(self) -> str:
        r = self.bao("GET", "secret/data/infra/dragonfly")
        return str(r.json()["data"]["data"]["password"])

    def set_bao_password(self, value: str) -> None:
        r = self.bao("POST", "secret/data/infra/dragonfly", json={"data": {"password": value}})
        assert r.status_code == 200, r.status_code

    def secret_password(self) -> str:
        data = self.kjson("get", "secret", "-n", "dragonfly", "dragonfly-password-secret")["data"]
        return base64.b64decode(data["password"]).decode()

    def force_sync(self) -> None:
        self.kubectl("annotate", "externalsecret", "-n", "dragonfly", "dragonfly-password",
                     f"force-sync={time.time_ns()}", "--overwrite")

    def revision(self, ns: str, name: str) -> int:
        d = self.kjson("get", "deployment", "-n", ns, name)
        return int(d["metadata"]["annotations"]["deployment.kubernetes.io/revision"])

    def readyz(self, svc: str) -> int:
        proc = self.kubectl(
            "get", "--raw", f"/api/v1/namespaces/shop/services/{svc}:http/proxy/readyz",
            check=False)
        return 200 if proc.returncode == 0 else 503

    def recorded_pids(self) -> dict[str, int]:
        pids = json.loads((self.dir / "pids.json").read_text())
        pods = json.loads((self.dir / "pods.json").read_text()) if (
            self.dir / "pods.json").exists() else {}
        found = {k: int(v) for k, v in pids.items()}
        found.update({f"pod {k}": int(v) for k, v in pods.items()})
        return found


def _require_tools() -> None:
    missing = [t for t in ("redis-server", "kubectl") if shutil.which(t) is None]
    if missing:
        pytest.fail(f"the lab needs {', '.join(missing)} (make install puts redis-server "
                    "in place)")


def start_lab(lab_dir: Path, *, reloader: bool = False, nice: int = 0) -> LabHandle:
    from rotate_lab import control

    _require_tools()
    try:
        result = control.up(lab_dir, "fast", reloader, on_progress=lambda _m: None, nice=nice)
    except BaseException:
        control.down(lab_dir)
        raise
    return LabHandle(lab_dir, read_env_file(lab_dir / "env"), result)
