"""Fault matrix: every lab fault before and during a run, kill -9 / SIGTERM at the start of
every step kind the plan has (and a few ms into the state-changing ones), two credentials on
one provider, two sharing consumers at several offsets, a human `kubectl rollout restart` or
Config Center edit mid-run — each recovered by resume and by rollback, and checked from
outside the tool
(docs/reliability.md).

One lab (fast profile) in its own directory, started and stopped here.  The kinds come from
``rotate CRED -o json`` (bench/fault_matrix.py).  A run is disturbed at a step by freezing
it (SIGSTOP) the moment its journal shows that step's ``step.start``, then killing it, or
switching a lab fault on / restarting a workload and letting it go on (SIGCONT).  After the
recovery, without asking rotate (bench/fault_world.py):

- OpenBao: a resumed rotation added exactly one version (two for overlap: its retire), and
  the value changed; a rollback added as many more (it is a rotation back: restore, and
  under overlap its retire) and the value is the one before the case; a run stopped in
  preflight (exit 3/4) added none;
- the ExternalSecret's target Secret holds OpenBao's value; Dragonfly's own AUTH accepts it
  (as that credential's ACL user) and, for the restart strategy, refuses the value it
  replaced; every consumer's Config Center document holds it and every shop /readyz is 200;
- every consumer of any credential holds exactly one live Config Center token;
- nothing lost: a human's edit of a document pointer no credential owns is still there;
- the recovery (resume, rollback) itself exited 0.

It prints the matrix as a Markdown table and writes OUT/faults.json.

    .venv/bin/python -m bench.faults [--only SUBSTRING ...] [--signals kill,term]
                                     [--shard I/N] [--list] [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import httpx

from bench.fault_matrix import Outcome, Spec, matrix, outcomes_of, paired, select, table
from bench.fault_world import CREDENTIALS, Credential, Journal, World, freeze, thaw, wait
from bench.world import BENCH_DIR, BenchError, Lab

MAIN, OTHER = "dragonfly", "dragonfly-acl"  # two credentials on one provider
SHARING = "postgres"  # shares consumers (order, user) with MAIN, not a provider
#: the pointer no credential owns that a human edit changes too (the schema allows no new
#: one): the host spelled capitalised, which resolves the same (DNS is case-insensitive)
HUMAN_KEEP = ("dragonfly", "host")
SIGS = {"kill": signal.SIGKILL, "term": signal.SIGTERM}
FAULT_TIMEOUT = "8s"


class Case:
    """One case against the world: baseline, disturbance, recovery, outside check."""

    def __init__(self, world: World, creds: dict[str, Credential], spec: Spec) -> None:
        self.world, self.creds, self.spec = world, creds, spec
        self.out = Outcome(spec.name)
        self.kept = ""  # a human edit: the value it gave a pointer no credential owns
        self.v0 = {c: world.bao_version(cred) for c, cred in creds.items()}
        self.value0 = {c: world.bao_value(cred) for c, cred in creds.items()}
        self.known = world.known_runs()

    # -- disturb
    def start(self, credential: str) -> tuple[subprocess.Popen[str], Journal]:
        timeout = ("--timeout", FAULT_TIMEOUT) if self.spec.fault else ()
        proc = self.world.spawn(credential, "--confirm", *timeout)
        return proc, Journal(self.world.runs, credential, self.known)

    def finish(self, proc: subprocess.Popen[str]) -> int:
        try:
            return proc.wait(timeout=300)
        except subprocess.TimeoutExpired:
            proc.kill()
            self.out.problems.append("the run hung (killed after 300 s)")
            return proc.wait()

    def at_kind(self, proc: subprocess.Popen[str], journal: Journal) -> bool:
        """Freeze the run as soon as its journal shows step.start of the spec's kind."""
        kind = self.spec.kind
        seen = wait(lambda: journal.started(kind) or proc.poll() is not None, 180, every=0.001)
        if seen and proc.poll() is None:
            freeze(proc)
            self.out.reached = journal.last()
            return True
        self.out.reached = journal.last()
        self.out.problems.append(f"the run never started {kind}")
        return False

    def disturb(self) -> dict[str, int]:
        """Run the disturbed run(s); the exit code of each credential that ran."""
        s, w = self.spec, self.world
        if s.disturbance == "fault-before":
            w.fault(s.fault, s.target)
            try:
                proc, journal = self.start(s.credential)
                code = self.finish(proc)
            finally:
                w.fault(s.fault, s.target, clear=True)
            self.out.reached = journal.last()
            return {s.credential: code}
        if s.disturbance == "shared" and not s.kind:
            a, _ = self.start(MAIN)
            b, _ = self.start(OTHER)
            return {MAIN: self.finish(a), OTHER: self.finish(b)}
        if s.disturbance == "sharing":
            a, _ = self.start(s.credential)
            if s.delay_ms:
                time.sleep(s.delay_ms / 1000)  # the offset between the starts is the case
            b, _ = self.start(s.target)
            return {s.credential: self.finish(a), s.target: self.finish(b)}
        proc, journal = self.start(s.credential)
        codes: dict[str, int] = {}
        try:
            if self.at_kind(proc, journal):
                codes = self.act(proc)
        finally:
            if proc.poll() is None:
                thaw(proc)
        codes[s.credential] = self.finish(proc)
        if s.disturbance == "fault-during":
            w.fault(s.fault, s.target, clear=True)
        return codes

    def act(self, proc: subprocess.Popen[str]) -> dict[str, int]:
        """Do the spec's disturbance to a frozen run; exit codes of other runs it started."""
        s, w = self.spec, self.world
        if s.disturbance == "signal":
            if s.delay_ms:
                thaw(proc)
                time.sleep(s.delay_ms / 1000)  # "a few ms into the step" is the disturbance
            os.kill(proc.pid, SIGS[s.sig])
        elif s.disturbance == "fault-during":
            w.fault(s.fault, s.target)
        elif s.disturbance == "human":
            w.rollout_restart(s.target)
        elif s.disturbance == "human-edit":
            cred = self.creds[s.credential]
            self.kept = str(w.document_at(s.target, HUMAN_KEEP)).capitalize()
            w.edit_document(s.target, cred.doc_pointer, "h" * 40, (HUMAN_KEEP, self.kept))
        elif s.disturbance == "shared":
            other = OTHER if s.credential == MAIN else MAIN
            second, _ = self.start(other)
            return {other: self.finish(second)}
        return {}

    # -- recover
    def recover_edit(self, run_id: str) -> None:
        """After a human edit of an owned pointer (the run stopped, exit 13): the recovery
        without help refuses (resume 13, rollback 3: the edit is not the run's to drop);
        then the operator's way on — put the pointer back and resume, or roll back with
        --force (owned pointers only)."""
        s, w = self.spec, self.world
        cred = self.creds[s.credential]
        blocked = self.world.rotate(s.recovery, run_id, "--confirm").returncode
        self.out.exit_codes.append(blocked)
        if blocked != (13 if s.recovery == "resume" else 3):
            self.out.problems.append(f"{s.recovery} with the edit in place exited {blocked}")
        if s.recovery == "resume":
            before = w.bao(f"secret/data/{cred.bao_path}?version={self.v0[s.credential]}")
            w.edit_document(s.target, cred.doc_pointer, str(before["data"][cred.bao_key]))
            done = w.rotate("resume", run_id, "--confirm").returncode
        else:
            done = w.rotate("rollback", run_id, "--confirm", "--force").returncode
        self.out.exit_codes.append(done)
        if done != 0:
            self.out.problems.append(f"{s.recovery} after the edit was dealt with exited {done}")

    def recover(self, codes: dict[str, int]) -> dict[str, str]:
        """Resume or roll back each disturbed run; what each credential should now show."""
        expect = {c: "unchanged" for c in self.creds}
        if self.spec.disturbance == "human-edit":
            cred = self.spec.credential
            run_id = Journal(self.world.runs, cred, self.known).run_id_now()
            if codes.get(cred) != 13 or run_id is None:
                self.out.problems.append(f"the edited run exited {codes.get(cred)}, not 13")
                return expect
            self.recover_edit(run_id)
            expect[cred] = "rotated" if self.spec.recovery == "resume" else "restored"
            return expect
        for cred, code in codes.items():
            changed = self.world.bao_version(self.creds[cred]) != self.v0[cred]
            if code in (3, 4) and not changed:
                continue  # stopped before changing anything: nothing to recover
            run_id = Journal(self.world.runs, cred, self.known).run_id_now()
            if run_id is None:
                self.out.problems.append(f"{cred}: no journal for a run that exited {code}")
                continue
            how = self.spec.recovery
            if how == "resume":
                if self.world.run_status(run_id) != "succeeded":
                    self.out.exit_codes.append(
                        self.world.rotate("resume", run_id, "--confirm").returncode)
                expect[cred] = "rotated"
            else:
                self.out.exit_codes.append(
                    self.world.rotate("rollback", run_id, "--confirm").returncode)
                expect[cred] = "restored" if changed else "unchanged"
        if any(c != 0 for c in self.out.exit_codes[len(codes):]):
            self.out.problems.append(f"{self.spec.recovery} did not exit 0")
        return expect

    # -- check
    def check(self, expect: dict[str, str], v1: dict[str, int]) -> None:
        w, p = self.world, self.out.problems
        # a human restart / a roll may still be under way: judge the state it settles in
        workloads = ["dragonfly/dragonfly", *(f"shop/{s}" for s in w.shop())]
        if not wait(lambda: all(w.rolled_out(t) for t in workloads), 120, every=0.5):
            p.append("rollout not finished: " + ", ".join(
                t for t in workloads if not w.rolled_out(t)))
        if not wait(lambda: all(w.readyz(s) for s in w.shop()), 90, every=0.5):
            p.append("readyz: " + ", ".join(s for s in w.shop() if not w.readyz(s)))
        for name, cred in self.creds.items():
            version, value = w.bao_version(cred), w.bao_value(cred)
            added, was = version - self.v0[name], expect[name]
            if was == "rotated" and (added != cred.per_rotation or value == self.value0[name]):
                p.append(f"{name}: OpenBao +{added} version(s), expected +{cred.per_rotation}"
                         f"{' and a new value' if value == self.value0[name] else ''}")
            # a rollback is a rotation back: restore (+ its retire under overlap)
            back = version - v1[name]
            if was == "restored" and (back != cred.per_rotation or value != self.value0[name]):
                lost = ", not the value before the run" if value != self.value0[name] else ""
                p.append(f"{name}: rollback added +{back} version(s), expected "
                         f"+{cred.per_rotation}{lost}")
            if was == "unchanged" and (added or value != self.value0[name]):
                p.append(f"{name}: OpenBao changed (+{added}) by a run that should not")
            self.check_copies(cred, value, version)

    def check_copies(self, cred: Credential, value: str, version: int) -> None:
        w, p = self.world, self.out.problems
        if w.secret_value(cred) != value:
            p.append(f"{cred.name}: Secret differs from OpenBao")
        if cred.auth_user and not w.dragonfly_auth(cred.auth_user, value):
            p.append(f"{cred.name}: Dragonfly refuses OpenBao's value for {cred.auth_user}")
        if cred.auth_user and cred.per_rotation == 1 and version > 1:  # restart: old is gone
            old = str(w.bao(f"secret/data/{cred.bao_path}?version={version - 1}")
                      ["data"][cred.bao_key])
            if old != value and w.dragonfly_auth(cred.auth_user, old):
                p.append(f"{cred.name}: Dragonfly still accepts the replaced value")
        for svc in cred.consumers:
            if w.document_value(svc, cred) != value:
                p.append(f"{cred.name}: Config Center {svc}/bootstrap differs from OpenBao")
            if (live := w.live_tokens(svc)) != 1:
                p.append(f"{svc}: {live} live tokens")
        if self.spec.disturbance == "human-edit" and cred.name == self.spec.credential \
                and w.document_at(self.spec.target, HUMAN_KEEP) != self.kept:
            p.append(f"{self.spec.target}: the human's edit of a pointer no credential owns "
                     "was lost")

    def run(self) -> Outcome:
        began = time.monotonic()
        codes = self.disturb()
        self.out.exit_codes = list(codes.values())
        if self.spec.sig == "term" and codes[self.spec.credential] not in (0, 130):
            self.out.problems.append("SIGTERM: exit is not 130 (docs/cli.md)")
        v1 = {c: self.world.bao_version(cred) for c, cred in self.creds.items()}
        self.check(self.recover(codes), v1)
        self.out.seconds = time.monotonic() - began
        return self.out


def heal(world: World, creds: dict[str, Credential]) -> list[str]:
    """After an inconsistent case: faults off, a fresh rotation of each credential (resumed
    if it fails), so the next case starts consistent.  Returns what is still wrong."""
    world.lab.run("fault", "--clear")
    for name in creds:
        known = world.known_runs()
        if world.rotate(name, "--confirm").returncode != 0:
            run_id = Journal(world.runs, name, known).run_id_now()
            if run_id:
                world.rotate("resume", run_id, "--confirm")
    probe = Case(world, creds, Spec("signal", MAIN, "resume"))
    probe.check({c: "unchanged" for c in creds}, dict(probe.v0))
    return probe.out.problems


def credentials(world: World) -> tuple[dict[str, Credential], dict[str, dict[str, Any]]]:
    plans = {name: world.plan(name) for name in (MAIN, OTHER, SHARING)}
    creds = {name: replace(CREDENTIALS[name], consumers=tuple(
        str(c) for c in plans[name].get("consumers", []))) for name in plans}
    return creds, plans


def _write(out_dir: Path, outcomes: list[Outcome], shard: str) -> Path:
    out_dir.mkdir(parents=True, exist_ok=True)
    out = out_dir / f"faults{'' if shard == '1/1' else '-' + shard.replace('/', 'of')}.json"
    out.write_text(json.dumps({"cases": [{**asdict(o), "consistent": o.consistent}
                                         for o in outcomes],
                               "consistent": sum(o.consistent for o in outcomes),
                               "total": len(outcomes)}, indent=2) + "\n")
    return out


def _stop(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.faults",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", action="append", help="run only cases whose name contains this")
    ap.add_argument("--signals", default="kill,term", help="kill,term (default both)")
    ap.add_argument("--shard", default="1/1", help="I/N: every N-th case from the I-th")
    ap.add_argument("--list", action="store_true", help="print the cases and exit")
    ap.add_argument("--out", type=Path, default=BENCH_DIR / "results")
    ap.add_argument("--merge", type=Path, nargs="+", metavar="JSON",
                    help="print one table of these faults*.json (shards) and exit")
    args = ap.parse_args(argv)
    if args.merge:
        merged = paired([o for f in args.merge
                         for o in outcomes_of(json.loads(f.read_text()))])
        print(table(merged))
        return 0 if all(o.consistent for o in merged) else 1
    i, _, n = args.shard.partition("/")
    signal.signal(signal.SIGTERM, _stop)  # `timeout`/kill: still stop the lab we started
    lab = Lab(Path(tempfile.mkdtemp(prefix="rotate-faults-")))
    lab.dir.chmod(0o755)  # the lab's PostgreSQL runs as its own user and must reach its data
    outcomes: list[Outcome] = []
    try:
        lab.up("fast", None)
        world = World(lab)
        creds, plans = credentials(world)
        specs = select(matrix(plans, MAIN, OTHER, args.signals.split(","), SHARING),
                       args.only, (int(i), int(n)))
        if args.list:
            print("\n".join(s.name for s in specs))
            return 0
        for k, spec in enumerate(specs, 1):
            try:
                out = Case(world, creds, spec).run()
            except (BenchError, subprocess.SubprocessError, httpx.HTTPError, OSError,
                    KeyError, ValueError) as exc:
                out = Outcome(spec.name, problems=[f"harness: {type(exc).__name__}: {exc}"])
            outcomes.append(out)
            _write(args.out, outcomes, args.shard)  # so far: a stopped matrix keeps it
            print(f"[{k}/{len(specs)}] {'ok' if out.consistent else 'NO'} {out.name} "
                  f"(exit {out.exit_codes}, at {out.reached}, {out.seconds:.0f}s) "
                  f"{'; '.join(out.problems)}", flush=True)
            if not out.consistent and (left := heal(world, creds)):
                print(f"   heal failed: {'; '.join(left)}", flush=True)
    except BenchError as exc:
        print(f"bench.faults: {exc}", file=sys.stderr)
        return 2
    finally:
        lab.down()
    print(table(outcomes))
    print(f"wrote {_write(args.out, outcomes, args.shard)}")
    return 0 if all(o.consistent for o in outcomes) else 1


if __name__ == "__main__":
    os.environ.setdefault("NO_COLOR", "1")
    sys.exit(main())
