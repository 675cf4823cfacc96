"""``python -m rotate_lab.kubeproxy --dir DIR``: the lab's kube-proxy process.

Reads the API server's address and credentials from ``DIR/kubeconfig``; lists and watches
Services and Endpoints; listens on every ClusterIP:port.  Once the first lists are applied
and the listeners are open it serves ``GET /healthz`` on ``127.0.0.1:<port>`` (200 while both
watches are open, 503 otherwise — real kube-proxy's healthz answers the same question) and
writes that port to ``DIR/kube-proxy.port`` (atomically): what ``rotate lab up`` waits for
and ``rotate lab status`` probes.

SIGTERM/SIGINT: close every listener and established connection, exit 0.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import signal
import sys
from pathlib import Path

from rotate_lab.kubeproxy.forward import Forwarder
from rotate_lab.kubeproxy.informer import ApiAccess, Informer
from rotate_lab.kubeproxy.table import ServiceTable

log = logging.getLogger("rotate_lab.kubeproxy")
PORT_FILE = "kube-proxy.port"
START_TIMEOUT = 20.0


class Proxy:
    """The cache, its two informers and the forwarder, wired on one event loop."""

    def __init__(self, api: ApiAccess) -> None:
        self.table = ServiceTable()
        self.forwarder = Forwarder(self.table)
        self.informers = [Informer(api, kind, plural, self._replace, self._apply)
                          for kind, plural in (("Service", "services"),
                                               ("Endpoints", "endpoints"))]

    def _replace(self, kind: str, items: list[dict[str, object]]) -> None:
        self.table.replace(kind, items)
        if kind == "Service":
            self.forwarder.wake()

    def _apply(self, kind: str, event_type: str, obj: dict[str, object]) -> None:
        self.table.apply(kind, event_type, obj)
        if kind == "Service":
            self.forwarder.wake()

    @property
    def healthy(self) -> bool:
        return all(i.synced for i in self.informers)

    async def _healthz(self, reader: asyncio.StreamReader,
                       writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(OSError, asyncio.IncompleteReadError):
            await reader.readuntil(b"\r\n\r\n")
            code, text = (200, "ok") if self.healthy else (503, "informers not synced")
            body = (text + "\n").encode()
            writer.write(f"HTTP/1.1 {code} {text}\r\nContent-Type: text/plain\r\n"
                         f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode()
                         + body)
            await writer.drain()
        writer.close()

    async def run(self, lab_dir: Path, stop: asyncio.Event) -> None:
        tasks = [asyncio.create_task(i.run()) for i in self.informers]
        fwd = asyncio.create_task(self.forwarder.run(stop))
        try:
            await asyncio.wait_for(asyncio.gather(*(i.listed.wait() for i in self.informers)),
                                   START_TIMEOUT)
            await self.forwarder.sync()  # listeners open before we say we are up
            health = await asyncio.start_server(self._healthz, "127.0.0.1", 0)
            port = health.sockets[0].getsockname()[1]
            tmp = lab_dir / (PORT_FILE + ".tmp")
            tmp.write_text(f"{port}\n")
            os.replace(tmp, lab_dir / PORT_FILE)
            log.info("kube-proxy up: %d listeners, healthz on 127.0.0.1:%d",
                     len(self.forwarder.listening()), port)
            await stop.wait()
            health.close()
        finally:
            stop.set()
            for t in tasks:
                t.cancel()
            await asyncio.gather(fwd, *tasks, return_exceptions=True)


async def _main(lab_dir: Path, kubeconfig: Path) -> int:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    try:
        await Proxy(ApiAccess.from_kubeconfig(kubeconfig)).run(lab_dir, stop)
    except TimeoutError:
        log.error("the API server did not answer the first lists within %.0fs", START_TIMEOUT)
        return 1
    log.info("stopped")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m rotate_lab.kubeproxy")
    ap.add_argument("--dir", required=True, type=Path)
    ap.add_argument("--kubeconfig", type=Path, help="default: DIR/kubeconfig")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    lab_dir = args.dir.resolve()
    return asyncio.run(_main(lab_dir, args.kubeconfig or lab_dir / "kubeconfig"))


if __name__ == "__main__":
    raise SystemExit(main())
