"""A provider plug-in's cases of the fault matrix: credential ``mariadb`` (``apply: mariadb``,
the plug-in examples/provider-mariadb, alternating users, overlap) in a lab started with
``--with mariadb`` (``python -m bench.faults --plugin``).

Cases, each recovered by resume and by rollback:

- kill -9 5 ms into ``provider.apply`` (the plug-in's apply cut mid-way: between its new
  hash and its ``ACCOUNT UNLOCK``, or before either) and at ``provider.retire`` (the
  consumers moved, the account they left not locked yet);
- MariaDB frozen (SIGSTOP of its pod's process) when the run reaches ``provider.apply``, the
  run at ``--timeout 8s``: the plug-in's driver times out and the run fails with exit 12
  through rotate's guard (the plug-in's own exception text never shown); MariaDB is thawed
  before the recovery.

Checked from outside the tool, beyond the matrix's OpenBao and Secret checks: MariaDB itself
(PyMySQL) logs OpenBao's account in with OpenBao's value, the other account is
``ACCOUNT LOCK``ed, ``mariadb/catalog`` is rolled out and answers ``/readyz`` 200, and no value
OpenBao ever held for the path is in MariaDB's general query log.
``PluginCase`` runs a case (bench/fault_case.py, this check beside the matrix's).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from typing import Any

from bench.fault_case import Case
from bench.fault_matrix import RECOVERIES, Spec
from bench.fault_world import Credential, World, thaw, wait

PLUGIN = "mariadb"
NAMESPACE = "mariadb"
USERS = ("app_a", "app_b")
CREDENTIAL = Credential(PLUGIN, "infra/mariadb", "password",
                        (NAMESPACE, "mariadb-password-secret", "password"), "", (), 1)
#: the freeze case's name for its disturbance (Spec.fault: the run gets --timeout)
FREEZE = "provider-freeze"


def plugin_specs(signals: tuple[str, ...] = ("kill",)) -> list[Spec]:
    specs: list[Spec] = []
    for how in RECOVERIES:
        specs += [Spec("signal", PLUGIN, how, kind="provider.apply", sig=sig, delay_ms=5,
                       tagged=True) for sig in signals]
        specs += [Spec("signal", PLUGIN, how, kind="provider.retire", sig=sig, tagged=True)
                  for sig in signals]
        specs.append(Spec(FREEZE, PLUGIN, how, kind="provider.apply", fault=FREEZE,
                          tagged=True))
    return specs


def server_pid(world: World) -> int:
    pods = json.loads((world.lab.dir / "pods.json").read_text())
    found = [int(pid) for key, pid in pods.items() if key.startswith(f"{NAMESPACE}/mariadb-")]
    if len(found) != 1:
        raise RuntimeError(f"expected one MariaDB pod, found {len(found)}")
    return found[0]


def freeze_provider_until_done(world: World, proc: subprocess.Popen[str]) -> None:
    """MariaDB frozen while the (thawed) run goes on until it ends; then thawed again."""
    pid = server_pid(world)
    os.kill(pid, signal.SIGSTOP)
    try:
        thaw(proc)
        proc.wait(timeout=300)
    finally:
        os.kill(pid, signal.SIGCONT)


def _sql(world: World, user: str, password: str, statement: str = "SELECT 1",
         params: tuple[str, ...] = ()) -> Any:
    import pymysql

    ip = world.lab.kubectl_json("get", "service", "-n", NAMESPACE, "mariadb")["spec"][
        "clusterIP"]
    conn = pymysql.connect(host=ip, port=3306, user=user, password=password,
                           connect_timeout=5, read_timeout=10, autocommit=True)
    try:
        with conn.cursor() as cur:
            cur.execute(statement, params)
            return cur.fetchone()
    finally:
        conn.close()


def logs_in(world: World, user: str, password: str) -> bool:
    import pymysql

    try:
        _sql(world, user, password)
    except pymysql.err.OperationalError:
        return False
    return True


def catalog_ready(world: World) -> bool:
    done = subprocess.run(["kubectl", "get", "--raw", f"/api/v1/namespaces/{NAMESPACE}/"
                           "services/catalog:http/proxy/readyz"], env=world.env,
                          capture_output=True, text=True, timeout=30, check=False)
    return done.returncode == 0


def check_plugin(world: World, version: int) -> list[str]:
    """What must hold of ``mariadb`` after any recovery (OpenBao's current version)."""
    problems: list[str] = []
    data = world.bao(f"secret/data/{CREDENTIAL.bao_path}")["data"]
    user, value = str(data["username"]), str(data["password"])
    secret = {k: world.secret_value(CREDENTIAL, (NAMESPACE, "mariadb-password-secret", k))
              for k in ("username", "password")}
    if secret != {"username": user, "password": value}:
        problems.append(f"{PLUGIN}: the Secret's account or password differs from OpenBao")
    if not logs_in(world, user, value):
        problems.append(f"{PLUGIN}: MariaDB refuses OpenBao's value for {user}")
    admin = world.bao("secret/data/infra/mariadb-admin")["data"]
    other = next(u for u in USERS if u != user)
    shown = _sql(world, "root", str(admin["password"]), "SHOW CREATE USER %s@'%%'", (other,))
    if "ACCOUNT LOCK" not in str(shown[0]):
        problems.append(f"{PLUGIN}: the account the consumers left ({other}) is not locked")
    if not wait(lambda: world.rolled_out(f"{NAMESPACE}/catalog") and catalog_ready(world), 90,
                every=0.5):
        problems.append(f"{PLUGIN}: mariadb/catalog not rolled out and ready")
    log = (world.lab.dir / "pvc" / NAMESPACE / "data-mariadb-0" / "general.log").read_text(
        errors="replace")
    # every version OpenBao still keeps (kv-v2 drops the oldest past max_versions, 10)
    kept = world.bao(f"secret/metadata/{CREDENTIAL.bao_path}")["versions"]
    values = {str(world.bao(f"secret/data/{CREDENTIAL.bao_path}?version={v}")["data"][
        "password"]) for v, info in kept.items()
        if int(v) <= version and not info.get("destroyed") and not info.get("deletion_time")}
    if any(v in log for v in values):
        problems.append(f"{PLUGIN}: a password is in MariaDB's general query log")
    return problems


class PluginCase(Case):
    """A provider plug-in's case: MariaDB frozen under the plug-in, and the
    check is MariaDB's own accounts and log beside the matrix's."""

    def act(self, proc: subprocess.Popen[str]) -> dict[str, int]:
        if self.spec.disturbance != FREEZE:
            return super().act(proc)
        freeze_provider_until_done(self.world, proc)
        return {}

    def check(self, expect: dict[str, str], v1: dict[str, int]) -> None:
        super().check(expect, v1)
        cred = self.creds[PLUGIN]
        self.out.problems += check_plugin(self.world, self.world.bao_version(cred))
