"""The lab seen from outside `rotate`, for the fault matrix: OpenBao's HTTP API, kubectl,
a raw RESP ``AUTH`` to Dragonfly, the Config Center's HTTP API, the shop's /readyz.

Invariants:

- Nothing here asks `rotate` whether the chain is consistent; `rotate` is only started,
  signalled, resumed and rolled back.  (Its journal is read only to know *when* to
  disturb a run, and its plan only to know *which* kinds exist.)
- Values are compared, never printed: a problem names what differs, not the value.
"""

from __future__ import annotations

import base64
import json
import os
import re
import signal
import socket
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from bench.world import BenchError, Lab, tool

RUN_ID = re.compile(r"^\d{8}T\d{6}Z-(?P<credential>.+)-[0-9a-f]+$")


@dataclass(frozen=True)
class Credential:
    """What the harness knows of a credential from the chain file, to look at it outside."""

    name: str
    bao_path: str            # under secret/
    bao_key: str
    secret: tuple[str, str, str]  # namespace, name, key
    auth_user: str           # Dragonfly ACL user that authenticates with the value ("": none)
    doc_pointer: tuple[str, ...]  # where each consumer's document holds the value
    per_rotation: int        # OpenBao versions a completed rotation adds
    consumers: tuple[str, ...] = ()
    #: further Secrets other ExternalSecrets copy the value into (namespace, name, key)
    copies: tuple[tuple[str, str, str], ...] = ()
    #: the strategy every run of the matrix names (``--strategy``; "" = the chain's default)
    strategy: str = ""

    def strategy_args(self) -> tuple[str, ...]:
        return ("--strategy", self.strategy) if self.strategy else ()


#: workloads that read a Secret themselves (the lab's reports namespace): rolled out, Ready
READERS = ("reports/report-env", "reports/report-batch", "reports/report-files")

CREDENTIALS = {
    "dragonfly": Credential("dragonfly", "infra/dragonfly", "password",
                            ("dragonfly", "dragonfly-password-secret", "password"),
                            "default", ("dragonfly", "password"), 1,
                            copies=(("reports", "dragonfly-credentials", "DRAGONFLY_PASSWORD"),),
                            # the hard cut: its cases are the restart order's steps (consumers
                            # prepared before the switch, undone when it cannot come) and its
                            # check that the replaced value is refused; the chain's default
                            # for an ACL user is overlap
                            strategy="restart"),
    "dragonfly-acl": Credential("dragonfly-acl", "infra/dragonfly-acl", "password",
                                ("dragonfly", "dragonfly-acl-secret", "password"),
                                "search", ("cache", "password"), 2),
    # shares consumers (order, user) with dragonfly, not a provider; its server is proven by
    # the consumers' readyz (they connect with the document's login)
    "postgres": Credential("postgres", "infra/postgres", "password",
                           ("db", "postgres-password-secret", "password"),
                           "", ("postgres", "password"), 1),
}


def wait(cond: Callable[[], bool], seconds: float, every: float = 0.05) -> bool:
    """Poll an outside condition (a journal line, readyz) until true or the deadline."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(every)
    return False


class Journal:
    """Tails the journal of the newest run of one credential started after ``known``."""

    def __init__(self, runs: Path, credential: str, known: set[str]) -> None:
        self.runs, self.credential, self.known = runs, credential, known
        self.run_id: str | None = None
        self.events: list[dict[str, Any]] = []
        self._offset = 0
        self._partial = b""

    def run_id_now(self) -> str | None:
        """The run's id once its directory exists (None before)."""
        if self.run_id is None and self.runs.is_dir():
            fresh = sorted(p.name for p in self.runs.iterdir() if p.name not in self.known
                           and (m := RUN_ID.match(p.name)) and m["credential"] == self.credential)
            self.run_id = fresh[-1] if fresh else None
        return self.run_id

    def poll(self) -> list[dict[str, Any]]:
        run_id = self.run_id_now()
        if run_id is None:
            return []
        try:
            with (self.runs / run_id / "journal.jsonl").open("rb") as f:
                f.seek(self._offset)
                chunk = f.read()
        except OSError:
            return []
        self._offset += len(chunk)
        lines = (self._partial + chunk).split(b"\n")
        self._partial = lines.pop()
        new = []
        for line in lines:
            try:
                new.append(json.loads(line))
            except ValueError:
                continue
        self.events += new
        return new

    def started(self, kind: str) -> bool:
        self.poll()
        return any(e.get("event") == "step.start" and e.get("kind") == kind
                   for e in self.events)

    def last(self) -> str:
        self.poll()
        if not self.events:
            return "-"
        e = self.events[-1]
        return f"{e.get('event')} {e.get('kind') or ''}#{e.get('index', '')}".rstrip("#")


class World:
    def __init__(self, lab: Lab) -> None:
        self.lab, self.env, self.cwd = lab, lab.env, lab.dir
        self.runs = Path(self.env["ROTATE_STATE_DIR"]) / "runs"
        #: a second machine's state directory (the journal cases)
        self.machine_b = lab.dir / "machine-b"
        self._dragonfly: tuple[str, int] | None = None

    # -- rotate (started, never asked)
    def rotate(self, *args: str, timeout: float = 300,
               stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run([tool("rotate"), *args], env=self.env, cwd=self.cwd,
                              capture_output=True, text=True, timeout=timeout, check=False,
                              input=stdin)

    def spawn(self, *args: str) -> subprocess.Popen[str]:
        return subprocess.Popen([tool("rotate"), *args], env=self.env, cwd=self.cwd,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                text=True)

    def plan(self, credential: str) -> dict[str, Any]:
        cred = CREDENTIALS.get(credential)
        done = self.rotate(credential, "-o", "json", *(cred.strategy_args() if cred else ()))
        try:
            return dict(json.loads(done.stdout))
        except ValueError:
            raise BenchError(f"`rotate {credential} -o json` printed no plan "
                             f"(exit {done.returncode})") from None

    def leases_stale(self, run_id: str) -> bool:
        """Whether every Lease held for ``run_id`` (its credential's and its providers') is
        past ``renewTime + leaseDurationSeconds`` — what `--take-over-lock` waits for."""
        from datetime import UTC, datetime, timedelta

        items = self.lab.kubectl_json("get", "leases", "-n", "rotate-system")["items"]
        mine = [lease["spec"] for lease in items
                if str(lease["spec"].get("holderIdentity", "")).endswith(f"/{run_id}")]
        now = datetime.now(UTC)
        return bool(mine) and all(
            datetime.fromisoformat(str(spec["renewTime"]).replace("Z", "+00:00"))
            + timedelta(seconds=int(spec["leaseDurationSeconds"])) < now for spec in mine)

    def cluster_journal(self, run_id: str) -> str | None:
        """The run's journal as the cluster holds it (its ConfigMap; one part: a case's
        journal is far below 512 KiB), None when it has none."""
        from rotate.clients.cluster_journals import head_name

        items = self.lab.kubectl_json("get", "configmaps", "-n", "rotate-system", "-l",
                                      "rotate.dev/journal=run")["items"]
        head = next((c for c in items if c["metadata"]["name"] == head_name(run_id)), None)
        return None if head is None else str(head["data"].get("journal.jsonl", ""))

    def known_runs(self) -> set[str]:
        return {p.name for p in self.runs.iterdir()} if self.runs.is_dir() else set()

    def run_status(self, run_id: str) -> str:
        done = self.rotate("show", run_id, "-o", "json")
        try:
            return str(json.loads(done.stdout).get("status"))
        except ValueError:
            return "?"

    def fault(self, kind: str, target: str = "", clear: bool = False) -> None:
        args = ["fault", kind, *([target] if target else []), *(["--clear"] if clear else [])]
        done = self.lab.run(*args)
        if done.returncode != 0:
            raise BenchError(f"rotate lab {' '.join(args)}: {done.stderr.strip()}")

    def rollout_restart(self, target: str) -> None:
        ns, name = target.split("/")
        done = subprocess.run(["kubectl", "rollout", "restart", f"deployment/{name}", "-n", ns],
                              env=self.env, capture_output=True, text=True, timeout=30,
                              check=False)
        if done.returncode != 0:
            raise BenchError(f"kubectl rollout restart {target}: {done.stderr.strip()}")

    # -- outside views
    def bao(self, path: str) -> Any:
        r = httpx.get(f"{self.env['BAO_ADDR']}/v1/{path}", timeout=10,
                      headers={"X-Vault-Token": self.env["BAO_TOKEN"]})
        r.raise_for_status()
        return r.json()["data"]

    def bao_put(self, cred: Credential, data: dict[str, Any]) -> None:
        """``bao kv put`` of the credential's path (every key given), as a human would."""
        r = httpx.post(f"{self.env['BAO_ADDR']}/v1/secret/data/{cred.bao_path}", timeout=10,
                       headers={"X-Vault-Token": self.env["BAO_TOKEN"]},
                       json={"data": data})
        r.raise_for_status()

    def bao_data(self, cred: Credential, version: int) -> dict[str, Any]:
        return dict(self.bao(f"secret/data/{cred.bao_path}?version={version}")["data"])

    def bao_version(self, cred: Credential) -> int:
        return int(self.bao(f"secret/metadata/{cred.bao_path}")["current_version"])

    def bao_value(self, cred: Credential) -> str:
        return str(self.bao(f"secret/data/{cred.bao_path}")["data"][cred.bao_key])

    def secret_value(self, cred: Credential, where: tuple[str, str, str] | None = None) -> str:
        ns, name, key = where or cred.secret
        data = self.lab.kubectl_json("get", "secret", "-n", ns, name)["data"]
        return base64.b64decode(data[key]).decode()

    def cc(self, path: str) -> Any:
        r = httpx.get(f"{self.env['CONFIG_CENTER_URL']}{path}", timeout=10,
                      headers={"Authorization": f"Bearer {self.env['CONFIG_CENTER_TOKEN']}"})
        r.raise_for_status()
        return r.json()

    def document_value(self, svc: str, cred: Credential) -> object:
        value: object = self.cc(f"/v1/services/{svc}/keys/bootstrap")["value"]
        for part in cred.doc_pointer:
            value = value.get(part) if isinstance(value, dict) else None
        return value

    def edit_document(self, svc: str, path: tuple[str, ...], value: str,
                      keep: tuple[tuple[str, ...], str] | None = None) -> None:
        """A human's edit: ``path`` set to ``value`` (and ``keep``'s path to its value), in
        one PUT If-Match the version read."""
        cur = self.cc(f"/v1/services/{svc}/keys/bootstrap")
        doc = json.loads(json.dumps(cur["value"]))
        for where, what in ((path, value), *([keep] if keep else [])):
            node = doc
            for part in where[:-1]:
                node = node.setdefault(part, {})
            node[where[-1]] = what
        r = httpx.put(f"{self.env['CONFIG_CENTER_URL']}/v1/services/{svc}/keys/bootstrap",
                      json={"value": doc}, timeout=10,
                      headers={"Authorization": f"Bearer {self.env['CONFIG_CENTER_TOKEN']}",
                               "If-Match": f'"{cur["version"]}"'})
        r.raise_for_status()

    def document_at(self, svc: str, path: tuple[str, ...]) -> object:
        value: object = self.cc(f"/v1/services/{svc}/keys/bootstrap")["value"]
        for part in path:
            value = value.get(part) if isinstance(value, dict) else None
        return value

    def live_tokens(self, svc: str) -> int:
        return sum(1 for t in self.cc(f"/v1/services/{svc}/tokens") if not t["revoked"])

    def shop(self) -> list[str]:
        return sorted(d["metadata"]["name"]
                      for d in self.lab.kubectl_json("get", "deployments", "-n", "shop")["items"])

    def readyz(self, svc: str) -> bool:
        done = subprocess.run(["kubectl", "get", "--raw",
                               f"/api/v1/namespaces/shop/services/{svc}:http/proxy/readyz"],
                              env=self.env, capture_output=True, text=True, timeout=30,
                              check=False)
        return done.returncode == 0

    def rolled_out(self, target: str) -> bool:
        ns, name = target.split("/")
        d = self.lab.kubectl_json("get", "deployment", "-n", ns, name)
        st, want = d.get("status", {}), d["spec"].get("replicas", 1)
        return bool(st.get("observedGeneration", 0) >= d["metadata"].get("generation", 0)
                    and st.get("updatedReplicas", 0) == want
                    and st.get("readyReplicas", 0) == want
                    and st.get("replicas", 0) == want)

    def dragonfly_auth(self, user: str, password: str) -> bool:
        if self._dragonfly is None:
            status = json.loads(self.lab.run("status", "-o", "json").stdout)
            host, _, port = status["parts"]["dragonfly"]["addr"].rpartition(":")
            self._dragonfly = (host, int(port))
        words = [b"AUTH", user.encode(), password.encode()]
        msg = b"*%d\r\n" % len(words) + b"".join(b"$%d\r\n%s\r\n" % (len(w), w) for w in words)
        with socket.create_connection(self._dragonfly, timeout=5) as s:
            s.sendall(msg)
            return s.recv(256).startswith(b"+OK")


def freeze(proc: subprocess.Popen[str]) -> None:
    os.kill(proc.pid, signal.SIGSTOP)


def thaw(proc: subprocess.Popen[str]) -> None:
    os.kill(proc.pid, signal.SIGCONT)
