"""The real Prometheus Pushgateway (Debian's ``prometheus-pushgateway``) on a free loopback
port, for the tests that check what a run pushes lands there."""

from __future__ import annotations

import shutil
import socket
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx

from tests.support.polling import eventually

BINARY = "prometheus-pushgateway"
SKIP_REASON = (f"{BINARY} is not installed and could not be: `make install` installs it "
               f"with apt-get (Debian/Ubuntu: apt-get install {BINARY})")


@dataclass(frozen=True)
class Pushgateway:
    url: str
    pid: int

    def metrics(self) -> str:
        return httpx.get(f"{self.url}/metrics", timeout=5).text


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def running_pushgateway(tmp: Path) -> Iterator[Pushgateway]:
    """A Pushgateway with no persistence file; stopped (exactly its pid) on exit."""
    binary = shutil.which(BINARY)
    assert binary is not None, SKIP_REASON
    port = _free_port()
    log = (tmp / "pushgateway.log").open("wb")
    proc = subprocess.Popen([binary, f"--web.listen-address=127.0.0.1:{port}",
                             "--persistence.file="],
                            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    gateway = Pushgateway(f"http://127.0.0.1:{port}", proc.pid)
    try:
        eventually(lambda: proc.poll() is None
                   and httpx.get(f"{gateway.url}/-/ready", timeout=1).status_code == 200,
                   timeout=20, what=f"{BINARY} ready on port {port} (log: {log.name})")
        yield gateway
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()
