"""Black-box helpers for end-to-end tests: run `rotate` and `kubectl` as a user would, and
look at the lab from outside the tool (OpenBao's HTTP API, kubectl, the Config Center API,
a raw Redis AUTH)."""

from __future__ import annotations

import base64
import json
import os
import shlex
import socket
import subprocess
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import httpx

ROTATE = str(Path(sys.executable).parent / "rotate")
SHOP = (
    "user",
    "product",
    "inventory",
    "cart",
    "order",
    "payment",
    "shipping",
    "review",
    "search",
    "notification",
)
CONSUMERS = ("cart", "order", "user")

T = TypeVar("T")


def read_env_file(path: Path) -> dict[str, str]:
    env: dict[str, str] = {}
    for line in path.read_text().splitlines():
        line = line.strip()
        if line.startswith("export "):
            key, _, value = line[len("export ") :].partition("=")
            env[key] = shlex.split(value)[0] if value else ""
    return env


@dataclass
class Result:
    args: list[str]
    code: int
    stdout: str
    stderr: str

    @property
    def output(self) -> str:
        return self.stdout + self.stderr


@dataclass
class Lab:
    dir: Path
    env: dict[str, str]
    transcripts: list[Result] = field(default_factory=list)

    @property
    def process_env(self) -> dict[str, str]:
        env = {
            k: v for k, v in os.environ.items() if not k.startswith(("BAO_", "VAULT_", "ROTATE_"))
        }
        env.update(self.env)
        env.update({"NO_COLOR": "1", "COLUMNS": "120", "TERM": "dumb"})
        return env

    def rotate(self, *args: str, stdin: str | None = None, timeout: float = 180) -> Result:
        proc = subprocess.run(
            [ROTATE, *args],
            env=self.process_env,
            capture_output=True,
            text=True,
            input=stdin,
            timeout=timeout,
            cwd=self.dir,
        )
        result = Result([ROTATE, *args], proc.returncode, proc.stdout, proc.stderr)
        self.transcripts.append(result)
        return result

    def spawn_rotate(self, *args: str) -> subprocess.Popen[str]:
        return subprocess.Popen(
            [ROTATE, *args],
            env=self.process_env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=self.dir,
        )

    def kubectl(self, *args: str, check: bool = True) -> str:
        proc = subprocess.run(
            ["kubectl", *args], env=self.process_env, capture_output=True, text=True, timeout=30
        )
        if check and proc.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed: {proc.stderr}")
        return proc.stdout

    def kubectl_apply(self, manifest: dict[str, Any]) -> str:
        proc = subprocess.run(["kubectl", "apply", "-f", "-"], env=self.process_env, text=True,
                              input=json.dumps(manifest), capture_output=True, timeout=30)
        if proc.returncode != 0:
            raise AssertionError(f"kubectl apply failed: {proc.stderr}")
        return proc.stdout

    def kjson(self, *args: str) -> Any:
        return json.loads(self.kubectl(*args, "-o", "json"))

    # -- OpenBao, from outside
    def bao(self, method: str, path: str, **kw: Any) -> httpx.Response:
        return httpx.request(
            method,
            f"{self.env['BAO_ADDR']}/v1/{path}",
            headers={"X-Vault-Token": self.env["BAO_TOKEN"]},
            timeout=10,
            **kw,
        )

    def bao_version(self) -> int:
        return int(
            self.bao("GET", "secret/metadata/infra/dragonfly").json()["data"]["current_version"]
        )

    def bao_password(self, version: int | None = None) -> str:
        q = f"?version={version}" if version else ""
        return str(
            self.bao("GET", f"secret/data/infra/dragonfly{q}").json()["data"]["data"]["password"]
        )

    # -- Kubernetes, from outside
    def secret_value(self, ns: str, name: str, key: str) -> str:
        data = self.kjson("get", "secret", "-n", ns, name)["data"]
        return base64.b64decode(data[key]).decode()

    def revision(self, ns: str, name: str) -> int:
        d = self.kjson("get", "deployment", "-n", ns, name)
        return int(d["metadata"]["annotations"]["deployment.kubernetes.io/revision"])

    def revisions(self) -> dict[str, int]:
        revs = {svc: self.revision("shop", svc) for svc in SHOP}
        revs["dragonfly"] = self.revision("dragonfly", "dragonfly")
        return revs

    def readyz(self, svc: str) -> int:
        proc = subprocess.run(
            [
                "kubectl",
                "get",
                "--raw",
                f"/api/v1/namespaces/shop/services/{svc}:http/proxy/readyz",
            ],
            env=self.process_env,
            capture_output=True,
            text=True,
            timeout=30,
        )
        return 200 if proc.returncode == 0 else 503

    # -- Config Center, from outside
    def cc(self, method: str, path: str) -> httpx.Response:
        return httpx.request(
            method,
            f"{self.env['CONFIG_CENTER_URL']}{path}",
            timeout=10,
            headers={"Authorization": f"Bearer {self.env['CONFIG_CENTER_TOKEN']}"},
        )

    def bootstrap(self, svc: str) -> dict[str, Any]:
        return dict(self.cc("GET", f"/v1/services/{svc}/keys/bootstrap").json())

    # -- the lab
    def status(self) -> dict[str, Any]:
        from rotate_lab import control

        return dict(control.status(self.dir))

    def fault(self, kind: str, target: str | None = None, clear: bool = False) -> None:
        from rotate_lab import control

        control.fault(self.dir, kind, target, clear)

    def dragonfly_auth(self, password: str) -> bool:
        host, _, port = self.status()["parts"]["dragonfly"]["addr"].rpartition(":")
        return redis_auth(host, int(port), password)

    def journal_events(self, run_id: str | None = None) -> list[dict[str, Any]]:
        runs = Path(self.env["ROTATE_STATE_DIR"]) / "runs"
        files = (
            [runs / run_id / "journal.jsonl"] if run_id else sorted(runs.glob("*/journal.jsonl"))
        )
        out: list[dict[str, Any]] = []
        for f in files:
            if f.exists():
                out += [json.loads(line) for line in f.read_text().splitlines() if line.strip()]
        return out

    def run_ids(self) -> list[str]:
        runs = Path(self.env["ROTATE_STATE_DIR"]) / "runs"
        return sorted(p.name for p in runs.iterdir()) if runs.exists() else []


def newest_run(lab: Lab, known: set[str]) -> str | None:
    fresh = [r for r in lab.run_ids() if r not in known]
    return fresh[-1] if fresh else None


def redis_auth(host: str, port: int, password: str) -> bool:
    """AUTH with a raw RESP command (the password never reaches argv)."""
    pw = password.encode()
    cmd = b"*2\r\n$4\r\nAUTH\r\n$%d\r\n%s\r\n" % (len(pw), pw)
    with socket.create_connection((host, port), timeout=5) as s:
        s.sendall(cmd)
        reply = s.recv(256)
    return reply.startswith(b"+OK")


def scan(haystacks: Iterable[tuple[str, str]], needles: Iterable[str]) -> list[str]:
    """Every (where, needle-kind) in which a secret needle appears."""
    found = []
    needles = [n for n in needles if n]
    for where, text in haystacks:
        for n in needles:
            if n in text:
                found.append(f"{where} contains a secret value ({len(n)} chars)")
    return found
