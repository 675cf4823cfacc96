"""Starting the lab's parts, in dependency order (called by ``control.up``).

Order and why: OpenBao and the Config Center run outside the "cluster" and must answer
before the cluster process starts, because the cluster seeds Endpoints pointing at them and
Secrets holding tokens they issued.  The cluster process comes next, then kube-proxy (it
lists and watches the API server, so it needs the API server's address and the kubeconfig);
``control.up`` then waits on the API server until every workload is Ready.

Everything the cluster process needs that is secret (API tokens, the ESO token, the
services' machine tokens) goes into ``DIR/cluster.json`` (mode 0600), never argv.

Each step that fails raises :class:`PartFailed` naming the part, so ``up`` can show that
part's log tail.
"""

from __future__ import annotations

import secrets
import string
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rotate_lab.cluster.context import choose_octet
from rotate_lab.control.labdir import OPTIONAL_PARTS
from rotate_lab.host import processes, runtime_dir
from rotate_lab.host.ports import free_port
from rotate_lab.shop import files as shopfiles
from rotate_lab.shop.catalog import BAO_SECRET_PATH, DRAGONFLY_HOST, SHOP

if TYPE_CHECKING:
    from rotate_lab.control.labdir import LabDir

Say = Callable[[str], None]
_ALNUM = string.ascii_letters + string.digits
ESO_POLICY = "lab-eso-read"
#: The credential dragonfly-acl (overlap strategy): the ACL user ``search`` of Dragonfly,
#: whose previous password is kept next to the current one.
BAO_ACL_PATH = "infra/dragonfly-acl"
ACL_PREVIOUS_KEY = "password_previous"
CACHE_USER = "search"
#: ESO only reads: a leaked ESO token cannot write or rotate anything.
ESO_POLICY_HCL = ('path "secret/data/*" { capabilities = ["read"] }\n'
                  'path "secret/metadata/*" { capabilities = ["read", "list"] }\n')


class PartFailed(Exception):
    """A part did not start; ``part`` names its log (``DIR/logs/<part>.log``)."""

    def __init__(self, part: str, message: str) -> None:
        super().__init__(message)
        self.part = part
        self.message = message


def random_alnum(n: int) -> str:
    return "".join(secrets.choice(_ALNUM) for _ in range(n))


def record_pid(d: LabDir, part: str, pid: int) -> None:
    path = d / "pids.json"
    pids = processes.read_json(path)
    pids = pids if isinstance(pids, dict) else {}
    pids[part] = pid
    processes.write_json(path, pids)


def start_all(d: LabDir, profile: str, reloader: bool, say: Say,
              services: int | None = None, nice: int = 0,
              extras: tuple[str, ...] = ()) -> None:
    """Start every part; each at niceness ``nice`` (kept in ``lab.json``, read by
    :meth:`LabDir.nice`), and the pods at the cluster's through the kubelet."""
    octet = choose_octet()
    meta: dict[str, Any] = {"profile": profile, "reloader": reloader, "net_octet": octet,
                            "started_at": time.time(), "services": services, "nice": nice,
                            "extras": list(extras)}
    from rotate_lab.shop import scaled as scaled_shop

    generated = scaled_shop.generate(d.root, shopfiles.packaged_dir(d.root), services)
    if generated:
        say(f"generated {len(generated)} more consumers of dragonfly in {d / 'shop'}")
    if "mariadb" in extras:
        from rotate_lab.systems import mariadb

        try:
            mariadb.check_available()
        except mariadb.NoMariaDb as exc:
            raise PartFailed("cluster", str(exc)) from None
        chain = mariadb.add_to_chain(d.root, shopfiles.packaged_dir(d.root))
        say(f"added the credential mariadb (apply: mariadb) to {chain}")
    processes.write_json(d / "lab.json", meta)
    for name in ("admin-token", "restricted-token", "config-center-admin-token"):
        if not d.secret(name).exists():
            d.write_secret(name, secrets.token_urlsafe(32))

    say("starting the Config Center and OpenBao")
    cc_pid, cc_port_file = spawn_config_center(d)
    # A fresh lab picks the Dragonfly password up front so that seeding the Config Center
    # overlaps OpenBao's init/unseal (each takes ~1-2 s); a restarted lab keeps the password
    # OpenBao already holds, which its Config Center documents were written with.
    fresh = not (d / "openbao" / "init.json").exists()
    password = random_alnum(40) if fresh else None
    acl_password = random_alnum(40) if fresh else None
    pg_password = random_alnum(40) if fresh else None
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="lab-up-bao") as pool:
        bao_f = pool.submit(start_openbao, d, password, acl_password, pg_password)
        cc_url = wait_port_file(d, "config_center", cc_pid, cc_port_file)
        if password is None or acl_password is None or pg_password is None:
            password, acl_password, pg_password = bao_f.result()[3:6]
        say("seeding the Config Center")
        machine_tokens = seed_config_center(d, cc_url, password, acl_password, pg_password,
                                            generated)
        bao_addr, root_token, eso_token = bao_f.result()[:3]
    meta.update(openbao_addr=bao_addr, config_center_url=cc_url)
    processes.write_json(d / "lab.json", meta)

    say("starting the cluster (API server, controllers, kubelet)")
    from rotate_lab.cluster.api import tls

    tls_dir = d / "tls"
    material = tls.generate()
    material.write(tls_dir)
    cluster_cfg = {
        "net_octet": octet,
        "openbao": {"addr": bao_addr, "eso_token": eso_token},
        "config_center": {"url": cc_url},
        "machine_tokens": machine_tokens,
        "tls_dir": str(tls_dir),
        # a root lab's: where the kubelet puts the files of a server run as another user
        "runtime_dir": str(runtime) if (runtime := runtime_dir.recorded(d.root)) else None,
        "tokens": {"admin": d.read_secret("admin-token"),
                   "restricted": d.read_secret("restricted-token")},
    }
    processes.write_json(d / "cluster.json", cluster_cfg, mode=0o600)
    port_file = d / "apiserver.port"
    port_file.unlink(missing_ok=True)
    argv = [sys.executable, "-m", "rotate_lab.cluster", "--dir", str(d.root),
            "--profile", profile, "--net-octet", str(octet)]
    if reloader:
        argv.append("--reloader")
    for extra in extras:
        if extra not in OPTIONAL_PARTS:  # those are processes of their own
            argv += ["--with", extra]
    pid = processes.spawn(argv, log=d.log("cluster"), cwd=d.root, nice=d.nice())
    record_pid(d, "cluster", pid)
    port = int(wait_file(d, "cluster", pid, port_file, timeout=30.0))
    server = f"https://127.0.0.1:{port}"
    meta["api_server"] = server
    processes.write_json(d / "lab.json", meta)

    from rotate_lab.cluster.api import kubeconfig

    kubeconfig.write(d / "kubeconfig", server, material.ca_pem, d.read_secret("admin-token"),
                     d.read_secret("restricted-token"))
    say("starting kube-proxy (ClusterIP traffic)")
    start_kube_proxy(d)
    write_env(d, server_env={
        "KUBECONFIG": str(d / "kubeconfig"),
        "BAO_ADDR": bao_addr, "BAO_TOKEN": root_token,
        "VAULT_ADDR": bao_addr, "VAULT_TOKEN": root_token,
        "CONFIG_CENTER_URL": cc_url,
        "CONFIG_CENTER_TOKEN": d.read_secret("config-center-admin-token"),
        "ROTATE_CHAIN": str(shopfiles.chain_file(d.root)),
        "ROTATE_STATE_DIR": str(d / "state"),
    })


def start_prometheus(d: LabDir, say: Say) -> str:
    """Start Debian's Prometheus scraping the shop's services (rotate_lab.systems.prometheus)
    and the lab's Pushgateway when there is one; ``PROMETHEUS_URL`` in ``DIR/env``."""
    from rotate_lab.systems import prometheus

    try:
        prometheus.binary()
    except prometheus.NoPrometheus as exc:
        raise PartFailed("prometheus", str(exc)) from None
    say("starting Prometheus (scrapes the shop's /metrics)")
    directory = d / "prometheus"
    gateway = d.meta().get("pushgateway_url")
    prometheus.write_config(directory, prometheus.shop_targets(d / "hosts"),
                            pushgateway=str(gateway).partition("://")[2] if gateway else None)
    return _start_loopback_part(d, "prometheus", "PROMETHEUS_URL",
                                lambda port: prometheus.argv(directory, port))


def start_pushgateway(d: LabDir, say: Say) -> str:
    """Start Debian's Prometheus Pushgateway (rotate_lab.systems.pushgateway), where a run
    configured with ``notify.pushgateway: {urlEnv: PUSHGATEWAY_URL}`` pushes its metrics;
    ``PUSHGATEWAY_URL`` in ``DIR/env``."""
    from rotate_lab.systems import pushgateway

    try:
        pushgateway.binary()
    except pushgateway.NoPushgateway as exc:
        raise PartFailed("pushgateway", str(exc)) from None
    say("starting the Prometheus Pushgateway (for notify.pushgateway)")
    return _start_loopback_part(d, "pushgateway", "PUSHGATEWAY_URL", pushgateway.argv)


def _start_loopback_part(d: LabDir, part: str, env_var: str,
                         argv: Callable[[int], list[str]]) -> str:
    """Spawn an optional part (a Prometheus-family server: ``GET /-/ready``) on a free
    loopback port, record its pid as ``part``, wait until it is ready, keep its URL in
    ``lab.json`` (``<part>_url``) and export it as ``env_var`` in ``DIR/env``."""
    from rotate_lab.systems import prometheus

    port = free_port()
    pid = processes.spawn(argv(port), log=d.log(part), cwd=d.root, nice=d.nice())
    record_pid(d, part, pid)
    url = f"http://127.0.0.1:{port}"
    try:
        prometheus.wait_ready(url, lambda: processes.alive(pid), time.monotonic() + 30.0,
                              what=part)
    except TimeoutError as exc:
        raise PartFailed(part, str(exc)) from None
    processes.write_json(d / "lab.json", {**d.meta(), f"{part}_url": url})
    with open(d / "env", "a") as env:
        env.write(f"export {env_var}='{url}'\n")
    return url


def start_kube_proxy(d: LabDir) -> int:
    """Spawn ``python -m rotate_lab.kubeproxy`` and wait until its listeners are open.

    After the kubeconfig exists (it is the proxy's only way to the API server) and before
    ``up`` waits for workloads: pods and ESO reach Dragonfly, PostgreSQL and OpenBao through
    ClusterIPs, so a late proxy would only make them retry."""
    port_file = d / "kube-proxy.port"
    port_file.unlink(missing_ok=True)
    pid = processes.spawn([sys.executable, "-m", "rotate_lab.kubeproxy", "--dir", str(d.root)],
                          log=d.log("kube_proxy"), cwd=d.root, nice=d.nice())
    record_pid(d, "kube_proxy", pid)
    wait_file(d, "kube_proxy", pid, port_file, timeout=30.0)
    return pid


def write_env(d: LabDir, server_env: dict[str, str]) -> None:
    """``DIR/env``: export lines, values single-quoted for the shell (0600: holds tokens)."""
    import shlex

    lines = ["# rotate lab — source me: . " + str(d / "env"),
             "# The tokens below are the lab's (a sandbox): BAO_TOKEN is OpenBao's root token,",
             "# CONFIG_CENTER_TOKEN the Config Center's admin token."]
    lines += [f"export {k}={shlex.quote(v)}" for k, v in server_env.items()]
    path = d / "env"
    tmp = path.with_name("env.tmp")
    tmp.write_text("\n".join(lines) + "\n")
    tmp.chmod(0o600)
    tmp.replace(path)


def wait_file(d: LabDir, part: str, pid: int, path: Path, timeout: float) -> str:
    """Wait for a port file written atomically by a starting part; fail fast if it dies."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            text = path.read_text().strip()
        except FileNotFoundError:
            text = ""
        if text:
            return text
        if not processes.alive(pid):
            raise PartFailed(part, f"{part} exited during start-up")
        time.sleep(0.02)
    raise PartFailed(part, f"{part} did not start listening within {timeout:.0f}s")


# --- Config Center --------------------------------------------------------------------------


def spawn_config_center(d: LabDir) -> tuple[int, Path]:
    base = d / "configcenter"
    base.mkdir(exist_ok=True)
    port_file = base / "port"
    port_file.unlink(missing_ok=True)
    pid = processes.spawn([
        sys.executable, "-m", "rotate_lab.systems.configcenter",
        "--db", str(base / "configcenter.db"), "--host", "127.0.0.1", "--port", "0",
        "--port-file", str(port_file),
        "--admin-token-file", str(d.secret("config-center-admin-token")),
        "--faults-file", str(d / "faults.json"),
    ], log=d.log("config_center"), cwd=d.root, nice=d.nice())
    record_pid(d, "config_center", pid)
    return pid, port_file


def wait_port_file(d: LabDir, part: str, pid: int, port_file: Path) -> str:
    return f"http://127.0.0.1:{int(wait_file(d, part, pid, port_file, timeout=15.0))}"


def bootstrap_document(svc: str, schema: dict[str, Any], password: str,
                       acl_password: str | None = None,
                       pg_password: str | None = None) -> dict[str, Any]:
    """The initial ``bootstrap`` document, in the shape the service's schema requires."""

    doc: dict[str, Any] = {"service": {"name": svc}}
    props = schema.get("properties") or {}
    if "dragonfly" in props:
        doc["dragonfly"] = {"host": DRAGONFLY_HOST, "port": 6379, "password": password,
                            "url": f"redis://:{password}@{DRAGONFLY_HOST}:6379/0"}
    if "cache" in props and acl_password is not None:
        doc["cache"] = {"host": DRAGONFLY_HOST, "port": 6379, "username": CACHE_USER,
                        "password": acl_password}
    if "postgres" in props and pg_password is not None:
        from rotate_lab.systems import postgres

        doc["postgres"] = postgres.bootstrap_section(pg_password)
    return doc


def seed_config_center(d: LabDir, url: str, password: str,
                       acl_password: str | None = None,
                       pg_password: str | None = None,
                       generated: list[str] | None = None) -> dict[str, str]:
    """Schemas, bootstrap documents (kept if present: a restarted lab keeps its history),
    and one fresh machine token per service.  Returns {service: token}."""
    import httpx


    headers = {"Authorization": f"Bearer {d.read_secret('config-center-admin-token')}"}

    def one(c: Any, svc: str) -> str:
        schema = shopfiles.service_schema(svc, d.root)
        r = c.put(f"/v1/services/{svc}/schema", json=schema)
        if not r.is_success:
            raise PartFailed("config_center",
                             f"Config Center: storing {svc}'s schema: HTTP {r.status_code}")
        r = c.put(f"/v1/services/{svc}/keys/bootstrap",
                  json={"value": bootstrap_document(svc, schema, password, acl_password,
                                                   pg_password)},
                  headers={"If-None-Match": "*"})
        if not (r.is_success or r.status_code == 412):  # 412: kept from an earlier run
            raise PartFailed("config_center", f"Config Center: storing {svc}'s bootstrap "
                                              f"document: HTTP {r.status_code}")
        r = c.post(f"/v1/services/{svc}/tokens")
        if r.status_code != 201:
            raise PartFailed("config_center",
                             f"Config Center: minting {svc}'s token: HTTP {r.status_code}")
        return str(r.json()["token"])

    # One request at a time per service but services in parallel: ~30 small writes.
    with httpx.Client(base_url=url, headers=headers, timeout=5.0) as c, \
            ThreadPoolExecutor(max_workers=len(SHOP), thread_name_prefix="lab-seed") as pool:
        futures = {svc: pool.submit(one, c, svc) for svc in (*SHOP, *(generated or []))}
        try:
            return {svc: f.result() for svc, f in futures.items()}
        except httpx.HTTPError as exc:
            raise PartFailed("config_center",
                             f"Config Center: {type(exc).__name__} while seeding") from None


# --- OpenBao --------------------------------------------------------------------------------


def start_openbao(d: LabDir, password: str | None, acl_password: str | None = None,
                  pg_password: str | None = None) -> tuple[str, str, str, str, str, str]:
    """Start/unseal bao; make sure secret/infra/dragonfly and secret/infra/dragonfly-acl exist;
    mint ESO's read-only token.

    Returns (addr, root token, ESO token, current Dragonfly password, current ACL password,
    current PostgreSQL application password); secret/infra/postgres-admin (the superuser)
    is seeded with a random password when missing (:func:`rotate_lab.systems.postgres.seed_bao`).
    Existing passwords are kept (the Config Center documents of a restarted lab were written
    with them); otherwise ``password``/``acl_password`` (or random ones) are written — the
    ACL user's previous password equal to the current one, as after a completed rotation.
    """
    import httpx

    from rotate_lab.systems import openbao

    try:
        bao = openbao.start(d.root, nice=d.nice())
        record_pid(d, "openbao", bao.pid)
        try:
            data, _ = openbao.get_secret(bao.addr, bao.root_token, BAO_SECRET_PATH)
            password = str(data["password"])
        except (openbao.BaoError, KeyError):
            password = password or random_alnum(40)
            openbao.put_secret(bao.addr, bao.root_token, BAO_SECRET_PATH,
                               {"password": password})
        try:
            data, _ = openbao.get_secret(bao.addr, bao.root_token, BAO_ACL_PATH)
            acl_password = str(data["password"])
        except (openbao.BaoError, KeyError):
            acl_password = acl_password or random_alnum(40)
            openbao.put_secret(bao.addr, bao.root_token, BAO_ACL_PATH,
                               {"password": acl_password, ACL_PREVIOUS_KEY: acl_password})
        from rotate_lab.systems import postgres

        pg_password = postgres.seed_bao(bao.addr, bao.root_token,
                                        pg_password or random_alnum(40), random_alnum(40))
        from rotate_lab.systems import bugsink

        bugsink.seed_bao(bao.addr, bao.root_token, random_alnum(32))  # read with --with
        from rotate_lab.systems import mariadb

        mariadb.seed_bao(bao.addr, bao.root_token, random_alnum(40), random_alnum(40))
        h = {"X-Vault-Token": bao.root_token}
        r = httpx.put(f"{bao.addr}/v1/sys/policies/acl/{ESO_POLICY}", headers=h,
                      json={"policy": ESO_POLICY_HCL}, timeout=5.0)
        r.raise_for_status()
        r = httpx.post(f"{bao.addr}/v1/auth/token/create", headers=h, timeout=5.0,
                       json={"policies": [ESO_POLICY], "ttl": "720h",
                             "display_name": "lab-eso", "no_parent": True})
        r.raise_for_status()
        eso_token = str(r.json()["auth"]["client_token"])
    except openbao.BaoError as exc:
        raise PartFailed("openbao", str(exc)) from None
    except httpx.HTTPError as exc:
        raise PartFailed("openbao", f"OpenBao: {type(exc).__name__} while creating the ESO "
                                    "token") from None
    return bao.addr, bao.root_token, eso_token, password, acl_password, pg_password
