"""The lab as the benchmark sees it: only through ``rotate lab``, kubectl and files the lab
writes (``DIR/env``, ``DIR/hosts``) — never by importing the lab, which may move.

Invariants:

- :class:`Lab` stops only a lab it started itself (``owned``); ``--no-lab-up`` borrows one.
- The environment handed to child processes is ``os.environ`` plus ``DIR/env``'s exports
  (tokens included: the lab is a sandbox); nothing here prints it.  Without
  ``PYTHONDONTWRITEBYTECODE`` (:func:`bench.startup.measured_environ`): rotate is measured as
  installed; in a checkout the plan reviewed before the measured runs writes its bytecode.
- :class:`Watcher` stamps each watch event with the harness's clock on receipt: the API's
  own timestamps have one-second resolution, too coarse for rollouts of 2–5 s.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.startup import measured_environ

#: the bench directory (runbook.sh, results/) — this package's own folder
BENCH_DIR = Path(__file__).resolve().parent
#: the venv the benchmark runs in (`.venv/bin/python -m bench.rotation`): rotate, bao, kubectl
VENV_BIN = Path(sys.executable).parent


class BenchError(Exception):
    """A failure the harness reports as one line and a non-zero exit (no traceback)."""


def tool(name: str) -> str:
    """The venv's copy of a tool when there is one (rotate, bao), else the PATH's."""
    candidate = VENV_BIN / name
    return str(candidate) if candidate.exists() else name


def read_env_file(path: Path) -> dict[str, str]:
    """``export K=V`` lines of ``DIR/env`` (V possibly shell-quoted)."""
    out: dict[str, str] = {}
    for line in path.read_text().splitlines():
        m = re.match(r"\s*export\s+([A-Za-z_][A-Za-z0-9_]*)=(.*)$", line)
        if m:
            words = shlex.split(m.group(2))
            out[m.group(1)] = words[0] if words else ""
    return out


def parse_hosts(text: str) -> dict[str, str]:
    """hosts-file text → {name: ip} for every name on every line."""
    table: dict[str, str] = {}
    for line in text.splitlines():
        words = line.split("#", 1)[0].split()
        for name in words[1:]:
            table[name] = words[0]
    return table


@dataclass
class Lab:
    dir: Path
    owned: bool = False
    env: dict[str, str] = field(default_factory=dict)

    def run(self, *args: str, timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
        try:
            return subprocess.run([tool("rotate"), "lab", *args, "--dir", str(self.dir)],
                                  capture_output=True, text=True, timeout=timeout,
                                  check=False, env={**os.environ, "NO_COLOR": "1"})
        except subprocess.TimeoutExpired:
            raise BenchError(f"`rotate lab {args[0]} --dir {self.dir}` did not finish within "
                             f"{timeout:.0f}s") from None

    def check_services_option(self) -> None:
        if "--services" not in self.run("up", "--help").stdout:
            raise BenchError("--services: this lab's `rotate lab up` has no --services "
                             "option; run without --services")

    def up(self, profile: str, services: int | None, nice: int = 0,
           extras: tuple[str, ...] = ()) -> None:
        args = ["up", "--profile", profile, "--nice", str(nice)]
        for extra in extras:
            args += ["--with", extra]
        if services is not None:
            self.check_services_option()
            args += ["--services", str(services)]
        self.owned = True  # from here on, down() is ours to call, even if up fails half-way
        done = self.run(*args, timeout=400.0)
        if done.returncode != 0:
            raise BenchError(f"rotate lab up failed (exit {done.returncode}):\n"
                             + (done.stderr or done.stdout).strip()[-2000:])
        self.load_env()

    def borrow(self) -> None:
        """Use a lab someone else started; fail clearly when there is none."""
        done = self.run("status", "-o", "json", timeout=30.0)
        try:
            running = bool(json.loads(done.stdout).get("running"))
        except ValueError:
            running = False
        if not running:
            raise BenchError(f"no lab running in {self.dir}; start one with "
                             f"`rotate lab up --profile realistic --dir {self.dir}` "
                             "or drop --no-lab-up")
        self.load_env()

    def load_env(self) -> None:
        env_file = self.dir / "env"
        if not env_file.is_file():
            raise BenchError(f"{env_file} is missing: is {self.dir} a lab directory?")
        self.env = measured_environ(read_env_file(env_file), {"NO_COLOR": "1"})

    def down(self) -> str:
        if not self.owned:
            return ""
        done = self.run("down", timeout=120.0)
        return (done.stdout + done.stderr).strip()

    def _meta(self) -> dict[str, Any]:
        """``DIR/lab.json``, or {} when it is missing or unreadable."""
        try:
            meta = json.loads((self.dir / "lab.json").read_text())
        except (OSError, ValueError):
            return {}
        return meta if isinstance(meta, dict) else {}

    def nice(self) -> int:
        """The niceness the lab was started at (0 for a lab from before ``--nice``)."""
        value = self._meta().get("nice")
        return value if isinstance(value, int) else 0

    def profile(self) -> str | None:
        value = self._meta().get("profile")
        return str(value) if value is not None else None

    def kubectl_json(self, *args: str) -> Any:
        try:
            done = subprocess.run(["kubectl", *args, "-o", "json"], capture_output=True,
                                  text=True, timeout=30.0, check=False, env=self.env)
        except subprocess.TimeoutExpired:
            raise BenchError(f"kubectl {' '.join(args)} did not answer within 30s") from None
        if done.returncode != 0:
            raise BenchError(f"kubectl {' '.join(args)} failed: {done.stderr.strip()}")
        return json.loads(done.stdout)


@dataclass(frozen=True)
class Target:
    """One service under load: its in-cluster name and the ClusterIP:port it resolves to."""

    name: str
    namespace: str
    fqdn: str
    ip: str
    port: int


def load_targets(lab: Lab, namespace: str = "shop") -> list[Target]:
    """Every Service of the shop, addressed as in-cluster clients do: its DNS name looked
    up in ``DIR/hosts`` (name → ClusterIP), the Service's first port."""
    hosts = parse_hosts((lab.dir / "hosts").read_text())
    items = lab.kubectl_json("get", "services", "-n", namespace)["items"]
    targets: list[Target] = []
    for svc in items:
        md, ports = svc["metadata"], svc["spec"].get("ports") or []
        fqdn = f"{md['name']}.{md['namespace']}.svc.cluster.local"
        if not ports or fqdn not in hosts:
            continue
        targets.append(Target(md["name"], md["namespace"], fqdn, hosts[fqdn],
                              int(ports[0]["port"])))
    if not targets:
        raise BenchError(f"no Service of namespace {namespace} in {lab.dir / 'hosts'}")
    return sorted(targets, key=lambda t: t.name)


@dataclass(frozen=True)
class Event:
    at: float
    type: str
    obj: dict[str, Any]


class Watcher:
    """``kubectl get RESOURCE -A --watch --output-watch-events -o json`` in the background;
    every event kept with its receipt time. ``stop()`` ends the kubectl it started."""

    def __init__(self, lab: Lab, resource: str) -> None:
        self.events: list[Event] = []
        self._proc = subprocess.Popen(
            ["kubectl", "get", resource, "-A", "--watch", "--output-watch-events", "-o",
             "json"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
            env=lab.env)
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        assert self._proc.stdout is not None
        decoder = json.JSONDecoder()
        buf = ""
        for line in self._proc.stdout:
            buf += line
            while buf.strip():
                try:
                    doc, end = decoder.raw_decode(buf.lstrip())
                except ValueError:
                    break  # an object spread over lines: wait for the rest
                buf = buf.lstrip()[end:]
                self.events.append(Event(time.time(), str(doc.get("type")),
                                         doc.get("object") or {}))

    def stop(self) -> list[Event]:
        self._proc.terminate()
        try:
            self._proc.wait(timeout=5.0)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait(timeout=5.0)
        self._thread.join(timeout=5.0)
        return list(self.events)
