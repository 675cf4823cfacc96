"""A real OpenBao (`bao server -dev`, in memory, on 127.0.0.1) for the adapter and contract
tests.

The dev server's root token is passed through the environment (BAO_DEV_ROOT_TOKEN_ID), not
argv, and is a throwaway value of the test session — not a secret of the product.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import uuid
from dataclasses import dataclass
from pathlib import Path

import httpx

from rotate.core.waiting import Deadline, wait_for

BAO = Path(sys.executable).parent / "bao"
ROOT_TOKEN = "dev-root-" + uuid.uuid4().hex


@dataclass
class Bao:
    proc: subprocess.Popen[bytes]
    addr: str

    def api(self, method: str, path: str, token: str = ROOT_TOKEN, **kw: object) -> httpx.Response:
        response = httpx.request(method, f"{self.addr}/v1/{path}",
                                 headers={"X-Vault-Token": token}, timeout=5, **kw)  # type: ignore[arg-type]
        response.raise_for_status()
        return response


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_bao(tmp: Path) -> Bao:
    port = free_port()
    env = {**os.environ, "BAO_DEV_ROOT_TOKEN_ID": ROOT_TOKEN, "HOME": str(tmp)}
    for name in ("BAO_ADDR", "VAULT_ADDR", "BAO_TOKEN", "VAULT_TOKEN"):
        env.pop(name, None)
    log = (tmp / "bao.log").open("wb")
    proc = subprocess.Popen(
        [str(BAO), "server", "-dev", f"-dev-listen-address=127.0.0.1:{port}",
         "-dev-no-store-token"],
        stdout=log, stderr=subprocess.STDOUT, env=env, cwd=tmp,
    )
    log.close()
    bao = Bao(proc, f"http://127.0.0.1:{port}")

    def healthy() -> bool | None:
        if proc.poll() is not None:
            raise AssertionError("bao exited: " + (tmp / "bao.log").read_text()[-2000:])
        try:
            return httpx.get(f"{bao.addr}/v1/sys/health", timeout=1).status_code == 200 or None
        except httpx.HTTPError:
            return None

    try:
        wait_for(healthy, deadline=Deadline.after(20), what="bao dev server healthy")
    except BaseException:
        stop_bao(bao)
        raise
    return bao


def stop_bao(bao: Bao) -> None:
    bao.proc.terminate()
    try:
        bao.proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        bao.proc.kill()
        bao.proc.wait(timeout=5)
