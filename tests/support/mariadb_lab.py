"""The lab's MariaDB as the e2e tests see it (tests/e2e/test_mariadb_lab.py): OpenBao's
values, MariaDB's accounts through PyMySQL, catalog's readiness, and the module's one
rotation under load (the conftest fixture ``mariadb_rotation``)."""

from __future__ import annotations

import json
from typing import Any

import pymysql

from tests.support.labtools import Lab
from tests.support.polling import eventually
from tests.support.proxy_load import Load


def bao_data(lab: Lab, path: str) -> tuple[dict[str, str], int]:
    r = lab.bao("GET", f"secret/data/{path}").json()["data"]
    return dict(r["data"]), int(r["metadata"]["version"])


def pid_of(lab: Lab, prefix: str) -> int:
    pods = json.loads((lab.dir / "pods.json").read_text())
    found = [int(pid) for key, pid in pods.items() if key.startswith(prefix)]
    assert len(found) == 1, pods
    return found[0]


WORK = "/api/v1/namespaces/mariadb/services/catalog:http/proxy/work"
READYZ = "/api/v1/namespaces/mariadb/services/catalog:http/proxy/readyz"


def _connect(lab: Lab, user: str, password: str) -> pymysql.connections.Connection:
    ip = lab.kjson("get", "service", "-n", "mariadb", "mariadb")["spec"]["clusterIP"]
    return pymysql.connect(host=ip, port=3306, user=user, password=password,
                           connect_timeout=5, autocommit=True)


def logs_in(lab: Lab, user: str, password: str) -> int:
    """0 when ``user`` logs in with ``password``, else MariaDB's error number."""
    try:
        _connect(lab, user, password).close()
    except pymysql.err.OperationalError as exc:
        return int(exc.args[0])
    return 0


def locked(lab: Lab, user: str) -> bool:
    admin, _ = bao_data(lab, "infra/mariadb-admin")
    conn = _connect(lab, "root", admin["password"])
    try:
        with conn.cursor() as cur:
            cur.execute("SHOW CREATE USER %s@'%%'", (user,))
            return "ACCOUNT LOCK" in str(cur.fetchone()[0])
    finally:
        conn.close()


def catalog_ready(lab: Lab) -> bool:
    status = lab.kjson("get", "deployment", "-n", "mariadb", "catalog").get("status") or {}
    return bool(status.get("readyReplicas") == 1 and status.get("updatedReplicas") == 1
                and status.get("replicas") == 1)


def rotate_under_load(lab: Lab) -> dict[str, Any]:
    """The one rotation of the module (conftest ``mariadb_rotation``): ``rotate mariadb
    --confirm`` under steady /work load on catalog, with what the tests compare."""
    eventually(lambda: catalog_ready(lab) or None, 120, "mariadb/catalog Ready")
    old, version = bao_data(lab, "infra/mariadb")
    assert logs_in(lab, old["username"], old["password"]) == 0
    pid = pid_of(lab, "mariadb/mariadb-")
    before = lab.kjson("get", "deployment", "-n", "mariadb", "catalog")["metadata"]["generation"]
    load = Load(lab, limit=90)
    load.PATH = WORK
    with load:
        res = lab.rotate("mariadb", "--confirm", "-o", "json")
    print("load:", load.ok, load.failures[:3])  # the -s figure
    return {"old": old, "version": version, "pid": pid, "generation": before, "result": res,
            "ok": load.ok, "failures": list(load.failures)}
