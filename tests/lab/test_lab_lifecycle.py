"""``rotate lab up | status | fault | down`` against the real parts (lab.md).

One session lab (fast profile) for the read-mostly checks and the faults; private labs for
Reloader and for ``down``.  Tests that change OpenBao restore the original password (and
force a sync) so the session lab stays consistent for the tests after them.  Every lab lives
in a directory of mode 0700 (pytest's): as root, its PostgreSQL runs as ``postgres`` from
the lab's runtime directory in /tmp.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import stat
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
from rotate_lab import control
from rotate_lab.host import priority, processes, runtime_dir

from rotate.core.errors import UsageError
from tests.support.labhandle import LabHandle, read_env_file
from tests.support.polling import eventually, holds

pytestmark = pytest.mark.lab

ENV_KEYS = ("KUBECONFIG", "BAO_ADDR", "BAO_TOKEN", "VAULT_ADDR", "VAULT_TOKEN",
            "CONFIG_CENTER_URL", "CONFIG_CENTER_TOKEN", "ROTATE_CHAIN", "ROTATE_STATE_DIR")


def redis_auth(addr: str, password: str) -> bool:
    host, _, port = addr.rpartition(":")
    pw = password.encode()
    with socket.create_connection((host, int(port)), timeout=5) as s:
        s.sendall(b"*2\r\n$4\r\nAUTH\r\n$%d\r\n%s\r\n" % (len(pw), pw))
        return s.recv(256).startswith(b"+OK")


def available(dep: dict[str, Any]) -> bool:
    st = dep.get("status") or {}
    want = dep["spec"].get("replicas", 1)
    conds = {c["type"]: c["status"] for c in st.get("conditions") or []}
    return bool(st.get("availableReplicas") == want and st.get("updatedReplicas") == want
                and conds.get("Available") == "True")


def es_ready(lab: LabHandle) -> tuple[str, str]:
    es = lab.kjson("get", "externalsecret", "-n", "dragonfly", "dragonfly-password")
    cond = next(c for c in es["status"]["conditions"] if c["type"] == "Ready")
    return cond["status"], cond.get("message", "")


def test_up_brings_every_workload_ready(lab: LabHandle) -> None:
    deps = lab.kjson("get", "deploy", "-A")["items"]
    names = sorted(f"{d['metadata']['namespace']}/{d['metadata']['name']}" for d in deps)
    assert len(deps) == 14, names  # Dragonfly, the ten shop services, three Secret readers
    assert "dragonfly/dragonfly" in names and "shop/cart" in names
    assert "reports/report-env" in names
    assert [n for n, d in zip(names, deps, strict=True) if not available(d)] == []
    assert es_ready(lab)[0] == "True"
    assert lab.up_result["elapsed_seconds"] < 60
    # Idempotent: a second up reports the running lab and starts nothing.
    pids_before = (lab.dir / "pids.json").read_text()
    again = control.up(lab.dir, "fast")
    assert again["already_running"] is True
    assert (lab.dir / "pids.json").read_text() == pids_before


def test_env_file_works_in_a_shell(lab: LabHandle) -> None:
    env_file = lab.dir / "env"
    assert stat.S_IMODE(env_file.stat().st_mode) == 0o600
    for key in ENV_KEYS:
        assert lab.env.get(key), key
    for key in ("KUBECONFIG", "ROTATE_CHAIN", "ROTATE_STATE_DIR"):
        assert os.path.isabs(lab.env[key]) and os.path.exists(lab.env[key]), key
    clean = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}
    proc = subprocess.run(["bash", "-c", f". {env_file} && kubectl get pods -A"], env=clean,
                          capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0, proc.stderr
    assert "dragonfly" in proc.stdout and "cart-" in proc.stdout


def test_status_json_has_the_lab_md_keys(lab: LabHandle) -> None:
    st = control.status(lab.dir)
    assert st["dir"] == str(lab.dir) and st["env_file"] == str(lab.dir / "env")
    parts = st["parts"]
    assert parts["openbao"]["addr"] == lab.env["BAO_ADDR"] and parts["openbao"]["healthy"]
    assert parts["kubernetes"]["kubeconfig"] == lab.env["KUBECONFIG"]
    assert parts["kubernetes"]["server"].startswith("https://127.0.0.1:")
    assert parts["kubernetes"]["healthy"]
    assert parts["config_center"]["url"] == lab.env["CONFIG_CENTER_URL"]
    assert parts["config_center"]["healthy"]
    # The Dragonfly address is real: AUTH with OpenBao's password succeeds, a wrong one not.
    assert redis_auth(parts["dragonfly"]["addr"], lab.bao_password())
    assert not redis_auth(parts["dragonfly"]["addr"], "not-the-password-0123456789")
    assert st["profile"] == "fast" and st["faults"] == {} and st["nice"] == 0
    assert parts["postgres"]["addr"].endswith(":5432") and parts["postgres"]["healthy"]


def test_restricted_context_is_forbidden_secrets(lab: LabHandle) -> None:
    args = ("get", "secret", "-n", "dragonfly", "dragonfly-password-secret")
    denied = lab.kubectl("--context", "lab-restricted", *args, check=False)
    assert denied.returncode != 0
    assert "Forbidden" in denied.stderr or "forbidden" in denied.stderr
    assert lab.kubectl(*args).returncode == 0


def test_force_sync_makes_the_secret_follow_openbao(lab: LabHandle) -> None:
    original = lab.bao_password()
    try:
        lab.set_bao_password("FollowMe" + "x" * 32)
        t0 = time.monotonic()
        lab.force_sync()
        eventually(lambda: lab.secret_password() == "FollowMe" + "x" * 32 or None, 5,
                   "the Secret to follow OpenBao")
        assert time.monotonic() - t0 < 2.5
    finally:
        lab.set_bao_password(original)
        lab.force_sync()
        eventually(lambda: lab.secret_password() == original or None, 5, "restore")


def test_fault_validation(lab: LabHandle) -> None:
    with pytest.raises(UsageError):
        control.fault(lab.dir, "no-such-fault")
    with pytest.raises(UsageError):
        control.fault(lab.dir, "crashloop")  # needs a target
    with pytest.raises(UsageError):
        control.fault(lab.dir, "eso-stall", "cart")  # none, or an ExternalSecret NS/NAME
    assert control.status(lab.dir)["faults"] == {}


def test_fault_eso_stall(lab: LabHandle) -> None:
    original = lab.bao_password()
    control.fault(lab.dir, "eso-stall")
    try:
        lab.set_bao_password("Stalled" + "y" * 33)
        lab.force_sync()
        holds(lambda: lab.secret_password() == original, 1.5, "the Secret to keep its value")
        assert control.status(lab.dir)["faults"] == {"eso-stall": True}
    finally:
        control.fault(lab.dir, "eso-stall", clear=True)
        lab.set_bao_password(original)
    lab.force_sync()
    eventually(lambda: (es_ready(lab)[0] == "True" and lab.secret_password() == original) or None,
               5, "ESO to sync again")


def test_fault_eso_error(lab: LabHandle) -> None:
    control.fault(lab.dir, "eso-error")
    try:
        lab.force_sync()
        _status, message = eventually(
            lambda: ((s := es_ready(lab))[0] == "False" and s) or None, 5, "Ready=False")
        assert message
    finally:
        control.fault(lab.dir, "eso-error", clear=True)
    lab.force_sync()
    eventually(lambda: es_ready(lab)[0] == "True" or None, 5, "Ready=True after clear")


def test_fault_bao_down(lab: LabHandle) -> None:
    control.fault(lab.dir, "bao-down")
    try:
        with pytest.raises(httpx.TimeoutException):
            lab.bao("GET", "sys/health", timeout=0.5)
        assert control.status(lab.dir)["parts"]["openbao"]["healthy"] is False
    finally:
        control.fault(lab.dir, "bao-down", clear=True)
    assert lab.bao("GET", "sys/health").status_code == 200


def test_fault_config_center_5xx(lab: LabHandle) -> None:
    url, token = lab.env["CONFIG_CENTER_URL"], lab.env["CONFIG_CENTER_TOKEN"]

    def put() -> int:
        return httpx.put(f"{url}/v1/services/lab-probe/schema", json={"type": "object"},
                         headers={"Authorization": f"Bearer {token}"}, timeout=5).status_code

    control.fault(lab.dir, "config-center-5xx")
    try:
        assert put() == 503
        reads = httpx.get(f"{url}/v1/services/cart/keys/bootstrap", timeout=5,
                          headers={"Authorization": f"Bearer {token}"})
        assert reads.status_code == 200
    finally:
        control.fault(lab.dir, "config-center-5xx", clear=True)
    assert put() == 200


@pytest.mark.parametrize(("kind", "ns", "name"), [("crashloop", "shop", "cart"),
                                                  ("provider-crashloop", "dragonfly",
                                                   "dragonfly")])
def test_fault_crashloop_blocks_a_rollout_until_cleared(lab: LabHandle, kind: str, ns: str,
                                                        name: str) -> None:
    target = name if kind == "crashloop" else None
    control.fault(lab.dir, kind, target)
    try:
        lab.kubectl("rollout", "restart", f"deployment/{name}", "-n", ns)
        stuck = lab.kubectl("rollout", "status", f"deployment/{name}", "-n", ns,
                            "--timeout=3s", check=False, timeout=15)
        assert stuck.returncode != 0
    finally:
        control.fault(lab.dir, kind, target, clear=True)
    # Clearing the fault lets the crashing new pod's next restart succeed: the rollout
    # completes without anyone deleting pods.
    done = lab.kubectl("rollout", "status", f"deployment/{name}", "-n", ns, "--timeout=20s",
                       check=False, timeout=40)
    assert done.returncode == 0, done.stderr
    if kind == "provider-crashloop":  # consumers reconnect to the new Dragonfly pod
        eventually(lambda: lab.readyz("cart") == 200 or None, 10, "cart ready again")


def test_fault_readyz_fail(lab: LabHandle) -> None:
    assert lab.readyz("cart") == 200
    control.fault(lab.dir, "readyz-fail", "cart")
    try:
        eventually(lambda: lab.readyz("cart") == 503 or None, 5, "cart readyz 503")
        assert lab.readyz("order") == 200
    finally:
        control.fault(lab.dir, "readyz-fail", "cart", clear=True)
    eventually(lambda: lab.readyz("cart") == 200 or None, 5, "cart readyz 200")


def test_reloader_rolls_dragonfly_exactly_once(fresh_lab: Callable[..., LabHandle]) -> None:
    lab = fresh_lab(reloader=True)
    first = lab.revision("dragonfly", "dragonfly")
    # rotate finds this Reloader (Deployment + fresh Lease) and takes its roll (issue 8)
    dep = json.loads(lab.kubectl("get", "deployment/reloader", "-n", "reloader",
                                 "-o", "json").stdout)
    assert dep["status"].get("availableReplicas") == 1
    rotate = str(Path(sys.executable).parent / "rotate")
    # Reloader rolls a provider that reads the Secret at start: the example's Dragonfly is
    # changed live (redis-acl), so this run uses a copy with it rolled (apply: rollout)
    original = Path(lab.env["ROTATE_CHAIN"])
    folder = lab.dir / "rollout-dragonfly"
    folder.mkdir()
    (folder / "schemas").symlink_to(original.parent / "schemas")
    text = original.read_text()
    live = "        apply: redis-acl\n        user: default\n"
    assert live in text
    (folder / "rotate.yaml").write_text(text.replace(live, "", 1))
    env = {**lab.process_env, "ROTATE_CHAIN": str(folder / "rotate.yaml")}
    plan = subprocess.run([rotate, "dragonfly", "-o", "json"], env=env,
                          text=True, capture_output=True, timeout=60, cwd=lab.dir)
    assert "runs (deployment reloader/reloader" in plan.stdout, plan.stdout + plan.stderr
    run = subprocess.run([rotate, "dragonfly", "--confirm"], env=env, text=True,
                         capture_output=True, timeout=180, cwd=lab.dir)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "not rolled again" in run.stdout + run.stderr
    assert lab.revision("dragonfly", "dragonfly") == first + 1  # Reloader's roll only
    before = lab.revision("dragonfly", "dragonfly")
    lab.set_bao_password("Reloaded" + "z" * 32)
    lab.force_sync()
    eventually(lambda: lab.revision("dragonfly", "dragonfly") == before + 1 or None, 10,
               "Reloader to roll Dragonfly")
    done = lab.kubectl("rollout", "status", "deployment/dragonfly", "-n", "dragonfly",
                       "--timeout=30s", check=False, timeout=45)
    assert done.returncode == 0, done.stderr
    holds(lambda: lab.revision("dragonfly", "dragonfly") == before + 1, 1.5, "no second roll")


def mentioning(*paths: Path) -> list[str]:
    """Every process whose argv names one of ``paths`` (pgrep, as a user would look)."""
    found = []
    for path in paths:
        done = subprocess.run(["pgrep", "-af", str(path)], capture_output=True, text=True)
        found += done.stdout.splitlines()
    return found


def uid_of(pid: int) -> int:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(next(x for x in status.splitlines() if x.startswith("Uid:")).split()[1])


@pytest.mark.skipif(os.getuid() != 0, reason="only a lab run by root runs PostgreSQL as "
                    "another user, who cannot reach a private lab directory")
def test_a_root_lab_in_a_private_directory_serves_postgres_and_down_leaves_nothing(
        fresh_lab: Callable[..., LabHandle]) -> None:
    lab = fresh_lab()
    modes = {p: stat.S_IMODE(p.stat().st_mode) for p in (lab.dir, lab.dir.parent)}
    assert modes == {lab.dir: 0o700, lab.dir.parent: 0o700}  # pytest's: no one else enters
    runtime = runtime_dir.recorded(lab.dir)
    assert runtime is not None and runtime.parent == Path("/tmp"), runtime
    st = runtime.stat()
    assert (st.st_uid, stat.S_IMODE(st.st_mode)) == (0, 0o711)
    pids = lab.recorded_pids()
    server = pids["pod db/postgres-0"]
    assert uid_of(server) != 0
    assert Path(os.readlink(f"/proc/{server}/cwd")).is_relative_to(runtime)  # its PGDATA
    login = lab.bao("GET", "secret/data/infra/postgres").json()["data"]["data"]
    host = lab.up_result["parts"]["postgres"]["addr"].rpartition(":")[0]
    with psycopg.connect(host=host, port=5432, dbname="shop", user=login["username"],
                         password=login["password"], connect_timeout=5) as conn:
        assert conn.execute("SELECT count(*) FROM products").fetchone() == (3,)
    assert lab.readyz("order") == 200  # a shop service logs in too

    lines = lab.down()
    assert f"removed {runtime}" in lines
    assert [f"{k} ({p})" for k, p in pids.items() if processes.alive(p)] == []
    assert mentioning(lab.dir, runtime) == []
    assert not os.path.lexists(runtime) and not (lab.dir / runtime_dir.RECORD).exists()
    assert {p: stat.S_IMODE(p.stat().st_mode) for p in modes} == modes  # never widened
    assert control.down(lab.dir) == [f"no lab running in {lab.dir}"]


@pytest.mark.skipif(os.getuid() == 0, reason="as root, the private-directory test above "
                    "checks all of this and more on a lab of its own")
def test_down_leaves_no_process(fresh_lab: Callable[..., LabHandle]) -> None:
    lab = fresh_lab()
    pids = lab.recorded_pids()
    assert {"cluster", "config_center", "openbao"} <= set(pids)
    assert len(pids) >= 3 + 11, pids  # the parts and at least one pod per Deployment
    lines = lab.down()
    assert any("cluster" in line for line in lines)
    assert [f"{k} ({p})" for k, p in pids.items() if processes.alive(p)] == []
    pgrep = subprocess.run(["pgrep", "-f", str(lab.dir)], capture_output=True, text=True)
    assert pgrep.stdout.strip() == ""
    assert control.status(lab.dir)["running"] is False
    assert control.down(lab.dir) == [f"no lab running in {lab.dir}"]


def test_up_again_after_down_keeps_openbao_and_config_center_state(
        fresh_lab: Callable[..., LabHandle]) -> None:
    lab = fresh_lab()
    password = lab.bao_password()
    url, token = lab.env["CONFIG_CENTER_URL"], lab.env["CONFIG_CENTER_TOKEN"]
    before = httpx.get(f"{url}/v1/services/cart/keys/bootstrap", timeout=5,
                       headers={"Authorization": f"Bearer {token}"}).json()
    lab.down()
    again = control.up(lab.dir, "fast")
    assert again["already_running"] is False and again["running"] is True
    lab.env = read_env_file(lab.dir / "env")
    assert lab.bao_password() == password
    assert redis_auth(again["parts"]["dragonfly"]["addr"], password)
    after = httpx.get(f"{lab.env['CONFIG_CENTER_URL']}/v1/services/cart/keys/bootstrap",
                      timeout=5, headers={"Authorization": f"Bearer {token}"}).json()
    assert after == before  # kept, not re-seeded
    assert lab.readyz("cart") == 200


def test_a_lab_at_a_niceness_runs_every_part_and_pod_there(
        fresh_lab: Callable[..., LabHandle]) -> None:
    lab = fresh_lab(nice=7)
    pids = lab.recorded_pids()
    assert sum(k.startswith("pod ") for k in pids) >= 11, pids
    # each part and pod, and every thread of it (a Go runtime starts threads at once)
    niceness = {f"{k} thread {t.name}": processes.niceness(int(t.name))
                for k, p in pids.items() for t in Path(f"/proc/{p}/task").iterdir()}
    niceness = {k: v for k, v in niceness.items() if v is not None}  # not one that just ended
    assert len(niceness) > len(pids) and niceness == {k: 7 for k in niceness}
    sessions = {k: priority.session_niceness(p) for k, p in pids.items()}
    if any(v is not None for v in sessions.values()):  # a kernel with autogroup
        assert sessions == {k: 7 for k in pids}
    assert lab.up_result["nice"] == 7 and control.status(lab.dir)["nice"] == 7
    assert processes.niceness(os.getpid()) == 0  # the caller's own is untouched


def test_up_refuses_a_niceness_out_of_range_before_starting_anything(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="--nice -1: must be 0-19"):
        control.up(tmp_path, "fast", nice=-1)
    assert list(tmp_path.iterdir()) == []


def test_failed_up_shows_the_part_log_and_stops_what_it_started(tmp_path: Path) -> None:
    # A directory where the Config Center's SQLite file belongs: the server cannot start.
    (tmp_path / "configcenter" / "configcenter.db").mkdir(parents=True)
    with pytest.raises(control.LabFailed) as info:
        control.up(tmp_path, "fast")
    message = info.value.message
    assert "config_center" in message and "last lines of" in message
    assert not (tmp_path / "pids.json").exists()
    assert not (tmp_path / runtime_dir.RECORD).exists()  # its runtime directory went too
    pgrep = subprocess.run(["pgrep", "-f", str(tmp_path)], capture_output=True, text=True)
    assert pgrep.stdout.strip() == ""


def test_down_after_the_cluster_was_killed_still_stops_its_pods(
        fresh_lab: Callable[..., LabHandle]) -> None:
    lab = fresh_lab()
    pids = lab.recorded_pids()
    pods = {k: p for k, p in pids.items() if k.startswith("pod ")}
    os.kill(pids["cluster"], signal.SIGKILL)
    eventually(lambda: not processes.alive(pids["cluster"]) or None, 5, "the cluster to die")
    assert any(processes.alive(p) for p in pods.values())  # orphans: only down can stop them
    lab.down()
    assert [k for k, p in pods.items() if processes.alive(p)] == []
