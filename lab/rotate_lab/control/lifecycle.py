"""``rotate lab up | down | status`` — the lab's lifecycle, on loopback only (``fault``:
:mod:`rotate_lab.control.fault_switch`).

``up`` starts four detached processes (``bao server``, the Config Center, the cluster
process, the kube-proxy process that carries ClusterIP traffic), records their pids in
``DIR/pids.json`` and returns once every Deployment is rollout-complete and the
ExternalSecret is Ready.  ``down`` stops exactly the recorded pids (and the pods the kubelet
recorded), nothing found by name.

Invariants:

- Secrets (tokens, the Dragonfly password) never travel in argv: they are written to files
  of mode 0600 under ``DIR/secrets/`` and to ``DIR/cluster.json`` (0600), which the cluster
  process reads.  ``DIR/env`` (0600) holds tokens too: the lab is a sandbox and that file is
  what makes ``. DIR/env && rotate dragonfly --confirm`` work.
- ``up`` is idempotent: a running lab is reported, not restarted.  A failed ``up`` stops
  what it started and raises :class:`LabFailed` with the failing part's log tail.
- The lab owns a ``127.N.0.0/16`` (pods ``127.N.1.x``, ClusterIPs ``127.N.2.x``) with ``N``
  chosen so that no socket listens in it yet: two labs on one machine never share addresses.
- ``DIR`` may be any directory its user owns, mode 0700 or under one: a root lab's
  PostgreSQL, which runs as another user, gets a runtime directory outside it
  (:mod:`rotate_lab.host.runtime_dir`), made by ``up`` and removed by ``down``; the
  permissions of ``DIR`` and its parents are never changed.
"""

from __future__ import annotations

import os
import socket
import ssl
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rotate.core.errors import RotateError, UsageError
from rotate_lab.cluster.context import Profile
from rotate_lab.control.labdir import OPTIONAL_PARTS, PARTS, LabDir, running
from rotate_lab.host import priority, processes, runtime_dir

UP_DEADLINE = {"fast": 60.0, "realistic": 180.0}

Progress = Callable[[str], None]


#: what Bugsink's first start (its migrations) may add to ``up``'s deadline
BUGSINK_START = 120.0
#: seconds more ``up --with mariadb`` allows: the first start initialises its data directory
MARIADB_START = 60.0


class LabFailed(RotateError):
    """``up`` failed; the message names the part and carries its log tail (no secrets:
    no lab part logs one).  ``part`` names ``DIR/logs/<part>.log``."""

    def __init__(self, message: str, *, part: str | None = None,
                 hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.part = part


# --- up -------------------------------------------------------------------------------------


def up(dir: str | Path, profile: str = "fast", reloader: bool = False, *,
       on_progress: Progress | None = None, services: int | None = None,
       nice: int = 0, extras: tuple[str, ...] = ()) -> dict[str, Any]:
    """Start the lab in ``dir``, every process at niceness ``nice`` (:mod:`priority`);
    return :func:`status` plus ``elapsed_seconds``.

    Two ``up`` on one directory at once serialise on ``DIR/.up.lock``: the second one then
    finds the lab running and reports it.
    """
    import fcntl

    try:
        Profile.named(profile)
    except ValueError:
        raise UsageError(f"unknown lab profile {profile!r} (fast, realistic)") from None
    if services is not None:
        from rotate_lab.shop.scaled import check_count

        check_count(services)
    try:
        priority.check(nice)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    d = LabDir(Path(dir).expanduser().resolve())
    d.root.mkdir(parents=True, exist_ok=True)
    with open(d / ".up.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        return _up_locked(d, profile, reloader, on_progress or (lambda _msg: None), services,
                          nice, extras)


def _up_locked(d: LabDir, profile: str, reloader: bool, say: Progress,
               services: int | None = None, nice: int = 0,
               extras: tuple[str, ...] = ()) -> dict[str, Any]:
    from rotate_lab.control import launch  # heavy imports only when starting

    live, recs = running(d)
    if live and len(live) == len(recs) and {r.part for r in live} >= set(PARTS):
        meta = d.meta()
        say(f"a lab is already running in {d.root} (profile {meta.get('profile')}, reloader "
            f"{'on' if meta.get('reloader') else 'off'}); `rotate lab down` first to change it")
        return {**status(d.root), "already_running": True}
    if recs:
        say("stopping the remains of an earlier lab")
        down(d.root)
    started = time.monotonic()
    for sub in (d.logs, d / "state"):
        sub.mkdir(parents=True, exist_ok=True)
    d.secrets.mkdir(mode=0o700, exist_ok=True)
    os.chmod(d.secrets, 0o700)
    processes.write_json(d / "faults.json", {})
    runtime_dir.remove(d.root)  # what a `down` cut short left: no process of it runs
    if runtime_dir.needed():
        runtime = _create_runtime_dir(d)
        say(f"PostgreSQL runs as another user (root may not run it): its files live in "
            f"{runtime}, which `rotate lab down` removes")
    try:
        launch.start_all(d, profile, reloader, say, services, nice, extras)
        # each generated consumer is one more Python process to start on 2 cores; Bugsink
        # migrates its database on its first start (tens of seconds on a loaded machine)
        extra = (1.5 * max(0, (services or 0) - 3)
                 + (BUGSINK_START if "bugsink" in extras else 0.0)
                 + (MARIADB_START if "mariadb" in extras else 0.0))
        wait_ready(d, deadline=time.monotonic() + UP_DEADLINE[profile] + extra, say=say)
        if "pushgateway" in extras:  # before Prometheus, which then scrapes it too
            launch.start_pushgateway(d, say)
        if "prometheus" in extras:  # scrapes the services' ClusterIPs: once they exist
            launch.start_prometheus(d, say)
    except BaseException as exc:
        part: str | None = getattr(exc, "part", None) or _guess_failed_part(d)
        detail = str(getattr(exc, "message", "") or type(exc).__name__)
        log_path = d.log(part) if part else None
        tail = log_tail(log_path) if log_path else ""
        down(d.root)
        if not isinstance(exc, Exception):  # Ctrl-C: stopped what we started; re-raise
            raise
        raise LabFailed(
            f"lab up failed{f' ({part})' if part else ''}: {detail}"
            + (f"\n--- last lines of {log_path} ---\n{tail}" if tail else ""),
            part=part, hint=f"logs: {d.logs}") from None
    elapsed = time.monotonic() - started
    say(f"lab up in {elapsed:.1f}s — . {d / 'env'}")
    return {**status(d.root), "already_running": False, "elapsed_seconds": round(elapsed, 2)}


def _create_runtime_dir(d: LabDir) -> Path:
    try:
        return runtime_dir.create(d.root)
    except OSError as exc:
        raise LabFailed(
            f"lab up failed: cannot make a runtime directory in {runtime_dir.BASE} "
            f"({exc.strerror or type(exc).__name__}); a lab run by root keeps its PostgreSQL "
            "there, where the postgres user can reach it",
            hint=f"make {runtime_dir.BASE} writable (mode 1777), then: rotate lab up "
                 f"--dir {d.root}") from None


def _guess_failed_part(d: LabDir) -> str | None:
    for rec in d.recorded():
        if not processes.ours(rec):
            return rec.part
    return None


def log_tail(path: Path, lines: int = 20) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


# --- readiness ------------------------------------------------------------------------------


def api_client(d: LabDir, timeout: float = 2.0) -> Any:
    """An httpx client for the lab's API server (admin identity, the lab CA)."""
    import httpx

    meta = d.meta()
    ctx = ssl.create_default_context(cafile=str(d / "tls" / "ca.crt"))
    return httpx.Client(base_url=str(meta["api_server"]), verify=ctx, timeout=timeout,
                        headers={"Authorization": f"Bearer {d.read_secret('admin-token')}"})


def not_ready(d: LabDir) -> list[str]:
    """What still keeps the lab from being Ready (empty list = Ready)."""
    with api_client(d) as c:
        deps = c.get("/apis/apps/v1/deployments")
        deps.raise_for_status()
        es = c.get("/apis/external-secrets.io/v1/namespaces/dragonfly/externalsecrets/"
                   "dragonfly-password")
        sts = c.get("/apis/apps/v1/statefulsets")
        sts.raise_for_status()
    waiting = [f"deployment {ns}/{name}" for ns, name, ok in
               (_rollout_complete(o) for o in deps.json().get("items", [])) if not ok]
    waiting += [f"statefulset {o['metadata']['namespace']}/{o['metadata']['name']}"
                for o in sts.json().get("items", [])
                if int((o.get("status") or {}).get("readyReplicas", 0))
                < int((o.get("spec") or {}).get("replicas", 1))]
    if not deps.json().get("items"):
        waiting.append("deployments (none yet)")
    conds = (es.json().get("status") or {}).get("conditions") or [] if es.is_success else []
    if not any(c.get("type") == "Ready" and c.get("status") == "True" for c in conds):
        waiting.append("externalsecret dragonfly/dragonfly-password")
    return waiting


def _rollout_complete(dep: dict[str, Any]) -> tuple[str, str, bool]:
    """kubectl rollout status's rule for a Deployment."""
    md, spec, st = dep.get("metadata", {}), dep.get("spec", {}), dep.get("status") or {}
    want = int(spec.get("replicas", 1))
    ok = (int(st.get("observedGeneration", 0)) >= int(md.get("generation", 1))
          and int(st.get("updatedReplicas", 0)) >= want
          and int(st.get("replicas", 0)) <= int(st.get("updatedReplicas", 0))
          and int(st.get("availableReplicas", 0)) >= want)
    return md.get("namespace", ""), md.get("name", ""), ok


def wait_ready(d: LabDir, *, deadline: float, say: Progress) -> None:
    last: list[str] = ["api server"]
    shown = ""
    while time.monotonic() < deadline:
        for rec in d.recorded():
            if not processes.ours(rec):
                raise LabFailed(f"{rec.part} exited during start-up", part=rec.part)
        try:
            last = not_ready(d)
        except Exception:  # the API server may still be starting: not yet
            last = ["api server"]
        if not last:
            return
        msg = "waiting for " + ", ".join(last[:4]) + (" …" if len(last) > 4 else "")
        if msg != shown:
            say(msg)
            shown = msg
        time.sleep(0.1)
    raise LabFailed("not Ready in time; still waiting for " + ", ".join(last)
                    + _pod_log_tails(d, last), part="cluster")


def _pod_log_tails(d: LabDir, waiting: list[str]) -> str:
    """The newest pod log of each Deployment still waiting: usually where the reason is."""
    out = []
    for item in waiting:
        kind, _, ref = item.partition(" ")
        if kind not in ("deployment", "statefulset") or "/" not in ref:
            continue
        ns, name = ref.split("/", 1)
        logs = sorted((d.logs / "pods").glob(f"{ns}_{name}-*.log"),
                      key=lambda p: p.stat().st_mtime)
        if logs:
            out.append(f"\n--- last lines of {logs[-1]} ---\n{log_tail(logs[-1], 8)}")
    return "".join(out)


# --- down -----------------------------------------------------------------------------------


def down(dir: str | Path) -> list[str]:
    """Stop every process the lab in ``dir`` recorded, and only those, then remove its
    runtime directory (:mod:`rotate_lab.host.runtime_dir`).  Idempotent."""
    d = LabDir(Path(dir).expanduser().resolve())
    lines: list[str] = []
    # All three at once: the cluster stops its pods itself (its SIGTERM handler waits for
    # them), and nothing needs OpenBao or the Config Center while shutting down.
    lines += processes.stop(d.recorded(), timeout=15.0)
    # Pods outlive the cluster only if it was killed; they are still recorded.
    leftovers = [p for p in d.pods() if processes.ours(p)]
    if leftovers:
        lines += processes.stop(leftovers, timeout=3.0)
    for name in ("pids.json", "pods.json"):
        (d / name).unlink(missing_ok=True)
    lines += runtime_dir.remove(d.root)
    if not lines:
        lines.append(f"no lab running in {d.root}")
    return lines


# --- status ---------------------------------------------------------------------------------


def status(dir: str | Path) -> dict[str, Any]:
    """lab.md's status JSON, with a health probe per part (short timeouts)."""
    import httpx

    d = LabDir(Path(dir).expanduser().resolve())
    meta = d.meta()
    pids = {r.part: r for r in d.recorded()}

    def pid_of(part: str) -> int | None:
        rec = pids.get(part)
        return rec.pid if rec is not None and processes.ours(rec) else None

    def probe(url: str | None, **kw: Any) -> bool:
        if not url:
            return False
        try:
            return bool(httpx.get(url, timeout=1.0, **kw).status_code < 500)
        except Exception:
            return False

    bao_addr = meta.get("openbao_addr")
    cc_url = meta.get("config_center_url")
    kube_ok = False
    dragonfly: str | None = None
    postgres: str | None = None
    api_requests: dict[str, Any] | None = None
    if pid_of("cluster") and meta.get("api_server"):
        try:
            with api_client(d, timeout=1.0) as c:
                kube_ok = c.get("/readyz").status_code == 200
                svc = c.get("/api/v1/namespaces/dragonfly/services/dragonfly")
                if svc.is_success:
                    dragonfly = f"{svc.json()['spec']['clusterIP']}:6379"
                svc = c.get("/api/v1/namespaces/db/services/postgres")
                if svc.is_success:
                    postgres = f"{svc.json()['spec']['clusterIP']}:5432"
                counted = c.get("/lab/api-requests")
                if counted.is_success:
                    api_requests = counted.json()
        except Exception:
            kube_ok = False
    proxy_port = processes.read_json(d / "kube-proxy.port")
    proxy_url = f"http://127.0.0.1:{proxy_port}/healthz" if isinstance(proxy_port, int) \
        else None
    faults = processes.read_json(d / "faults.json")
    running = bool(pids) and all(pid_of(p) for p in PARTS)
    optional = {part: {"url": url, "pid": pid_of(part),
                       "healthy": bool(pid_of(part)) and probe(f"{url}/-/ready")}
                for part in OPTIONAL_PARTS if (url := meta.get(f"{part}_url"))}
    return {
        "dir": str(d.root),
        "env_file": str(d / "env"),
        "running": running,
        "profile": meta.get("profile"),
        "reloader": bool(meta.get("reloader")),
        "services": meta.get("services"),
        "nice": d.nice(),
        "api_requests": api_requests,
        "network": f"127.{meta['net_octet']}.0.0/16" if "net_octet" in meta else None,
        "parts": {
            "openbao": {"addr": bao_addr, "pid": pid_of("openbao"),
                        "healthy": bool(pid_of("openbao")) and probe(
                            f"{bao_addr}/v1/sys/health" if bao_addr else None)},
            "kubernetes": {"server": meta.get("api_server"), "kubeconfig": str(d / "kubeconfig"),
                           "pid": pid_of("cluster"), "healthy": kube_ok},
            # 200 while its list+watch of Services and Endpoints is open (kubeproxy)
            "kube_proxy": {"url": proxy_url, "pid": pid_of("kube_proxy"),
                           "healthy": bool(pid_of("kube_proxy")) and probe(proxy_url)},
            "config_center": {"url": cc_url, "pid": pid_of("config_center"),
                              "healthy": bool(pid_of("config_center")) and probe(
                                  f"{cc_url}/healthz" if cc_url else None)},
            "dragonfly": {"addr": dragonfly, "healthy": bool(dragonfly) and _redis_answers(
                str(dragonfly))},
            "postgres": {"addr": postgres, "healthy": bool(postgres) and _postgres_answers(
                str(postgres))},
            **optional,
        },
        "logs": str(d.logs),
        "faults": faults if isinstance(faults, dict) else {},
    }


def _redis_answers(addr: str) -> bool:
    """Any RESP reply to PING (``-NOAUTH`` included) means the server answers."""
    host, _, port = addr.rpartition(":")
    try:
        with socket.create_connection((host, int(port)), timeout=1.0) as s:
            s.sendall(b"PING\r\n")
            return s.recv(64)[:1] in (b"+", b"-")
    except OSError:
        return False


def _postgres_answers(addr: str) -> bool:
    """``pg_isready`` (the real client tool) through the Service: the server accepts
    connections and an endpoint is Ready.  No login is needed."""
    import subprocess

    from rotate_lab.systems import postgres

    host, _, port = addr.rpartition(":")
    try:
        done = subprocess.run([str(postgres.bindir() / "pg_isready"), "-q", "-h", host,
                               "-p", port, "-t", "1"], capture_output=True, timeout=3,
                              check=False)
    except (OSError, subprocess.SubprocessError, postgres.NoPostgres):
        return False
    return done.returncode == 0
