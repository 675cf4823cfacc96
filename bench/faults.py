"""Fault matrix: every lab fault, and kill -9 / SIGTERM at every step boundary, each followed
by resume or rollback, checked from outside the tool (issue 10).

One lab (fast profile) in its own directory, started and stopped here.  Each case starts
from a consistent chain, disturbs one run, recovers it the way an operator would, and then
checks, without asking rotate:

- OpenBao: how many versions the case added (1 for a rotation, 2 for a rotation rolled
  back, 0 when it stopped in preflight), and the current value;
- the ExternalSecret's target Secret holds that value; Dragonfly's own AUTH accepts it;
- every consumer's Config Center document holds it; every shop /readyz answers 200;
- every consumer holds exactly one live Config Center token.

It prints the matrix as a table and writes OUT/faults.json.

    .venv/bin/python -m bench.faults [--only SUBSTRING ...] [--signals kill,term]
                                     [--kinds backend.write,sync.wait,...] [--out DIR]
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import httpx

from bench.world import BENCH_DIR, BenchError, Lab, tool

CREDENTIAL, OTHER = "dragonfly", "dragonfly-acl"  # two credentials on one provider
BAO_PATH, BAO_KEY = "infra/dragonfly", "password"
SECRET = ("dragonfly", "dragonfly-password-secret", "password")
PROVIDER = ("dragonfly", "dragonfly")
#: fault kind → target (crashloop and readyz-fail need a service)
FAULTS: dict[str, str | None] = {
    "eso-stall": None, "eso-error": None, "bao-down": None, "config-center-5xx": None,
    "crashloop": "cart", "readyz-fail": "cart", "provider-crashloop": None,
}
KINDS = ("backend.write", "sync.trigger", "sync.wait", "provider.restart", "provider.wait",
         "config.harvest", "config.write", "token.mint", "consumer.restart", "consumer.wait",
         "readyz.check", "token.revoke")


@dataclass
class Case:
    name: str
    disturbance: str
    recovery: str
    exit_codes: list[int] = field(default_factory=list)
    consistent: bool = False
    problems: list[str] = field(default_factory=list)
    seconds: float = 0.0


class World:
    """The lab seen from outside: OpenBao, Kubernetes, the Config Center, Dragonfly."""

    def __init__(self, lab: Lab) -> None:
        self.lab = lab
        self.env = lab.env
        self.cwd = lab.dir

    # -- rotate
    def rotate(self, *args: str, timeout: float = 240) -> subprocess.CompletedProcess[str]:
        return subprocess.run([tool("rotate"), *args], env=self.env, cwd=self.cwd,
                              capture_output=True, text=True, timeout=timeout, check=False)

    def spawn(self, *args: str) -> subprocess.Popen[str]:
        return subprocess.Popen([tool("rotate"), *args], env=self.env, cwd=self.cwd,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def fault(self, kind: str, target: str | None = None, clear: bool = False) -> None:
        args = ["fault", kind, *([target] if target else []), *(["--clear"] if clear else [])]
        done = self.lab.run(*args)
        if done.returncode != 0:
            raise BenchError(f"rotate lab {' '.join(args)}: {done.stderr.strip()}")

    def run_ids(self) -> set[str]:
        runs = Path(self.env["ROTATE_STATE_DIR"]) / "runs"
        return {p.name for p in runs.iterdir()} if runs.is_dir() else set()

    def events(self, run_id: str) -> list[dict[str, Any]]:
        path = Path(self.env["ROTATE_STATE_DIR"]) / "runs" / run_id / "journal.jsonl"
        try:
            lines = path.read_text().splitlines()
        except OSError:
            return []
        out = []
        for line in lines:
            try:
                out.append(json.loads(line))
            except ValueError:
                continue  # a line being written
        return out

    # -- outside views
    def bao(self, path: str) -> Any:
        r = httpx.get(f"{self.env['BAO_ADDR']}/v1/{path}", timeout=10,
                      headers={"X-Vault-Token": self.env["BAO_TOKEN"]})
        r.raise_for_status()
        return r.json()["data"]

    def bao_version(self) -> int:
        return int(self.bao(f"secret/metadata/{BAO_PATH}")["current_version"])

    def bao_value(self) -> str:
        return str(self.bao(f"secret/data/{BAO_PATH}")["data"][BAO_KEY])

    def kubectl_json(self, *args: str) -> Any:
        return self.lab.kubectl_json(*args)

    def secret_value(self) -> str:
        ns, name, key = SECRET
        return base64.b64decode(self.kubectl_json("get", "secret", "-n", ns, name)["data"][key]
                                ).decode()

    def cc(self, path: str) -> Any:
        r = httpx.get(f"{self.env['CONFIG_CENTER_URL']}{path}", timeout=10,
                      headers={"Authorization": f"Bearer {self.env['CONFIG_CENTER_TOKEN']}"})
        r.raise_for_status()
        return r.json()

    def consumers(self) -> list[str]:
        listed = json.loads(self.rotate("list", "-o", "json").stdout)
        for cred in listed.get("credentials", []):
            if cred.get("name") == CREDENTIAL:
                return [str(c) for c in cred.get("consumers", [])]
        raise BenchError(f"credential {CREDENTIAL} is not in the lab's chain file")

    def shop(self) -> list[str]:
        return sorted(d["metadata"]["name"]
                      for d in self.kubectl_json("get", "deployments", "-n", "shop")["items"])

    def readyz(self, svc: str) -> bool:
        done = subprocess.run(["kubectl", "get", "--raw",
                               f"/api/v1/namespaces/shop/services/{svc}:http/proxy/readyz"],
                              env=self.env, capture_output=True, text=True, timeout=30,
                              check=False)
        return done.returncode == 0

    def dragonfly_auth(self, password: str) -> bool:
        status = json.loads(self.lab.run("status", "-o", "json").stdout)
        host, _, port = status["parts"]["dragonfly"]["addr"].rpartition(":")
        pw = password.encode()
        with socket.create_connection((host, int(port)), timeout=5) as s:
            s.sendall(b"*2\r\n$4\r\nAUTH\r\n$%d\r\n%s\r\n" % (len(pw), pw))
            return s.recv(256).startswith(b"+OK")

    def live_tokens(self, svc: str) -> int:
        return sum(1 for t in self.cc(f"/v1/services/{svc}/tokens") if not t["revoked"])


def wait(cond: Callable[[], bool], seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.05)  # polling an outside condition (journal, readyz), not synchronising
    return False


def check(world: World, v0: int, new_versions: int, consumers: list[str]) -> list[str]:
    """Every problem seen from outside ([] = consistent)."""
    problems: list[str] = []
    if not wait(lambda: all(world.readyz(s) for s in world.shop()), 60):
        problems.append("readyz: " + ", ".join(s for s in world.shop() if not world.readyz(s)))
    version = world.bao_version()
    if version - v0 != new_versions:
        problems.append(f"OpenBao: {version - v0} new version(s), expected {new_versions}")
    value = world.bao_value()
    if world.secret_value() != value:
        problems.append("Secret differs from OpenBao")
    if not world.dragonfly_auth(value):
        problems.append("Dragonfly refuses OpenBao's value")
    for svc in consumers:
        doc = world.cc(f"/v1/services/{svc}/keys/bootstrap")["value"]
        if doc.get("dragonfly", {}).get("password") != value:
            problems.append(f"Config Center {svc}/bootstrap differs from OpenBao")
        live = world.live_tokens(svc)
        if live != 1:
            problems.append(f"{svc}: {live} live tokens")
    return problems


def newest(world: World, known: set[str]) -> str | None:
    fresh = sorted(world.run_ids() - known)
    return fresh[-1] if fresh else None


def recover(world: World, run_id: str | None, how: str, codes: list[int]) -> int:
    """resume (until it succeeds) or rollback a disturbed run; OpenBao versions it adds."""
    if run_id is None:
        return 0
    state = json.loads(world.rotate("show", run_id, "-o", "json").stdout or "{}")
    wrote = any(s.get("kind") == "backend.write" and s.get("status") == "done"
                for s in state.get("steps", []))
    if state.get("status") == "succeeded":
        if how == "rollback":
            codes.append(world.rotate("rollback", run_id, "--confirm").returncode)
            return 2
        return 1
    if how == "rollback":
        done = world.rotate("rollback", run_id, "--confirm")
        codes.append(done.returncode)
        after = json.loads(world.rotate("show", run_id, "-o", "json").stdout or "{}")
        wrote = wrote or after.get("status") == "rolled-back"
        return 2 if (wrote and "nothing to roll back" not in done.stdout + done.stderr) else 0
    done = world.rotate("resume", run_id, "--confirm")
    codes.append(done.returncode)
    return 1


def fault_case(world: World, kind: str, target: str | None, how: str,
               consumers: list[str]) -> Case:
    case = Case(f"fault {kind}{' ' + target if target else ''} → {how}", kind, how)
    v0, known = world.bao_version(), world.run_ids()
    world.fault(kind, target)
    try:
        done = world.rotate(CREDENTIAL, "--confirm", "--timeout", "8s")
    finally:
        world.fault(kind, target, clear=True)
    case.exit_codes.append(done.returncode)
    added = 0 if done.returncode in (3, 4) else recover(world, newest(world, known), how,
                                                          case.exit_codes)
    case.problems = check(world, v0, added, consumers)
    return case


def signal_case(world: World, kind: str, sig: signal.Signals, how: str,
                consumers: list[str]) -> Case:
    case = Case(f"{sig.name} at {kind} → {how}", f"{sig.name}@{kind}", how)
    v0, known = world.bao_version(), world.run_ids()
    proc = world.spawn(CREDENTIAL, "--confirm")
    run_id: str | None = None

    def at_step() -> bool:
        nonlocal run_id
        run_id = run_id or newest(world, known)
        return run_id is not None and any(
            e.get("event") == "step.start" and e.get("kind") == kind
            for e in world.events(run_id))

    reached = wait(at_step, 120)
    if reached:
        proc.send_signal(sig)
    proc.communicate(timeout=240)
    case.exit_codes.append(proc.returncode)
    if not reached:
        case.problems.append(f"the run never started {kind}")
    added = recover(world, run_id, how, case.exit_codes)
    case.problems += check(world, v0, added, consumers)
    return case


def shared_provider_case(world: World, consumers: list[str]) -> Case:
    """dragonfly and dragonfly-acl at once: one runs, the other exits 4 (or runs after)."""
    case = Case("two credentials on one provider", f"{CREDENTIAL} ∥ {OTHER}", "-")
    v0 = world.bao_version()
    first, second = world.spawn(CREDENTIAL, "--confirm"), world.spawn(OTHER, "--confirm")
    first.communicate(timeout=240)
    second.communicate(timeout=240)
    case.exit_codes = [first.returncode, second.returncode]
    if sorted(case.exit_codes) not in ([0, 0], [0, 4]):
        case.problems.append(f"exit codes {case.exit_codes}")
    case.problems += check(world, v0, 1 if first.returncode == 0 else 0, consumers)
    return case


def human_restart_case(world: World, consumers: list[str]) -> Case:
    """`kubectl rollout restart` of the provider while the run waits on ESO."""
    case = Case("human rollout restart mid-run", "kubectl rollout restart", "-")
    v0, known = world.bao_version(), world.run_ids()
    world.fault("eso-stall")
    proc = world.spawn(CREDENTIAL, "--confirm")
    try:
        ok = wait(lambda: any(e.get("event") == "step.start" and e.get("kind") == "sync.wait"
                              for e in world.events(newest(world, known) or "-")), 120)
        ns, name = PROVIDER
        subprocess.run(["kubectl", "rollout", "restart", f"deployment/{name}", "-n", ns],
                       env=world.env, capture_output=True, timeout=30, check=False)
    finally:
        world.fault("eso-stall", clear=True)
    proc.communicate(timeout=240)
    case.exit_codes.append(proc.returncode)
    if not ok:
        case.problems.append("the run never reached sync.wait")
    added = recover(world, newest(world, known), "resume", case.exit_codes) \
        if proc.returncode != 0 else 1
    case.problems += check(world, v0, added, consumers)
    return case


def table(cases: list[Case]) -> str:
    rows = [("case", "exit codes", "consistent", "s", "problems")]
    rows += [(c.name, ",".join(map(str, c.exit_codes)), "yes" if c.consistent else "NO",
              f"{c.seconds:.0f}", "; ".join(c.problems)) for c in cases]
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    lines = ["  ".join(r[i].ljust(widths[i]) for i in range(4)) + "  " + r[4] for r in rows]
    ok = sum(c.consistent for c in cases)
    return "\n".join([*lines, f"{ok}/{len(cases)} consistent"])


def _fault(w: World, c: list[str], *, kind: str, target: str | None, how: str) -> Case:
    return fault_case(w, kind, target, how, c)


def _signal(w: World, c: list[str], *, kind: str, sig: signal.Signals, how: str) -> Case:
    return signal_case(w, kind, sig, how, c)


def plan(args: argparse.Namespace) -> list[tuple[str, Callable[[World, list[str]], Case]]]:
    cases: list[tuple[str, Callable[[World, list[str]], Case]]] = []
    for i, (kind, target) in enumerate(FAULTS.items()):
        how = "rollback" if i % 2 else "resume"
        cases.append((f"fault {kind}", partial(_fault, kind=kind, target=target, how=how)))
    sigs = {"kill": signal.SIGKILL, "term": signal.SIGTERM}
    for s in args.signals.split(","):
        for i, kind in enumerate(args.kinds.split(",")):
            how = "rollback" if (i + (s == "term")) % 2 else "resume"
            cases.append((f"{s} {kind}", partial(_signal, kind=kind, sig=sigs[s], how=how)))
    cases.append(("shared provider", shared_provider_case))
    cases.append(("human restart", human_restart_case))
    if args.only:
        cases = [c for c in cases if any(o in c[0] for o in args.only)]
    return cases


def _stop(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def _write(out_dir: Path, cases: list[Case]) -> Path:
    out_dir.mkdir(parents=True, exist_ok=True)
    out = out_dir / "faults.json"
    out.write_text(json.dumps({"cases": [asdict(c) for c in cases],
                               "consistent": sum(c.consistent for c in cases),
                               "total": len(cases)}, indent=2) + "\n")
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.faults",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", action="append", help="run only cases whose name contains this")
    ap.add_argument("--signals", default="kill,term", help="kill,term (default both)")
    ap.add_argument("--kinds", default=",".join(KINDS), help="step kinds to signal at")
    ap.add_argument("--out", type=Path, default=BENCH_DIR / "results")
    args = ap.parse_args(argv)
    signal.signal(signal.SIGTERM, _stop)  # `timeout`/kill: still stop the lab we started
    lab = Lab(Path(tempfile.mkdtemp(prefix="rotate-faults-")))
    lab.dir.chmod(0o755)  # the lab's PostgreSQL runs as its own user and must reach its data
    cases: list[Case] = []
    try:
        lab.up("fast", None)
        world = World(lab)
        consumers = world.consumers()
        for name, make in plan(args):
            began = time.monotonic()
            try:
                case = make(world, consumers)
            except (BenchError, subprocess.SubprocessError, httpx.HTTPError, OSError) as exc:
                case = Case(name, name, "-", problems=[f"harness: {type(exc).__name__}: {exc}"])
            case.consistent = not case.problems
            case.seconds = time.monotonic() - began
            cases.append(case)
            _write(args.out, cases)  # so far: a stopped matrix keeps what it found
            print(f"{'ok ' if case.consistent else 'NO '} {case.name} "
                  f"(exit {case.exit_codes}, {case.seconds:.0f}s) {'; '.join(case.problems)}",
                  flush=True)
    except BenchError as exc:
        print(f"bench.faults: {exc}", file=sys.stderr)
        return 2
    finally:
        lab.down()
    print(table(cases))
    print(f"wrote {_write(args.out, cases)}")
    return 0 if all(c.consistent for c in cases) else 1


if __name__ == "__main__":
    os.environ.setdefault("NO_COLOR", "1")
    sys.exit(main())
