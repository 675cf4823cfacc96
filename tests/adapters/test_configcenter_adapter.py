"""HttpConfigCenter against the real reference server (rotate_lab.systems.configcenter),
run as its own process on 127.0.0.1 and stopped by pid."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from rotate_lab.faults import Faults

from rotate.clients.configcenter import HttpConfigCenter
from rotate.core.errors import (
    ClientError,
    ConflictError,
    ForbiddenError,
    RejectedError,
    TemporaryError,
)
from rotate.core.secret import Secret
from rotate.core.waiting import Deadline, wait_for
from tests.paths import shop_schema

ADMIN = "admin-token-for-adapter-tests-0123456789"
PASSWORD_1 = "First-Dragonfly-Password-0123456789"
PASSWORD_2 = "Second-Dragonfly-Password-9876543210"


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


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    s = Server(tmp_path)
    yield s
    s.stop()


@pytest.fixture
def cc(server: Server) -> Iterator[HttpConfigCenter]:
    client = HttpConfigCenter(server.url, Secret(ADMIN), timeout=5)
    client.put_schema("cart", shop_schema("cart"))
    yield client
    client.close()


def doc(password: str) -> dict[str, object]:
    host = "dragonfly.dragonfly.svc.cluster.local"
    return {"service": {"name": "cart"},
            "dragonfly": {"host": host, "port": 6379, "password": Secret(password),
                          "url": Secret(f"redis://:{password}@{host}:6379/0")}}


def assert_clean(exc: ClientError, server: Server) -> None:
    text = f"{exc} {exc!r} {exc.details}"
    for forbidden in (ADMIN, PASSWORD_1, PASSWORD_2, server.url):
        assert forbidden not in text, (forbidden, text)


# Versions, If-Match, earlier versions, restores and tokens are the seam's contract, checked
# on this adapter and on the fake alike: tests/contracts/test_configcenter_contract.py.  Here:
# what only the real adapter shows.


def test_schemas_and_a_clean_conflict(cc: HttpConfigCenter, server: Server) -> None:
    assert cc.services() == ["cart"]
    assert cc.get_schema("cart")["type"] == "object"
    assert cc.put_key("cart", "bootstrap", doc(PASSWORD_1), if_match=None) == 1
    with pytest.raises(ConflictError) as info:  # create-only on an existing key
        cc.put_key("cart", "bootstrap", doc(PASSWORD_2), if_match=None)
    assert_clean(info.value, server)
    assert PASSWORD_1 not in repr(cc.get_key("cart", "bootstrap"))


def test_schema_rejection_has_paths(cc: HttpConfigCenter, server: Server) -> None:
    cc.put_key("cart", "bootstrap", doc(PASSWORD_1), if_match=None)
    bad = doc("short!")
    del bad["service"]
    with pytest.raises(RejectedError) as info:
        cc.put_key("cart", "bootstrap", bad, if_match=1)
    paths = {p for p, _ in info.value.details}
    assert "/dragonfly/password" in paths
    assert "short!" not in str(info.value.details)
    assert_clean(info.value, server)
    assert cc.get_version_number("cart", "bootstrap") == 1


def test_wrong_admin_token_and_5xx_fault(cc: HttpConfigCenter, server: Server) -> None:
    wrong = HttpConfigCenter(server.url, Secret("wrong-" + ADMIN), timeout=5)
    with pytest.raises(ForbiddenError) as info:
        wrong.services()
    assert "wrong-" not in str(info.value)
    with pytest.raises(ForbiddenError):  # the write probe is refused like a write
        wrong.probe_write("cart", "bootstrap")
    wrong.close()

    Faults.write(server.tmp / "faults.json", {"config-center-5xx": True})
    with pytest.raises(TemporaryError) as temp:
        cc.put_key("cart", "bootstrap", doc(PASSWORD_1), if_match=None)
    assert temp.value.status == 503
    assert_clean(temp.value, server)
    with pytest.raises(TemporaryError):  # preflight's configcenter.writable sees it first
        cc.probe_write("cart", "bootstrap")
    Faults.write(server.tmp / "faults.json", {})
    assert cc.put_key("cart", "bootstrap", doc(PASSWORD_1), if_match=None) == 1


def test_server_stopped_is_temporary(cc: HttpConfigCenter, server: Server) -> None:
    server.stop()
    with pytest.raises(TemporaryError) as info:
        cc.get_key("cart", "bootstrap")
    assert info.value.reason == f"unreachable at {server.url}"  # the address, issue 9
    assert ADMIN not in str(info.value)
