"""The lab's PostgreSQL (StatefulSet db/postgres), checked from outside with psql and kubectl.

- the pod is Ready, runs a real ``postgres`` as an unprivileged user, with no password in its
  argv or environment;
- ``psql`` (password in PGPASSWORD, never argv) logs in as the application role through the
  Service and reads the seeded table; a wrong password and the NOLOGIN alternate are refused;
- the shop services with a ``postgres`` section answer /readyz and /work with real queries,
  and the statement log (log_statement=all) never holds a password;
- a restarted pod keeps its data and does not run initdb again: a new password in the Secret
  followed by a restart changes nothing (the trap rotation must not fall into).
"""

from __future__ import annotations

import base64
import os
import socket
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path

import psycopg
import pytest
from rotate_lab.shop.sample_postgres import Postgres, is_transient
from rotate_lab.systems import postgres

from tests.support.labhandle import LabHandle
from tests.support.polling import eventually

pytestmark = pytest.mark.lab

PG_CONSUMERS = ("order", "payment", "inventory", "user")


def secret(lab: LabHandle, name: str, key: str) -> str:
    data = lab.kjson("get", "secret", "-n", "db", name)["data"]
    return base64.b64decode(data[key]).decode()


def service_ip(lab: LabHandle) -> str:
    return str(lab.kjson("get", "service", "-n", "db", "postgres")["spec"]["clusterIP"])


def psql(host: str, user: str, password: str, sql: str,
         database: str = "shop") -> subprocess.CompletedProcess[str]:
    """The real client; the password travels in PGPASSWORD, never on the command line."""
    env = {**os.environ, "PGPASSWORD": password, "PGCONNECT_TIMEOUT": "3"}
    return subprocess.run(
        [str(postgres.bindir() / "psql"), "-X", "-A", "-t", "-h", host, "-p", "5432",
         "-U", user, "-d", database, "-c", sql],
        env=env, capture_output=True, text=True, timeout=20, check=False)


def postgres_pid(lab: LabHandle) -> int:
    return lab.recorded_pids()["pod db/postgres-0"]


def pod_ready(lab: LabHandle) -> str | None:
    pod = lab.kjson("get", "pod", "-n", "db", "postgres-0")
    conds = {c["type"]: c["status"] for c in pod["status"].get("conditions") or []}
    return str(pod["metadata"]["uid"]) if conds.get("Ready") == "True" else None


def pod_log(lab: LabHandle) -> str:
    return (lab.dir / "logs" / "pods" / "db_postgres-0.log").read_text(errors="replace")


def test_bindir_is_the_newest_debian_version(tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LAB_PG_BINDIR", raising=False)
    for version, complete in (("9.6", True), ("15", True), ("16", True), ("17", False)):
        b = tmp_path / version / "bin"
        b.mkdir(parents=True)
        for name in ("postgres", "initdb") if complete else ("psql",):
            (b / name).write_text("")
    (tmp_path / "common").mkdir()
    assert postgres.bindir(tmp_path) == tmp_path / "16" / "bin"
    with pytest.raises(postgres.NoPostgres, match="apt-get install postgresql"):
        postgres.bindir(tmp_path / "nothing")


def test_postgres_pod_is_ready_and_the_app_role_logs_in_with_psql(lab: LabHandle) -> None:
    sts = lab.kjson("get", "statefulset", "-n", "db", "postgres")
    assert sts["status"].get("readyReplicas") == 1
    assert pod_ready(lab)
    user, password = (secret(lab, "postgres-password-secret", k) for k in ("username", "password"))
    assert user == postgres.APP_USER
    host = service_ip(lab)
    ok = psql(host, user, password, "SELECT current_user, count(*) FROM products")
    assert ok.returncode == 0, ok.stderr
    assert ok.stdout.strip() == f"{user}|3"
    wrong = psql(host, user, "not-the-password-at-all", "SELECT 1")
    assert wrong.returncode != 0 and "password authentication failed" in wrong.stderr
    alternate = psql(host, postgres.ALTERNATE_USER, password, "SELECT 1")
    assert alternate.returncode != 0  # app_b: NOLOGIN and no password until a rotation
    admin = psql(host, secret(lab, "postgres-admin-secret", "username"),
                 secret(lab, "postgres-admin-secret", "password"),
                 "SELECT rolsuper FROM pg_roles WHERE rolname = current_user", "postgres")
    assert admin.stdout.strip() == "t", admin.stderr
    # The seeded login holds a SCRAM verifier (set from one the entrypoint computed).
    stored = psql(host, secret(lab, "postgres-admin-secret", "username"),
                  secret(lab, "postgres-admin-secret", "password"),
                  f"SELECT rolpassword LIKE 'SCRAM-SHA-256$4096:%' FROM pg_authid "
                  f"WHERE rolname = '{user}'", "postgres")
    assert stored.stdout.strip() == "t", stored.stderr
    # A real postgres, not as root, and no password on its command line or in its environ.
    pid = postgres_pid(lab)
    cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    assert cmdline[0].endswith(b"/bin/postgres")
    if os.getuid() == 0:
        assert os.stat(f"/proc/{pid}").st_uid != 0
        environ = Path(f"/proc/{pid}/environ").read_bytes()
        assert b"_PASSWORD" not in environ and password.encode() not in environ
    assert all(password.encode() not in arg for arg in cmdline)


def test_shop_services_query_postgres_and_no_statement_holds_a_password(
        lab: LabHandle) -> None:
    for svc in PG_CONSUMERS:
        doc_keys = lab.kubectl("get", "--raw", f"/api/v1/namespaces/shop/services/{svc}:http/"
                               "proxy/work").stdout
        assert '"ok"' in doc_keys, (svc, doc_keys)
        assert lab.readyz(svc) == 200, svc
    def queries_logged() -> str | None:
        text = pod_log(lab)
        return text if "FROM products WHERE id" in text else None

    log = eventually(queries_logged, 10, "the services' queries in the statement log")
    assert f"{postgres.APP_USER}@shop LOG:  statement: SELECT 1" in log
    for name in ("postgres-password-secret", "postgres-admin-secret"):
        assert secret(lab, name, "password") not in log, f"{name}'s password in the log"


def test_restart_keeps_the_data_and_a_new_secret_changes_nothing(
        fresh_lab: Callable[..., LabHandle]) -> None:
    lab = fresh_lab()
    host = service_ip(lab)
    old = secret(lab, "postgres-password-secret", "password")
    wrote = psql(host, postgres.APP_USER, old,
                 "INSERT INTO products VALUES (99, 'survives restarts', 1.00)")
    assert wrote.returncode == 0, wrote.stderr
    # OpenBao and the Secret get a new value, as a naive "restart" rotation would do ...
    new = "NewPassword" + "x" * 29
    r = lab.bao("POST", f"secret/data/{postgres.BAO_PATH}",
                json={"data": {"username": postgres.APP_USER, "password": new}})
    assert r.status_code == 200
    lab.kubectl("annotate", "externalsecret", "-n", "db", "postgres-password",
                f"force-sync={time.time_ns()}", "--overwrite")
    eventually(lambda: secret(lab, "postgres-password-secret", "password") == new or None, 10,
               "the Secret to follow OpenBao")
    # ... and the pod restarts (deleted; the StatefulSet recreates postgres-0).  Meanwhile
    # the sample service's client (as in a shop pod) keeps answering /work: it rides out
    # the restart within its 5 s request deadline.
    client = Postgres({"host": host, "port": 5432, "user": postgres.APP_USER,
                       "password": old, "database": "shop"}, str)
    outcomes: list[str | None] = []
    stop = threading.Event()

    def work_loop() -> None:
        while not stop.is_set():
            outcomes.append(client.work(len(outcomes)))

    worker = threading.Thread(target=work_loop, daemon=True)
    before_pid, before_uid = postgres_pid(lab), pod_ready(lab)
    worker.start()
    try:
        lab.kubectl("delete", "pod", "-n", "db", "postgres-0")
        eventually(lambda: pod_ready(lab) not in (None, before_uid) or None, 30,
                   "postgres-0 to be recreated and Ready")
        count = len(outcomes)
        eventually(lambda: len(outcomes) > count or None, 10, "a /work after the restart")
    finally:
        stop.set()
        worker.join(timeout=15)
    assert outcomes and set(outcomes) == {None}, [o for o in outcomes if o]
    assert postgres_pid(lab) != before_pid
    kept = psql(host, postgres.APP_USER, old, "SELECT name FROM products WHERE id = 99")
    assert kept.returncode == 0, kept.stderr
    assert kept.stdout.strip() == "survives restarts"
    refused = psql(host, postgres.APP_USER, new, "SELECT 1")
    assert refused.returncode != 0 and "password authentication failed" in refused.stderr
    log = pod_log(lab)
    assert log.count("initdb: a new cluster") == 1
    assert "skipping initialization (POSTGRES_PASSWORD is not read)" in log


def test_only_a_lost_connection_is_retried_never_a_refused_login(lab: LabHandle) -> None:
    """The sample service's client: an authentication failure fails at once, unretried."""
    section = {"host": service_ip(lab), "port": 5432, "user": postgres.APP_USER,
               "password": "not-the-password-at-all", "database": "shop"}
    wrong = Postgres(section, str)
    started = time.monotonic()
    assert wrong.work(1) == "postgres: OperationalError"
    assert time.monotonic() - started < 2  # far below the 5 s retry window
    assert wrong.check() == "postgres: OperationalError"
    try:
        psycopg.connect(host=service_ip(lab), user=postgres.APP_USER, dbname="shop",
                        password="not-the-password-at-all", connect_timeout=3)
    except psycopg.OperationalError as exc:
        assert not is_transient(exc)
    for text in ('connection to server at "10.0.0.1", port 5432 failed: Connection refused',
                 "server closed the connection unexpectedly",
                 "FATAL:  the database system is starting up"):
        assert is_transient(psycopg.OperationalError(text)), text
    assert is_transient(psycopg.errors.AdminShutdown("terminating connection"))
    assert not is_transient(psycopg.OperationalError(
        'FATAL:  role "app_b" is not permitted to log in'))
    assert not is_transient(psycopg.errors.UndefinedTable("no products"))


def test_readyz_grace_only_after_a_recent_login(lab: LabHandle,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """A refused connection leaves a pod that logged in < 5 s ago ready, never a new one."""
    section = {"host": service_ip(lab), "port": 5432, "user": postgres.APP_USER,
               "password": secret(lab, "postgres-password-secret", "password"),
               "database": "shop"}
    with socket.socket() as closed:  # bound, never listening: connections are refused
        closed.bind(("127.0.0.1", 0))
        logged_in, never = Postgres(section, str), Postgres(section, str)
        assert logged_in.check() is None
        logged_in.port = never.port = closed.getsockname()[1]
        assert logged_in.check() is None  # the server "restarts": still ready
        assert never.check() == "postgres: OperationalError"
        monkeypatch.setattr("rotate_lab.shop.sample_postgres.RETRY_WINDOW", 0.0)
        assert logged_in.check() == "postgres: OperationalError"  # the grace is bounded
        assert never.work(1) == "postgres: OperationalError"  # the retry too
