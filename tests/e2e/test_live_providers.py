"""Providers that hold their own password, changed live (issue 7), checked from outside.

On one lab: bad input first (nothing changes), then ``rotate postgres --confirm``
(alternating users) and its rollback, the plain ``rotate dragonfly --confirm`` — overlap by
default (redis-acl, user ``default``: never rolled, each live change an Event on its workload), and
a chain whose postgres provider says ``apply: rollout`` (the restart changes nothing inside
PostgreSQL: ``provider.verify`` stops the run) and its rollback, and last a ``rotate
postgres --confirm`` killed (SIGKILL) once provider.apply has acted, then resumed.  Every
rotation except the killed one runs under steady ``/work`` load on the services that use the
provider (the Load loop of tests/support/proxy_load.py, one per service), and no request may
fail — the rollout trap included, where PostgreSQL restarts: the sample service rides that out as a
production client does (lab.md).  Evidence comes from psql (PGPASSWORD), raw Redis AUTH,
OpenBao's HTTP API, kubectl, the Config Center API and the pids the lab's kubelet records.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import pytest
import redis
from rotate_lab.systems import postgres

from tests.support import pg_connections
from tests.support.labtools import SHOP, Lab, newest_run
from tests.support.paths import EXAMPLE_CHAIN
from tests.support.polling import eventually
from tests.support.port_forward import KUBECTL, kubectl_port_forward
from tests.support.proxy_load import Load, acl_auth

pytestmark = pytest.mark.lab

PG_CONSUMERS = ("inventory", "order", "payment", "user")
DF_CONSUMERS = ("cart", "order", "user", "search")
PG_PROVIDER_LIVE = """        apply: postgres
        users: [app_a, app_b]
        usernameKey: username
        database: shop
        admin:
          user: postgres
          secretKey: {namespace: db, name: postgres-admin-secret, key: password}
    # No strategy: alternating users hold two values, so overlap is the default (the plan
    # says why); `--strategy restart` cuts the active role over instead.
"""


def chain_with(tmp: Path, provider: str) -> Path:
    """The example chain with the postgres provider's apply block replaced."""
    text = EXAMPLE_CHAIN.read_text()
    assert PG_PROVIDER_LIVE in text
    out = tmp / "rotate.yaml"
    (tmp / "schemas").symlink_to(EXAMPLE_CHAIN.parent / "schemas")
    out.write_text(text.replace(PG_PROVIDER_LIVE, provider))
    return out


@contextmanager
def load_on(lab: Lab, services: tuple[str, ...], limit: float = 30.0
            ) -> Iterator[dict[str, Load]]:
    """Steady GET /work on each service until the block ends (or ``limit`` seconds)."""
    with ExitStack() as stack:
        loads: dict[str, Load] = {}
        for svc in services:
            load = Load(lab, limit)
            load.PATH = f"/api/v1/namespaces/shop/services/{svc}:http/proxy/work"
            loads[svc] = stack.enter_context(load)
        yield loads


def assert_no_failure(loads: dict[str, Load]) -> None:
    print("load:", {s: (x.ok, len(x.failures)) for s, x in loads.items()})  # the -s figures
    assert {s: load.failures[:3] for s, load in loads.items()} == {s: [] for s in loads}
    assert all(load.ok > 0 for load in loads.values()), {s: x.ok for s, x in loads.items()}


def bao_data(lab: Lab, path: str) -> tuple[dict[str, str], int]:
    r = lab.bao("GET", f"secret/data/{path}").json()["data"]
    return dict(r["data"]), int(r["metadata"]["version"])


def pid_of(lab: Lab, prefix: str) -> int:
    pods = json.loads((lab.dir / "pods.json").read_text())
    found = [int(pid) for key, pid in pods.items() if key.startswith(prefix)]
    assert len(found) == 1, pods
    return found[0]


def psql_ok(lab: Lab, user: str, password: str, port: int | None = None) -> bool:
    """A login through the Service's ClusterIP, or through 127.0.0.1:``port``."""
    ip = "127.0.0.1" if port else \
        lab.kjson("get", "service", "-n", "db", "postgres")["spec"]["clusterIP"]
    done = subprocess.run(
        [str(postgres.bindir() / "psql"), "-XAt", "-h", ip, "-p", str(port or 5432), "-U",
         user, "-d", "shop", "-c", "SELECT count(*) FROM products"],
        env={**os.environ, "PGPASSWORD": password}, capture_output=True, text=True,
        timeout=20, check=False)
    return done.returncode == 0


def all_ready(lab: Lab) -> dict[str, int]:
    return {svc: code for svc in SHOP if (code := lab.readyz(svc)) != 200}


# --------------------------------------------------------------------------- bad input



def assert_moved_to_new_pair(lab: Lab, old: dict[str, str], new: dict[str, str],
                             pid: int) -> None:
    """From outside: a new username and password, in every consumer's document; psql logs
    in with the new pair and is refused the old one; the same postgres process; all ready."""
    assert new["username"] != old["username"] and new["password"] != old["password"]
    for svc in PG_CONSUMERS:
        section = lab.bootstrap(svc)["value"]["postgres"]
        assert (section["user"], section["password"]) == (new["username"], new["password"])
    assert psql_ok(lab, new["username"], new["password"])
    assert not psql_ok(lab, old["username"], old["password"])
    assert pid_of(lab, "db/postgres-") == pid
    assert all_ready(lab) == {}

def test_overlap_on_a_single_role_is_refused_naming_the_credential(lab: Lab,
                                                                   tmp_path: Path) -> None:
    chain = chain_with(tmp_path, PG_PROVIDER_LIVE.replace(
        "users: [app_a, app_b]\n        usernameKey: username\n", "user: app_a\n"))
    before = bao_data(lab, postgres.BAO_PATH)
    res = lab.rotate("postgres", "--confirm", "--strategy", "overlap", "--chain", str(chain))
    assert res.code == 2, res.output
    assert "'postgres'" in res.output and "users" in res.output
    assert bao_data(lab, postgres.BAO_PATH) == before


@pytest.mark.parametrize("admin", [
    "{namespace: db, name: postgres-admin-missing, key: password}",   # Secret missing
    "{namespace: db, name: postgres-admin-secret, key: username}",  # refused (wrong value)
])
def test_admin_missing_or_refused_stops_in_preflight(lab: Lab, tmp_path: Path,
                                                     admin: str) -> None:
    chain = chain_with(tmp_path, PG_PROVIDER_LIVE.replace(
        "{namespace: db, name: postgres-admin-secret, key: password}", admin))
    before = bao_data(lab, postgres.BAO_PATH)
    docs = {svc: lab.bootstrap(svc)["version"] for svc in PG_CONSUMERS}
    res = lab.rotate("postgres", "--confirm", "--chain", str(chain))
    assert res.code == 3, res.output
    assert "provider.access statefulset/db/postgres" in res.output
    assert bao_data(lab, postgres.BAO_PATH) == before
    assert {svc: lab.bootstrap(svc)["version"] for svc in PG_CONSUMERS} == docs


# --------------------------------------------------------------------------- postgres


def port_forwards(lab: Lab, pod: str) -> int:
    """Port-forward streams the lab's API server opened to ``pod`` (its record)."""
    doc = json.loads(lab.kubectl("get", "--raw", "/lab/api-requests"))
    return sum(f["streams"] for f in doc["port_forwards"] if f["pod"] == pod)


def test_postgres_alternating_users_then_rollback(lab: Lab) -> None:
    """Run as from a laptop — no KUBERNETES_SERVICE_HOST, no addressEnv — rotate reaches
    PostgreSQL through the API server's port-forward: every login of its admin came from the
    pod's own address (the lab's port-forward path), none through the Service, and the API
    server recorded the streams."""
    old, version = bao_data(lab, postgres.BAO_PATH)
    pid = pid_of(lab, "db/postgres-")
    assert psql_ok(lab, old["username"], old["password"])
    assert "KUBERNETES_SERVICE_HOST" not in lab.process_env
    pod_ip = lab.kjson("get", "pod", "-n", "db", "postgres-0")["status"]["podIP"]
    log = pg_connections.log_path(lab.dir)
    offset, streams = log.stat().st_size, port_forwards(lab, "postgres-0")

    with load_on(lab, PG_CONSUMERS) as loads:
        res = lab.rotate("postgres", "--confirm", "-o", "json")
    assert res.code == 0, res.output
    assert_no_failure(loads)
    run_id = json.loads(res.stdout)["run_id"]
    with log.open("rb") as fh:
        fh.seek(offset)
        seen = pg_connections.connections(fh.read().decode(errors="replace"))
    admin = [c.host for c in seen if c.user == "postgres"]  # only rotate logs in as admin
    assert admin and set(admin) == {pod_ip}, seen
    forwarded = sum(1 for c in seen if c.host == pod_ip)
    assert port_forwards(lab, "postgres-0") - streams >= forwarded > len(admin)

    new, new_version = bao_data(lab, postgres.BAO_PATH)
    assert new_version == version + 1
    assert lab.secret_value("db", "postgres-password-secret", "username") == new["username"]
    assert_moved_to_new_pair(lab, old, new, pid)

    # rollback of the live run: the old login works again end to end, the new one nowhere
    back = lab.rotate("rollback", run_id, "--confirm")
    assert back.code == 0, back.output
    restored, _ = bao_data(lab, postgres.BAO_PATH)
    assert (restored["username"], restored["password"]) == (old["username"], old["password"])
    assert lab.secret_value("db", "postgres-password-secret", "password") == old["password"]
    for svc in PG_CONSUMERS:
        assert lab.bootstrap(svc)["value"]["postgres"]["user"] == old["username"]
    assert psql_ok(lab, old["username"], old["password"])
    assert not psql_ok(lab, new["username"], new["password"])
    assert pid_of(lab, "db/postgres-") == pid
    assert all_ready(lab) == {}


@pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed")
def test_kubectl_port_forward_reaches_the_providers(lab: Lab) -> None:
    """The real ``kubectl port-forward`` (SPDY/3.1) against the lab, to a pod and to a
    Service, as an operator reaches a provider from a laptop."""
    login, _ = bao_data(lab, postgres.BAO_PATH)
    with kubectl_port_forward(["port-forward", "-n", "db", "pod/postgres-0", ":5432"],
                              lab.process_env) as port:
        assert psql_ok(lab, login["username"], login["password"], port)
        assert not psql_ok(lab, login["username"], "not-the-password", port)
    password = lab.secret_value("dragonfly", "dragonfly-password-secret", "password")
    with kubectl_port_forward(["port-forward", "-n", "dragonfly", "svc/dragonfly", ":6379"],
                              lab.process_env) as port:
        assert acl_auth(f"127.0.0.1:{port}", "default", password)
        assert not acl_auth(f"127.0.0.1:{port}", "default", "not-the-password")


# --------------------------------------------------------------------------- dragonfly


def test_dragonfly_overlap_is_live_and_the_default(lab: Lab) -> None:
    """The lab chain's dragonfly credential names no strategy: an ACL user holds two values,
    so the plain ``rotate dragonfly --confirm`` is the overlap, and the plan says why."""
    plan = lab.rotate("dragonfly", "-o", "json")
    assert plan.code == 0, plan.output
    planned = json.loads(plan.stdout)
    assert planned["strategy"] == "overlap"
    assert planned["strategy_reason"] == ("default overlap: every provider holds two values "
                                          "(redis-acl)")
    addr = lab.status()["parts"]["dragonfly"]["addr"]
    host, _, port = addr.rpartition(":")
    old = lab.bao_password()
    pid = pid_of(lab, "dragonfly/dragonfly-")
    with redis.Redis(host=host, port=int(port), password=old) as r:
        r.set("live-rotation-key", "kept")

    with load_on(lab, DF_CONSUMERS) as loads:
        res = lab.rotate("dragonfly", "--confirm", "-o", "json")
    assert res.code == 0, res.output
    assert_no_failure(loads)
    report = json.loads(res.stdout)
    kinds = [s["kind"] for s in report["steps"]]
    assert "provider.restart" not in kinds and "provider.retire" in kinds
    # never rolled, yet every live change is told on the provider's workload, naming the run
    told = lab.kjson("get", "events", "-n", "dragonfly",
                     "--field-selector", "involvedObject.name=dragonfly")["items"]
    ours = [e for e in told if report["run_id"] in e["message"]]  # listed in no set order
    assert sorted((e["type"], e["reason"], e["involvedObject"]["kind"]) for e in ours) == [
        ("Normal", "CredentialRotated", "Deployment"),
        ("Normal", "PreviousValueRetired", "Deployment"),
        ("Normal", "ProviderApplied", "Deployment")], told

    new = lab.bao_password()
    assert pid_of(lab, "dragonfly/dragonfly-") == pid
    with redis.Redis(host=host, port=int(port), password=new) as r:
        assert r.get("live-rotation-key") == b"kept"
    assert acl_auth(addr, "default", new)
    assert not acl_auth(addr, "default", old)
    assert all_ready(lab) == {}


# --------------------------------------------------------------------------- rollout trap


def _template(lab: Lab, svc: str) -> dict[str, str]:
    """A consumer's pod template annotations (what a roll changes)."""
    dep = lab.kjson("get", "deployment", svc, "-n", "shop")
    return dict(dep["spec"]["template"]["metadata"].get("annotations") or {})


def test_rollout_postgres_stops_at_verify_then_rolls_back(lab: Lab, tmp_path: Path) -> None:
    old, version = bao_data(lab, postgres.BAO_PATH)
    chain = chain_with(tmp_path, "        apply: rollout\n        probe: postgres\n"
                                 f"        user: {old['username']}\n    strategy: restart\n")
    docs = {svc: lab.bootstrap(svc)["value"] for svc in PG_CONSUMERS}
    templates = {svc: _template(lab, svc) for svc in PG_CONSUMERS}

    # Under load through the whole run (provider.verify retries until its 30 s deadline, so
    # the load outlives the default 30 s): PostgreSQL restarts (StatefulSet: the old pod
    # goes before the new one starts, the Service has no endpoint meanwhile), the prepared
    # consumers' new pods never get Ready and consumer.undo removes them.  The consumers
    # ride out the restart: /work retries a refused/dropped connection within its 5 s
    # deadline and /readyz stays ready for 5 s after the last login (sample_postgres).
    with load_on(lab, PG_CONSUMERS, limit=120) as loads:
        res = lab.rotate("postgres", "--confirm", "--chain", str(chain), "-o", "json",
                         "--timeout", "30s")
    assert res.code == 12, res.output
    assert_no_failure(loads)
    report = json.loads(res.stdout)
    failed = [s for s in report["steps"] if s["status"] == "failed"]
    assert [s["kind"] for s in failed] == ["provider.verify"]
    assert "use apply: postgres" in report["message"]
    # the restart order prepared the consumers before the provider step; its failure undid
    # that: the documents hold the old values again, the pod templates are the old ones
    assert {svc: lab.bootstrap(svc)["value"] for svc in PG_CONSUMERS} == docs
    assert {svc: _template(lab, svc) for svc in PG_CONSUMERS} == templates
    assert all_ready(lab) == {}
    assert psql_ok(lab, old["username"], old["password"])

    back = lab.rotate("rollback", report["run_id"], "--confirm", "--chain", str(chain))
    assert back.code == 0, back.output
    restored, restored_version = bao_data(lab, postgres.BAO_PATH)
    assert restored == old and restored_version == version + 2
    assert lab.secret_value("db", "postgres-password-secret", "password") == old["password"]
    assert all_ready(lab) == {}


# --------------------------------------------------------------------------- resume


def _provider_apply_reached(lab: Lab, run_id: str) -> bool:
    """provider.apply recorded what it observed (mid-step) or is done: the moment to kill."""
    return any(e.get("kind") == "provider.apply"
               and e.get("event") in ("step.progress", "step.done")
               for e in lab.journal_events(run_id))


def test_postgres_killed_at_provider_apply_then_resume_completes(lab: Lab) -> None:
    old, version = bao_data(lab, postgres.BAO_PATH)
    pid = pid_of(lab, "db/postgres-")
    known = set(lab.run_ids())
    proc = lab.spawn_rotate("postgres", "--confirm")
    try:
        run_id = eventually(lambda: newest_run(lab, known), 30, "the run's journal")
        eventually(lambda: _provider_apply_reached(lab, run_id) or None, 60,
                   "the run to reach provider.apply")
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
    finally:
        proc.kill()
        proc.communicate(timeout=10)
    events = lab.journal_events(run_id)
    assert not any(e.get("event") == "run.end" for e in events), "killed before its end"
    assert not any(e.get("kind") == "provider.retire" and e.get("event") == "step.done"
                   for e in events)
    assert bao_data(lab, postgres.BAO_PATH)[1] == version + 1

    res = lab.rotate("resume", run_id, "--confirm", "-o", "json")
    assert res.code == 0, res.output
    new, new_version = bao_data(lab, postgres.BAO_PATH)
    assert new_version == version + 1, "resume must never write a second value"
    assert_moved_to_new_pair(lab, old, new, pid)
