"""The credential ``postgres`` of the example chain on the lab, from outside the tool.

The plan works and changes nothing; the four consumers' documents carry the login that
OpenBao and the Secret hold, and the login works against the real server (psql).  The
provider's live apply method and ``provider.verify`` are tested where they are built.
"""

from __future__ import annotations

import json
import os
import subprocess

import pytest
from rotate_lab.systems import postgres

from tests.support.labtools import Lab

pytestmark = pytest.mark.lab

PG_CONSUMERS = ["inventory", "order", "payment", "user"]


def bao_login(lab: Lab) -> tuple[dict[str, str], int]:
    r = lab.bao("GET", f"secret/data/{postgres.BAO_PATH}").json()["data"]
    return dict(r["data"]), int(r["metadata"]["version"])


def test_plan_rotate_postgres_changes_nothing(lab: Lab) -> None:
    before = (bao_login(lab)[1], lab.kjson("get", "statefulset", "-n", "db", "postgres"),
              {svc: lab.bootstrap(svc)["version"] for svc in PG_CONSUMERS})
    plan = lab.rotate("postgres", "-o", "json")
    assert plan.code == 0, plan.output
    doc = json.loads(plan.stdout)
    assert doc["kind"] == "plan" and doc["ok"] is True
    assert sorted(doc["consumers"]) == PG_CONSUMERS
    assert doc["providers"] == ["statefulset/db/postgres"]
    after = (bao_login(lab)[1], lab.kjson("get", "statefulset", "-n", "db", "postgres"),
             {svc: lab.bootstrap(svc)["version"] for svc in PG_CONSUMERS})
    assert after[0] == before[0] and after[2] == before[2]
    assert after[1]["metadata"]["generation"] == before[1]["metadata"]["generation"]


def test_consumer_documents_carry_the_login_the_server_accepts(lab: Lab) -> None:
    login, _ = bao_login(lab)
    assert lab.secret_value("db", "postgres-password-secret", "password") == login["password"]
    for svc in PG_CONSUMERS:
        section = lab.bootstrap(svc)["value"]["postgres"]
        assert section == {"host": postgres.HOST, "port": 5432, "user": login["username"],
                           "password": login["password"], "database": "shop"}, svc
    ip = lab.kjson("get", "service", "-n", "db", "postgres")["spec"]["clusterIP"]
    done = subprocess.run(
        [str(postgres.bindir() / "psql"), "-XAt", "-h", ip, "-U", login["username"], "-d",
         "shop", "-c", "SELECT count(*) FROM products"],
        env={**os.environ, "PGPASSWORD": login["password"]}, capture_output=True, text=True,
        timeout=20, check=False)
    assert done.returncode == 0 and done.stdout.strip() == "3", done.stderr
