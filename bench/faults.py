"""Fault matrix: every lab fault before and during a run, kill -9 / SIGTERM at the start of
every step kind the plan has (and a few ms into the state-changing ones), two credentials on
one provider, two sharing consumers at several offsets, a human `kubectl rollout restart`
or Config Center edit mid-run, a torn journal record after a kill, a run's lock taken over
while it is frozen, a `bao kv put` of the path after sync.wait (exit 17) and an oversized
supplied value (exit 2), ``--adopt`` of a value written by hand (and with nothing to adopt),
a Secret changed by hand mid-run (bench/fault_adopt.py), the watcher's leader killed with the
adopt run it started (bench/fault_watch.py), the API server unreachable while the journal is
written, a canary failing its bake (bench/fault_canary.py), and two machines (state
directories) starting one credential — each
recovered by resume and by rollback, and checked from outside the tool (docs/reliability.md).

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
- the recovery (resume, rollback) itself exited 0; after a torn record the run reads as
  settled (``succeeded`` resumed, ``rolled-back``): a hidden record would leave it failed,
  and the next rotation refused; a run whose lock was taken over exited 5 (lock lost), the
  take-over (``resume --take-over-lock``) exited 0, and the run still reads ``succeeded``
  as the take-over left it (the stopped process journaled nothing more).

It prints the matrix as a Markdown table and writes OUT/faults.json.
This module is the runner: it starts the lab, selects the cases (bench/fault_matrix.py), runs
each (bench/fault_case.py: disturbance and recovery; bench/fault_check.py: the outside check;
the Job's and a plug-in's own in bench/fault_job.py, bench/fault_plugin.py), heals the world
after an inconsistent one so the next starts consistent, and writes the report as it goes.

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
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import httpx

from bench import fault_canary, fault_job, fault_plugin
from bench.fault_case import MAIN, OTHER, SHARING, Case, pinned
from bench.fault_job import JobCase, heal_job
from bench.fault_matrix import Outcome, Spec, matrix, outcomes_of, paired, select, table
from bench.fault_plugin import PluginCase
from bench.fault_world import CREDENTIALS, Credential, Journal, World
from bench.world import BENCH_DIR, BenchError, Lab


def heal(world: World, creds: dict[str, Credential]) -> list[str]:
    """After an inconsistent case: faults off, a fresh rotation of each credential (resumed
    if it fails), so the next case starts consistent.  Returns what is still wrong."""
    world.lab.run("fault", "--clear")
    for name in creds:
        known = world.known_runs()
        if world.rotate(name, "--confirm", *pinned(name)).returncode != 0:
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
    ap.add_argument("--job", action="store_true",
                    help="the rotator Job's cases (apply: job; a lab --with bugsink)")
    ap.add_argument("--plugin", action="store_true",
                    help="a provider plug-in's cases (apply: mariadb; a lab --with mariadb)")
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
        lab.up("fast", None, extras=("bugsink",) if args.job else
               ("mariadb",) if args.plugin else ())
        world = World(lab)
        if args.plugin:
            creds = {fault_plugin.PLUGIN: fault_plugin.CREDENTIAL}
            specs = select(fault_plugin.plugin_specs(tuple(args.signals.split(","))),
                           args.only, (int(i), int(n)))
        elif args.job:
            creds = {fault_job.JOB: fault_job.CREDENTIAL}
            specs = select(fault_job.job_specs(tuple(args.signals.split(","))), args.only,
                           (int(i), int(n)))
        else:
            creds, plans = credentials(world)
            specs = select(matrix(plans, MAIN, OTHER, args.signals.split(","), SHARING)
                           + fault_canary.canary_specs(MAIN), args.only, (int(i), int(n)))
        if args.list:
            print("\n".join(s.name for s in specs))
            return 0
        for k, spec in enumerate(specs, 1):
            try:
                kind = PluginCase if args.plugin else JobCase if args.job else Case
                out = kind(world, creds, spec).run()
            except (BenchError, subprocess.SubprocessError, httpx.HTTPError, OSError,
                    KeyError, ValueError) as exc:
                out = Outcome(spec.name, problems=[f"harness: {type(exc).__name__}: {exc}"])
            outcomes.append(out)
            _write(args.out, outcomes, args.shard)  # so far: a stopped matrix keeps it
            print(f"[{k}/{len(specs)}] {'ok' if out.consistent else 'NO'} {out.name} "
                  f"(exit {out.exit_codes}, at {out.reached}, {out.seconds:.0f}s) "
                  f"{'; '.join(out.problems)}", flush=True)
            if not out.consistent and (left := (heal_job(world) if args.job
                                                else heal(world, creds))):
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
