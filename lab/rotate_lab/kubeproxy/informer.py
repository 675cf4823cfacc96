"""List + watch over HTTPS, on asyncio: how the proxy learns Services and Endpoints.

The API server is reached exactly as any lab client reaches it: the address, CA and bearer
token of the kubeconfig's current context (``DIR/kubeconfig``, written by ``rotate lab up``).
The User-Agent is ``kube-proxy/lab`` so that ``GET /lab/api-requests`` counts the
proxy's requests apart from ``rotate``'s.

Invariants:

- The cache is replaced by each list (``ServiceTable.replace``) and then follows the watch
  from the list's resourceVersion, so no event is missed between the two; BOOKMARKs only
  advance the resourceVersion.
- A broken stream, an ERROR event or a 410 Expired ends the watch; the informer relists
  after ``RETRY_SECONDS`` (the cache keeps serving its last state meanwhile: established
  traffic and new connections are not interrupted by an API server restart).
- ``synced`` is True only while a watch stream is open on a fresh list: what the proxy's
  ``/healthz`` reports.
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import ssl
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

log = logging.getLogger("rotate_lab.kubeproxy")
Obj = dict[str, Any]
USER_AGENT = "kube-proxy/lab"
RETRY_SECONDS = 0.5
WATCH_SECONDS = 300
REQUEST_TIMEOUT = 10.0


class ApiUnavailable(Exception):
    """The API server could not be reached or answered an error; the message is safe to log
    (status code and path only, never a body or a header)."""


@dataclass(frozen=True)
class ApiAccess:
    """The API server's address and credentials, from a kubeconfig's current context."""

    host: str
    port: int
    token: str = field(repr=False)
    ssl: ssl.SSLContext = field(repr=False)

    @classmethod
    def from_kubeconfig(cls, path: Path) -> ApiAccess:
        doc = json.loads(path.read_text())  # the lab writes JSON (cluster/api/kubeconfig.py)
        ctx = next(c["context"] for c in doc["contexts"] if c["name"] == doc["current-context"])
        cluster = next(c["cluster"] for c in doc["clusters"] if c["name"] == ctx["cluster"])
        user = next(u["user"] for u in doc["users"] if u["name"] == ctx["user"])
        ca = base64.b64decode(cluster["certificate-authority-data"]).decode()
        url = urlsplit(str(cluster["server"]))
        if url.scheme != "https" or url.hostname is None or url.port is None:
            raise ValueError(f"kubeconfig {path}: server must be https://HOST:PORT")
        return cls(url.hostname, url.port, str(user["token"]),
                   ssl.create_default_context(cadata=ca))

    async def get(self, path: str) -> AsyncIterator[bytes]:
        """GET ``path`` and yield the body as it arrives (chunked or Content-Length)."""
        reader, writer = await asyncio.wait_for(
            asyncio.open_connection(self.host, self.port, ssl=self.ssl), REQUEST_TIMEOUT)
        try:
            writer.write((f"GET {path} HTTP/1.1\r\nHost: {self.host}:{self.port}\r\n"
                          f"Authorization: Bearer {self.token}\r\nUser-Agent: {USER_AGENT}\r\n"
                          "Accept: application/json\r\nConnection: close\r\n\r\n").encode())
            await writer.drain()
            status = await asyncio.wait_for(reader.readline(), REQUEST_TIMEOUT)
            parts = status.split()
            code = int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else 0
            headers: dict[str, str] = {}
            while (line := await reader.readline()) not in (b"\r\n", b"\n", b""):
                name, _, value = line.decode("latin-1").partition(":")
                headers[name.strip().lower()] = value.strip()
            if code != 200:
                raise ApiUnavailable(f"GET {path.split('?')[0]}: HTTP {code}")
            if headers.get("transfer-encoding", "").lower() == "chunked":
                while size := int((await reader.readline()).split(b";")[0].strip() or b"0", 16):
                    yield await reader.readexactly(size)
                    await reader.readline()
            elif "content-length" in headers:
                yield await reader.readexactly(int(headers["content-length"]))
            else:
                yield await reader.read()
        finally:
            writer.close()


Apply = Callable[[str, str, Obj], None]
Replace = Callable[[str, list[Obj]], None]


class Informer:
    """Keeps one kind (``Service`` or ``Endpoints``, all namespaces) in the cache."""

    def __init__(self, api: ApiAccess, kind: str, plural: str, replace: Replace,
                 apply: Apply) -> None:
        self.api, self.kind, self.plural = api, kind, plural
        self._replace, self._apply = replace, apply
        self.synced = False
        self.listed = asyncio.Event()  # set after the first successful list

    async def run(self) -> None:
        """List, then watch, forever; relist after any failure."""
        while True:
            try:
                rv = await self._list()
                self.listed.set()
                self.synced = True
                await self._watch(rv)
            except (OSError, ApiUnavailable, ValueError, TimeoutError,
                    asyncio.IncompleteReadError) as exc:
                log.warning("%s informer: %s; relisting", self.plural, exc)
            finally:
                self.synced = False
            await asyncio.sleep(RETRY_SECONDS)

    async def _list(self) -> str:
        body = b"".join([c async for c in self.api.get(f"/api/v1/{self.plural}")])
        doc = json.loads(body)
        self._replace(self.kind, list(doc.get("items") or []))
        return str(doc["metadata"]["resourceVersion"])

    async def _watch(self, rv: str) -> None:
        """Follow events from ``rv`` until the stream ends; a normal end re-watches."""
        while True:
            path = (f"/api/v1/{self.plural}?watch=true&allowWatchBookmarks=true"
                    f"&timeoutSeconds={WATCH_SECONDS}&resourceVersion={rv}")
            buf = b""
            async for chunk in self.api.get(path):
                buf += chunk
                *lines, buf = buf.split(b"\n")
                for line in lines:
                    if line.strip():
                        rv = self._event(json.loads(line), rv)

    def _event(self, ev: Obj, rv: str) -> str:
        kind, obj = str(ev.get("type") or ""), ev.get("object") or {}
        if kind == "ERROR":
            raise ApiUnavailable(f"watch {self.plural}: {obj.get('code')} {obj.get('reason')}")
        if kind != "BOOKMARK":
            self._apply(self.kind, kind, obj)
        return str((obj.get("metadata") or {}).get("resourceVersion") or rv)
