"""Traffic through the lab API server's service proxy: search's ``/work`` (a real round trip
to Dragonfly as the ACL user ``search``), one request at a time on a kept-alive connection,
bounded in time, counting every failure; and a raw RESP ``AUTH`` check."""

from __future__ import annotations

import base64
import json
import socket
import ssl
import threading
import time
from typing import Any

import httpx

from tests.support.labtools import Lab

LOAD_LIMIT = 30.0  # seconds: the load loop stops by itself even if the test goes wrong



def acl_auth(addr: str, user: str, password: str) -> bool:
    """``AUTH user password`` as raw RESP (the password never reaches argv)."""
    host, _, port = addr.rpartition(":")
    args = [b"AUTH", user.encode(), password.encode()]
    cmd = b"*3\r\n" + b"".join(b"$%d\r\n%s\r\n" % (len(a), a) for a in args)
    with socket.create_connection((host, int(port)), timeout=5) as s:
        s.sendall(cmd)
        reply = s.recv(256)
    return reply.startswith(b"+OK")


def api_client(lab: Lab) -> httpx.Client:
    """A client for the API server built from the lab's kubeconfig, as any user would."""
    cfg = json.loads((lab.dir / "kubeconfig").read_text())
    ctx_name = cfg["current-context"]
    ctx = next(c["context"] for c in cfg["contexts"] if c["name"] == ctx_name)
    cluster = next(c["cluster"] for c in cfg["clusters"] if c["name"] == ctx["cluster"])
    user = next(u["user"] for u in cfg["users"] if u["name"] == ctx["user"])
    tls = ssl.create_default_context(
        cadata=base64.b64decode(cluster["certificate-authority-data"]).decode())
    return httpx.Client(base_url=cluster["server"], verify=tls, timeout=5.0,
                        headers={"Authorization": f"Bearer {user['token']}"})


class Load:
    """GET search's /work through the service proxy until stopped (or LOAD_LIMIT)."""

    PATH = "/api/v1/namespaces/shop/services/search:http/proxy/work"

    def __init__(self, lab: Lab, limit: float = LOAD_LIMIT) -> None:
        self.limit = limit
        self.client = api_client(lab)
        self.stop = threading.Event()
        self.ok = 0
        self.failures: list[str] = []
        self.thread = threading.Thread(target=self._loop, daemon=True, name="load")

    def _loop(self) -> None:
        deadline = time.monotonic() + self.limit
        while not self.stop.is_set() and time.monotonic() < deadline:
            try:
                r = self.client.get(self.PATH)
            except httpx.HTTPError as exc:
                self.failures.append(type(exc).__name__)
                continue
            if r.status_code == 200:
                self.ok += 1
            else:
                self.failures.append(f"HTTP {r.status_code}: {r.text[:200]}")

    def __enter__(self) -> Load:
        self.thread.start()
        return self

    def __exit__(self, *_: Any) -> None:
        self.stop.set()
        self.thread.join(timeout=10)
        self.client.close()
