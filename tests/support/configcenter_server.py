"""The reference Config Center server (rotate_lab.systems.configcenter), run as its own
process on 127.0.0.1 and stopped by pid, for the adapter and contract tests."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from rotate.core.secret import Secret
from rotate.core.waiting import Deadline, wait_for

ADMIN = "admin-token-for-adapter-tests-0123456789"


class Server:
    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        (tmp / "admin-token").write_text(ADMIN + "\n")
        port_file = tmp / "cc.port"
        with (tmp / "cc.log").open("ab") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "rotate_lab.systems.configcenter",
                 "--db", str(tmp / "cc.db"), "--host", "127.0.0.1", "--port", "0",
                 "--admin-token-file", str(tmp / "admin-token"),
                 "--faults-file", str(tmp / "faults.json"), "--port-file", str(port_file)],
                cwd=tmp, stdout=log, stderr=log)

        def port() -> str | None:
            if self.proc.poll() is not None:
                raise AssertionError("config center exited: " + (tmp / "cc.log").read_text())
            text = port_file.read_text().strip() if port_file.exists() else ""
            return text or None

        try:
            self.url = f"http://127.0.0.1:{wait_for(port, deadline=Deadline.after(15), what='cc')}"
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)


def doc(password: str) -> dict[str, object]:
    host = "dragonfly.dragonfly.svc.cluster.local"
    return {"service": {"name": "cart"},
            "dragonfly": {"host": host, "port": 6379, "password": Secret(password),
                          "url": Secret(f"redis://:{password}@{host}:6379/0")}}
