"""The MariaDB plug-in in the lab (``rotate lab up --with mariadb``), checked from outside.

``rotate mariadb --confirm`` — the plug-in examples/provider-mariadb (``apply: mariadb``,
alternating users, overlap by default) — under steady ``/work`` load on ``mariadb/catalog``,
a workload that reads the account and password from the Secret and logs in afresh for every
request.  Evidence from OpenBao's HTTP API, kubectl, MariaDB itself (PyMySQL as root and as
each account) and MariaDB's general query log: catalog moved to the other account, the
account it left is locked, MariaDB was never restarted, neither password ever reached a
statement or a log — and no request fails: the account is locked only once catalog's old pod,
Terminating while it drains, has exited.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.support.labtools import Lab
from tests.support.mariadb_lab import READYZ, bao_data, locked, logs_in, pid_of
from tests.support.proxy_load import api_client

pytestmark = pytest.mark.lab


def test_rotation_moves_catalog_and_locks_the_account_it_left(
        mariadb_lab: Lab, mariadb_rotation: dict[str, Any]) -> None:
    lab, run = mariadb_lab, mariadb_rotation
    old, version, res = run["old"], run["version"], run["result"]
    assert res.code == 0, res.output
    report = json.loads(res.stdout)
    assert report["strategy"] == "overlap"

    new, now = bao_data(lab, "infra/mariadb")
    assert now == version + 1
    assert new["username"] != old["username"] and new["password"] != old["password"]
    assert {k: lab.secret_value("mariadb", "mariadb-password-secret", k)
            for k in ("username", "password")} == new
    # catalog moved: rolled once, serving while the account it left cannot log in
    after = lab.kjson("get", "deployment", "-n", "mariadb", "catalog")["metadata"]["generation"]
    assert after == run["generation"] + 1
    assert logs_in(lab, new["username"], new["password"]) == 0
    assert locked(lab, old["username"]) and not locked(lab, new["username"])
    assert logs_in(lab, old["username"], old["password"]) == 4151  # this account is locked
    with api_client(lab) as client:
        assert client.get(READYZ).status_code == 200
    assert pid_of(lab, "mariadb/mariadb-") == run["pid"]  # changed live, never restarted

    # the passwords never reached a statement, nor any log of MariaDB's or the lab's
    general = lab.dir / "pvc" / "mariadb" / "data-mariadb-0" / "general.log"
    text = general.read_text(errors="replace")
    assert f"Connect\t{new['username']}@" in text and "ALTER USER" in text
    logs = [general, *Path(lab.dir / "logs").rglob("*.log")]
    leaked = [str(p) for p in logs for value in (old["password"], new["password"])
              if value in p.read_text(errors="replace")]
    assert leaked == []


def test_no_request_fails_under_load(mariadb_rotation: dict[str, Any]) -> None:
    assert mariadb_rotation["ok"] > 0
    assert mariadb_rotation["failures"] == []
