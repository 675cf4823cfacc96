"""The shop's sample microservice, run by the lab's kubelet as a pod process.

Standard library only, so that a pod starts in well under a second.  Behaviour (lab.md, "The
sample service"):

- at start it fetches ``GET {CONFIG_CENTER_URL}/v1/bootstrap`` with its machine token
  (:mod:`.sample_bootstrap`; retrying until a short deadline, then exiting non-zero) and
  keeps the document in memory:
  like the real services it reads it *once*, so a rotated password reaches it only through a
  restart — the very thing a rotation has to orchestrate;
- ``/healthz`` is always 200 (liveness);
- ``/readyz`` is 200 only while a fresh AUTH+PING to Dragonfly succeeds (when the document
  has a ``dragonfly`` section) and the Config Center still accepts its token; each check is
  cached for at most :data:`CHECK_TTL` seconds; the ``readyz-fail`` lab fault forces 503 for
  every caller except the kubelet's probe (``User-Agent: kube-probe/…``), so the fault fails
  a rotation's readyz stage without making the pods unready;
- ``/work`` does a real SET+GET round trip to Dragonfly (:mod:`.sample_dragonfly`);
- ``/metrics`` (Prometheus text format) counts the ``/readyz`` answers other than 200 given
  to callers other than the kubelet (``lab_readyz_failures_total{service=NAME}``): what a
  canary's PromQL query in the lab watches (``rotate lab up --with prometheus``);
- a ``cache`` section (host, port, username, password: a Dragonfly ACL user, the credential
  rotated with the overlap strategy) is one more Dragonfly connection, authenticated as that
  user (``AUTH username password``): ``/readyz`` and ``/work`` cover it the same way;
- a ``postgres`` section (host, port, user, password, database) is a PostgreSQL login through
  psycopg 3 (imported only then, so the other services start as fast as before): ``/readyz``
  logs in afresh and runs ``SELECT 1``, ``/work`` logs in and reads the seeded ``products``
  table — a rotated password that the server does not hold shows at once.

Without a Config Center (``CONFIG_CENTER_URL`` unset) the service reads its Dragonfly
connection from its own environment instead — a workload that reads the Secret itself
(chain.md "Workloads that read the Secret"): ``DRAGONFLY_HOST`` (and ``DRAGONFLY_PORT``) with
``DRAGONFLY_PASSWORD`` (an env var from the Secret: fixed until a restart) or
``DRAGONFLY_PASSWORD_FILE`` (a file of a Secret volume, read afresh on every login: the
kubelet's refresh reaches it without a restart).  ``/readyz`` then checks Dragonfly only.
``MARIADB_HOST`` (``MARIADB_PORT``, ``MARIADB_USER``, ``MARIADB_PASSWORD``,
``MARIADB_DATABASE``: env from the Secret, fixed until a restart) adds a ``mariadb`` section
(:mod:`rotate_lab.shop.sample_mariadb`): a fresh PyMySQL login per ``/readyz`` (``SELECT 1``)
and per ``/work`` (a read of ``items``).

Names of the form ``NAME.NS.svc.cluster.local`` are resolved through ``LAB_HOSTS_FILE`` (the
lab's DNS), then through normal DNS.  The password and the token never appear in a log line
or a response body.  SIGTERM stops it promptly with exit status 0, after a short drain
(:data:`DRAIN_SECONDS`) during which it keeps serving: the endpoints controller and the
kubelet react to a pod's deletion concurrently, and a request routed to the pod just before
its endpoint was withdrawn must still be answered — what a ``preStop`` sleep does for real
services, and what lets a rollout serve every request.  Then it stops accepting and lets the
requests still in flight finish (at most :data:`IN_FLIGHT_GRACE` seconds, within the
kubelet's grace period) before it exits: a graceful shutdown, never a cut response.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from rotate_lab.shop.sample_bootstrap import (
    ConfigCenter,
    document_from_env,
    fetch_bootstrap,
)
from rotate_lab.shop.sample_dragonfly import Dragonfly, RespError

CHECK_TTL = 0.5
BOOTSTRAP_DEADLINE = float(os.environ.get("LAB_BOOTSTRAP_DEADLINE", "15"))
DRAIN_SECONDS = float(os.environ.get("LAB_DRAIN_SECONDS", "0.5"))
IN_FLIGHT_GRACE = 1.0


class InFlight:
    """Counts the requests being handled, so that a shutdown can wait for them to finish."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._n = 0

    def __enter__(self) -> None:
        with self._cond:
            self._n += 1

    def __exit__(self, *_: Any) -> None:
        with self._cond:
            self._n -= 1
            self._cond.notify_all()

    def wait_idle(self, timeout: float) -> bool:
        with self._cond:
            return self._cond.wait_for(lambda: self._n == 0, timeout)


def log(message: str) -> None:
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    name = os.environ.get("LAB_SERVICE_NAME", "sample")
    print(f"{stamp} {name}: {message}", flush=True)


class MtimeFile:
    """A small file re-parsed only when its mtime changes (hosts file, faults file)."""

    def __init__(self, path: str | None, parse: Callable[[str], Any], empty: Any) -> None:
        self.path, self.parse, self.empty = path, parse, empty
        self._mtime: int | None = None
        self._value = empty

    def get(self) -> Any:
        if not self.path:
            return self.empty
        try:
            mtime = os.stat(self.path).st_mtime_ns
        except OSError:
            return self.empty
        if mtime != self._mtime:
            try:
                with open(self.path, encoding="utf-8") as fh:
                    self._value = self.parse(fh.read())
                self._mtime = mtime
            except (OSError, ValueError):
                pass
        return self._value


def parse_hosts(text: str) -> dict[str, str]:
    table: dict[str, str] = {}
    for line in text.splitlines():
        fields = line.split("#", 1)[0].split()
        for name in fields[1:]:
            table[name.lower().rstrip(".")] = fields[0]
    return table


HOSTS = MtimeFile(os.environ.get("LAB_HOSTS_FILE"), parse_hosts, {})
FAULTS = MtimeFile(os.environ.get("LAB_FAULTS_FILE"), lambda t: json.loads(t or "{}"), {})


def resolve(host: str) -> str:
    """Lab DNS first (so pods reach ClusterIPs), then the system resolver."""
    table: dict[str, str] = HOSTS.get()
    return table.get(host.lower().rstrip("."), host)


def fault_active(kind: str, target: str) -> bool:
    value = FAULTS.get().get(kind)
    if not value:
        return False
    return value is True or (isinstance(value, list) and target in value)


# -- readiness ------------------------------------------------------------------------------


class Cached:
    """A check whose outcome (None = ok, str = reason) is reused for CHECK_TTL seconds."""

    def __init__(self, check: Callable[[], str | None]) -> None:
        self.check = check
        self._at = 0.0
        self._value: str | None = "not checked yet"
        self._lock = threading.Lock()

    def get(self) -> str | None:
        with self._lock:
            now = time.monotonic()
            if now - self._at >= CHECK_TTL:
                self._value = self.check()
                self._at = time.monotonic()
            return self._value


class Service:
    def __init__(self, name: str, cc: ConfigCenter | None, document: dict[str, Any]) -> None:
        self.name = name
        self.cc = cc
        section = document.get("dragonfly")
        self.dragonfly = Dragonfly(section, resolve) if isinstance(section, dict) else None
        cache = document.get("cache")
        self.cache = Dragonfly(cache, resolve, "cache") if isinstance(cache, dict) else None
        pg = document.get("postgres")
        if isinstance(pg, dict):
            from rotate_lab.shop.sample_postgres import Postgres

            self.postgres: Any = Postgres(pg, resolve)
        else:
            self.postgres = None
        maria = document.get("mariadb")
        if isinstance(maria, dict):
            from rotate_lab.shop.sample_mariadb import MariaDb

            self.mariadb: Any = MariaDb(maria, resolve)
        else:
            self.mariadb = None
        self.token_valid = True
        self.readyz_failures = 0  # /readyz answers other than 200, to callers but the kubelet
        self._work_seq = 0
        self._lock = threading.Lock()
        self.df_check = Cached(self._check_dragonfly)
        self.token_check = Cached(self._check_token)

    def _check_dragonfly(self) -> str | None:
        for label, conn in (("", self.dragonfly), ("cache: ", self.cache)):
            if conn is None:
                continue
            try:
                conn.ping()
            except RespError as exc:
                return f"{label}{exc}"
        if self.postgres is not None and (problem := self.postgres.check()):
            return str(problem)
        return self.mariadb.check() if self.mariadb is not None else None

    def _check_token(self) -> str | None:
        if self.cc is None:  # reads its Secret itself: there is no token to check
            return None
        # Only the Config Center's own answer decides validity: while it is unreachable the
        # last known verdict stands (an outage of the Config Center is not a revoked token).
        try:
            status, _ = self.cc.get_bootstrap()
        except OSError:
            return None if self.token_valid else "config center token was rejected"
        if status in (401, 403):
            self.token_valid = False
        elif status == 200:
            self.token_valid = True
        return None if self.token_valid else f"config center token rejected ({status})"

    def readyz(self, from_kubelet: bool) -> str | None:
        # The readyz-fail fault models a failure the pod's readiness gate does not catch (a
        # deep check only clients run): the kubelet's probe does not see it, so the pods stay
        # Ready, rollouts complete, and only a client's /readyz — rotate's readyz stage —
        # answers 503.
        reason = ("lab fault readyz-fail is active"
                  if not from_kubelet and fault_active("readyz-fail", self.name)
                  else self.df_check.get() or self.token_check.get())
        if reason is not None and not from_kubelet:
            with self._lock:
                self.readyz_failures += 1
        return reason

    def metrics(self) -> str:
        """The Prometheus text exposition of this service's counters."""
        return ("# HELP lab_readyz_failures_total /readyz answers other than 200 (kubelet's "
                "probes excluded).\n# TYPE lab_readyz_failures_total counter\n"
                f'lab_readyz_failures_total{{service="{self.name}"}} {self.readyz_failures}\n')

    def work(self) -> str | None:
        if (self.dragonfly is None and self.cache is None and self.postgres is None
                and self.mariadb is None):
            return None
        with self._lock:
            self._work_seq += 1
            n = self._work_seq
        for label, conn in (("", self.dragonfly), ("cache: ", self.cache)):
            if conn is None:
                continue
            try:
                conn.round_trip(f"lab:work:{self.name}:{n % 100}", f"{time.time():.6f}")
            except RespError as exc:
                return f"{label}{exc}"
        if self.postgres is not None and (problem := self.postgres.work(n)):
            return str(problem)
        return self.mariadb.work(n) if self.mariadb is not None else None


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    #: a real server's listen backlog, not socketserver's 5, which a burst of load requests
    #: through kube-proxy overflows (a dropped SYN is retried a whole second later)
    request_queue_size = 128


def make_handler(service: Service, in_flight: InFlight) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        server_version = "lab-sample-service"

        def log_message(self, format: str, *args: Any) -> None:
            pass  # probes every 200 ms would drown the pod log

        def _send(self, code: int, body: dict[str, Any]) -> None:
            raw = (json.dumps(body) + "\n").encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

        def do_GET(self) -> None:
            with in_flight:
                self._route()

        def _route(self) -> None:
            path = self.path.split("?", 1)[0]
            if path == "/healthz":
                self._send(200, {"status": "ok"})
            elif path == "/readyz":
                agent = self.headers.get("User-Agent") or ""
                reason = service.readyz(from_kubelet=agent.startswith("kube-probe/"))
                if reason is None:
                    self._send(200, {"status": "ready"})
                else:
                    self._send(503, {"status": "not ready", "reason": reason})
            elif path == "/metrics":
                raw = service.metrics().encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)
            elif path == "/work":
                reason = service.work()
                if reason is None:
                    self._send(200, {"status": "ok"})
                else:
                    self._send(503, {"status": "failed", "reason": reason})
            else:
                self._send(404, {"error": "not found"})

        do_POST = do_GET

    return Handler


def main() -> int:
    name = os.environ.get("LAB_SERVICE_NAME", "sample")
    url = os.environ.get("CONFIG_CENTER_URL", "")
    token = os.environ.get("CONFIG_CENTER_TOKEN", "")
    host = os.environ.get("POD_IP", "127.0.0.1")
    port = int(os.environ.get("PORT", "8080"))
    own = document_from_env(os.environ)
    if own is None and (not url or not token):
        log("CONFIG_CENTER_URL and CONFIG_CENTER_TOKEN must be set (or DRAGONFLY_HOST with "
            "DRAGONFLY_PASSWORD or DRAGONFLY_PASSWORD_FILE, or MARIADB_HOST)")
        return 1
    cc: ConfigCenter | None = None
    if own is None:
        try:
            cc = ConfigCenter(url, token, resolve)
        except ValueError as exc:
            log(str(exc))
            return 1
    stopping = threading.Event()

    def exit_now(*_: Any) -> None:
        raise SystemExit(0)

    signal.signal(signal.SIGTERM, exit_now)  # until the server runs: nothing to drain
    document = (fetch_bootstrap(cc, time.monotonic() + BOOTSTRAP_DEADLINE, log)
                if cc is not None else own or {})
    try:
        service = Service(name, cc, document)
    except (ValueError, TypeError) as exc:
        log(f"bad bootstrap document: {exc}")
        return 1
    log(f"bootstrap loaded (keys: {', '.join(sorted(document))}); dragonfly: "
        f"{'yes' if service.dragonfly else 'no'}; cache: {'yes' if service.cache else 'no'}; "
        f"postgres: {'yes' if service.postgres else 'no'}; "
        f"mariadb: {'yes' if service.mariadb else 'no'}")
    in_flight = InFlight()
    server = _Server((host, port), make_handler(service, in_flight))

    def drain_then_shutdown() -> None:
        threading.Event().wait(DRAIN_SECONDS)  # keep serving while the endpoint goes away
        server.shutdown()

    def on_term(*_: Any) -> None:
        if not stopping.is_set():
            stopping.set()
            threading.Thread(target=drain_then_shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, on_term)
    log(f"listening on {host}:{port}")
    try:
        server.serve_forever(poll_interval=0.2)
        in_flight.wait_idle(IN_FLIGHT_GRACE)  # answer what was accepted, then exit
    finally:
        server.server_close()
    log("stopped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
