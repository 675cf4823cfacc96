"""The Config Center reference server, run as a real process and driven over HTTP."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from tests.support.paths import shop_schema
from tests.support.polling import eventually

ADMIN = "admin-token-for-tests-0123456789"
PASSWORD = "Sup3rSecretPassw0rd-xyz"


@dataclass
class Server:
    proc: subprocess.Popen[bytes]
    url: str
    dir: Path

    def admin(self) -> httpx.Client:
        return httpx.Client(base_url=self.url, headers={"Authorization": f"Bearer {ADMIN}"},
                            timeout=5)


def _start(tmp: Path) -> Server:
    (tmp / "admin-token").write_text(ADMIN + "\n")
    port_file = tmp / "cc.port"
    port_file.unlink(missing_ok=True)
    log = (tmp / "cc.log").open("ab")
    proc = subprocess.Popen(
        [sys.executable, "-m", "rotate_lab.systems.configcenter", "--db", str(tmp / "cc.db"),
         "--host", "127.0.0.1", "--port", "0", "--admin-token-file", str(tmp / "admin-token"),
         "--faults-file", str(tmp / "faults.json"), "--port-file", str(port_file)],
        cwd=tmp, stdout=log, stderr=log,
    )
    log.close()

    def ready() -> str | None:
        if proc.poll() is not None:
            raise AssertionError("config center exited: " + (tmp / "cc.log").read_text())
        return port_file.read_text().strip() if port_file.exists() else None

    port = eventually(ready, 10, "the Config Center to write its port file")
    return Server(proc, f"http://127.0.0.1:{port}", tmp)


def _stop(server: Server) -> None:
    if server.proc.poll() is None:
        server.proc.terminate()
        try:
            server.proc.wait(5)
        except subprocess.TimeoutExpired:
            server.proc.kill()
            server.proc.wait(5)


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    s = _start(tmp_path)
    try:
        yield s
    finally:
        _stop(s)


def _schema() -> dict[str, object]:
    return shop_schema("cart")


def _doc(password: str = PASSWORD) -> dict[str, object]:
    return {
        "service": {"name": "cart"},
        "dragonfly": {"host": "dragonfly.dragonfly.svc.cluster.local", "port": 6379,
                      "password": password,
                      "url": f"redis://:{password}@dragonfly.dragonfly.svc.cluster.local:6379/0"},
    }


def _seed(c: httpx.Client) -> None:
    assert c.put("/v1/services/cart/schema", json=_schema()).status_code == 200
    r = c.put("/v1/services/cart/keys/bootstrap", json={"value": _doc()},
              headers={"If-None-Match": "*"})
    assert r.status_code == 200, r.text
    assert r.json() == {"version": 1}


def test_health_and_admin_auth(server: Server) -> None:
    assert httpx.get(server.url + "/healthz").status_code == 200
    assert httpx.get(server.url + "/v1/services").status_code == 401
    wrong = httpx.get(server.url + "/v1/services", headers={"Authorization": "Bearer nope"})
    assert wrong.status_code == 401
    with server.admin() as c:
        assert c.get("/v1/services").json() == {"services": []}
        _seed(c)
        assert c.get("/v1/services").json() == {"services": ["cart"]}
        assert c.get("/v1/services/cart/schema").json() == _schema()
        assert c.get("/v1/services/nope/schema").status_code == 404
        assert c.get("/v1/nothing").status_code == 404


def test_versions_and_preconditions(server: Server) -> None:
    with server.admin() as c:
        _seed(c)
        got = c.get("/v1/services/cart/keys/bootstrap")
        assert got.status_code == 200
        assert got.headers["ETag"] == '"1"'
        assert got.json() == {"value": _doc(), "version": 1}
        # create-only write on an existing key
        again = c.put("/v1/services/cart/keys/bootstrap", json={"value": _doc()},
                      headers={"If-None-Match": "*"})
        assert again.status_code == 412
        new_pw = "AnotherPassword-1234567890"
        ok = c.put("/v1/services/cart/keys/bootstrap", json={"value": _doc(new_pw)},
                   headers={"If-Match": '"1"'})
        assert ok.status_code == 200 and ok.json() == {"version": 2}
        # a writer still holding version 1 loses
        stale = c.put("/v1/services/cart/keys/bootstrap", json={"value": _doc()},
                      headers={"If-Match": '"1"'})
        assert stale.status_code == 412
        assert stale.json()["error"]
        latest = c.get("/v1/services/cart/keys/bootstrap").json()
        assert latest["version"] == 2
        assert latest["value"]["dragonfly"]["password"] == new_pw
        old = c.get("/v1/services/cart/keys/bootstrap/versions/1")
        assert old.json() == {"value": _doc(), "version": 1}
        assert old.headers["ETag"] == '"1"'
        assert c.get("/v1/services/cart/keys/bootstrap/versions/3").status_code == 404
        assert c.get("/v1/services/cart/keys/other").status_code == 404


def test_schema_rejection_names_paths_without_values(server: Server) -> None:
    with server.admin() as c:
        _seed(c)
        bad = _doc("short!")
        bad["dragonfly"]["port"] = 70000  # type: ignore[index]
        del bad["dragonfly"]["url"]  # type: ignore[attr-defined]
        bad["extra"] = 1
        r = c.put("/v1/services/cart/keys/bootstrap", json={"value": bad},
                  headers={"If-Match": '"1"'})
        assert r.status_code == 422
        body = r.json()
        assert body["error"] == "schema"
        paths = {d["path"]: d["message"] for d in body["details"]}
        assert set(paths) >= {"/dragonfly/password", "/dragonfly/port", "/dragonfly/url", "/extra"}
        assert "16" in paths["/dragonfly/password"]
        assert "short!" not in r.text
        # nothing was written
        assert c.get("/v1/services/cart/keys/bootstrap").json()["version"] == 1
        # a document for a service without a schema cannot be checked, so it is refused
        r = c.put("/v1/services/ghost/keys/bootstrap", json={"value": {}})
        assert r.status_code == 422
        # an invalid schema is refused
        r = c.put("/v1/services/cart/schema", json={"type": 12})
        assert r.status_code == 422


def test_tokens_bootstrap_and_revocation(server: Server) -> None:
    with server.admin() as c:
        _seed(c)
        minted = c.post("/v1/services/cart/tokens")
        assert minted.status_code == 201
        tok = minted.json()
        assert set(tok) == {"id", "token", "expires_at"}
        assert tok["expires_at"].endswith("Z")
        listing = c.get("/v1/services/cart/tokens")
        assert listing.status_code == 200
        assert tok["token"] not in listing.text
        assert [t["id"] for t in listing.json()] == [tok["id"]]
        assert listing.json()[0]["revoked"] is False

        boot = httpx.get(server.url + "/v1/bootstrap",
                         headers={"Authorization": f"Bearer {tok['token']}"})
        assert boot.status_code == 200
        assert boot.json() == _doc()
        # the admin token is not a machine token
        assert httpx.get(server.url + "/v1/bootstrap",
                         headers={"Authorization": f"Bearer {ADMIN}"}).status_code == 401
        assert httpx.get(server.url + "/v1/bootstrap").status_code == 401

        assert c.delete(f"/v1/services/cart/tokens/{tok['id']}").status_code == 204
        boot = httpx.get(server.url + "/v1/bootstrap",
                         headers={"Authorization": f"Bearer {tok['token']}"})
        assert boot.status_code == 401
        assert c.get("/v1/services/cart/tokens").json()[0]["revoked"] is True
        assert c.delete("/v1/services/cart/tokens/tok_unknown").status_code == 404
    # the token never reaches the server's log
    assert tok["token"] not in (server.dir / "cc.log").read_text()
    assert PASSWORD not in (server.dir / "cc.log").read_text()


def test_restart_keeps_state(tmp_path: Path) -> None:
    first = _start(tmp_path)
    try:
        with first.admin() as c:
            _seed(c)
            tok = c.post("/v1/services/cart/tokens").json()
            revoked = c.post("/v1/services/cart/tokens").json()
            c.delete(f"/v1/services/cart/tokens/{revoked['id']}")
    finally:
        _stop(first)
    assert first.proc.returncode == 0
    second = _start(tmp_path)
    try:
        with second.admin() as c:
            assert c.get("/v1/services/cart/keys/bootstrap").json()["version"] == 1
            assert c.get("/v1/services/cart/schema").json() == _schema()
        ok = httpx.get(second.url + "/v1/bootstrap",
                       headers={"Authorization": f"Bearer {tok['token']}"})
        assert ok.status_code == 200
        gone = httpx.get(second.url + "/v1/bootstrap",
                         headers={"Authorization": f"Bearer {revoked['token']}"})
        assert gone.status_code == 401
    finally:
        _stop(second)


def test_5xx_fault_blocks_writes_until_cleared(server: Server) -> None:
    faults = server.dir / "faults.json"
    with server.admin() as c:
        _seed(c)
        faults.write_text(json.dumps({"config-center-5xx": True}))
        r = c.put("/v1/services/cart/keys/bootstrap", json={"value": _doc()},
                  headers={"If-Match": '"1"'})
        assert r.status_code == 503 and r.json() == {"error": "unavailable"}
        assert c.post("/v1/services/cart/tokens").status_code == 503
        assert c.put("/v1/services/cart/schema", json=_schema()).status_code == 503
        # reads still answer
        assert c.get("/v1/services/cart/keys/bootstrap").json()["version"] == 1
        faults.write_text(json.dumps({}))
        r = eventually(lambda: (lambda x: x if x.status_code == 200 else None)(
            c.put("/v1/services/cart/keys/bootstrap", json={"value": _doc()},
                  headers={"If-Match": '"1"'})), 5, "writes to succeed once the fault is off")
        assert r.json() == {"version": 2}


def test_concurrent_writers_with_one_version_exactly_one_wins(server: Server) -> None:
    from concurrent.futures import ThreadPoolExecutor

    with server.admin() as c:
        _seed(c)

    def write(i: int) -> int:
        with server.admin() as c:
            return c.put("/v1/services/cart/keys/bootstrap",
                         json={"value": _doc(f"ConcurrentPassword-{i:04d}")},
                         headers={"If-Match": '"1"'}).status_code

    with ThreadPoolExecutor(8) as pool:
        codes = sorted(pool.map(write, range(8)))
    assert codes == [200] + [412] * 7
    with server.admin() as c:
        assert c.get("/v1/services/cart/keys/bootstrap").json()["version"] == 2
        assert c.get("/v1/services/cart/keys/bootstrap/versions/3").status_code == 404


def test_expired_token_is_refused(server: Server) -> None:
    import sqlite3

    with server.admin() as c:
        _seed(c)
        tok = c.post("/v1/services/cart/tokens").json()
    auth = {"Authorization": f"Bearer {tok['token']}"}
    assert httpx.get(server.url + "/v1/bootstrap", headers=auth).status_code == 200
    db = sqlite3.connect(server.dir / "cc.db")
    with db:
        db.execute("UPDATE tokens SET expires_at = '2000-01-01T00:00:00Z' WHERE id = ?",
                   (tok["id"],))
    db.close()
    assert httpx.get(server.url + "/v1/bootstrap", headers=auth).status_code == 401
