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

from bench import fault_adopt, fault_canary, fault_job, fault_plugin, fault_watch
from bench.fault_matrix import (
    PREFLIGHT_FAULTS,
    TORN_RECORD,
    Outcome,
    Spec,
    matrix,
    outcomes_of,
    paired,
    select,
    table,
)
from bench.fault_world import (
    CREDENTIALS,
    READERS,
    Credential,
    Journal,
    World,
    freeze,
    thaw,
    wait,
)
from bench.world import BENCH_DIR, BenchError, Lab

MAIN, OTHER = "dragonfly", "dragonfly-acl"  # two credentials on one provider
SHARING = "postgres"  # shares consumers (order, user) with MAIN, not a provider
#: the pointer no credential owns that a human edit changes too (the schema allows no new
#: one): the host spelled capitalised, which resolves the same (DNS is case-insensitive)
HUMAN_KEEP = ("dragonfly", "host")
SIGS = {"kill": signal.SIGKILL, "term": signal.SIGTERM}
FAULT_TIMEOUT = "8s"
#: what a human's `bao kv put` writes in the middle of a run (bao-write)
BY_HAND = "written-by-hand-while-rotate-ran-0123456789"


class Case:
    """One case against the world: baseline, disturbance, recovery, outside check."""

    def __init__(self, world: World, creds: dict[str, Credential], spec: Spec) -> None:
        self.world, self.creds, self.spec = world, creds, spec
        self.out = Outcome(spec.name)
        self.journal: Journal | None = None  # the disturbed run's, once started
        self.taker: subprocess.CompletedProcess[str] | None = None  # a take-over's resume
        self.kept = ""  # a human edit: the value it gave a pointer no credential owns
        self.both: list[int] = []  # two machines at once: both exit codes
        #: the recovery runs from the second machine's state directory (machines)
        self.where: tuple[str, ...] = (("--state-dir", str(world.machine_b))
                                       if spec.disturbance == "machines" else ())
        if spec.disturbance == "canary":  # its own chain file, the chain's overlap (redis-acl:
            # no previousKey, so one version a run, as the pinned restart)
            self.where = ("--chain", str(fault_canary.canary_chain(world)))
            self.creds = {**creds, spec.credential: replace(creds[spec.credential],
                                                            strategy="")}
        self.rebase()

    def rebase(self) -> None:
        """The baseline the checks compare with: OpenBao's versions and values, the runs."""
        w, creds = self.world, self.creds
        self.v0 = {c: w.bao_version(cred) for c, cred in creds.items()}
        self.value0 = {c: w.bao_value(cred) for c, cred in creds.items()}
        self.known = w.known_runs()

    # -- disturb
    def start(self, credential: str) -> tuple[subprocess.Popen[str], Journal]:
        timeout = ("--timeout", FAULT_TIMEOUT) if self.spec.fault else ()
        adopt: tuple[str, ...] = ()
        if self.spec.disturbance == "adopt":  # the chain rotate's, then a human's put
            fault_adopt.chain_written(self.world, self.creds[credential])
            self.rebase()
            fault_adopt.put_by_hand(self.world, self.creds[credential])
            adopt = ("--adopt",)
        chain = self.where if self.spec.disturbance == "canary" else pinned(credential)
        proc = self.world.spawn(credential, "--confirm", *timeout, *adopt, *chain)
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
            if s.fault in PREFLIGHT_FAULTS and code != 3:  # a refusal, naming the fix
                self.out.problems.append(f"{s.fault}: exit {code}, not 3 (preflight)")
            return {s.credential: code}
        if s.disturbance == "oversized":  # what rotate's own stdin check lets through
            done = w.rotate(s.credential, "--confirm", *pinned(s.credential), "--value-stdin",
                            stdin="x" * 65536 + "\n")
            self.out.reached = "preflight"
            if done.returncode != 2:
                self.out.problems.append(f"oversized value: exit {done.returncode}, not 2")
            return {s.credential: done.returncode}
        if s.disturbance == "adopt-noop":
            cred = self.creds[s.credential]
            fault_adopt.chain_written(w, cred)
            self.rebase()
            code, problems = fault_adopt.adopt_noop(w, cred, self.known)
            self.out.reached, self.out.problems = "preflight", problems
            return {s.credential: code}
        if s.disturbance == "shared" and not s.kind:
            a, _ = self.start(MAIN)
            b, _ = self.start(OTHER)
            return {MAIN: self.finish(a), OTHER: self.finish(b)}
        if s.disturbance == "several":
            return self.disturb_several()
        if s.disturbance == "watch-leader":
            return self.watch_leader()
        if s.disturbance == "machines" and not s.kind:
            return self.two_machines()
        if s.disturbance == "journal-down":
            w.fault("journal-unreachable")
        if s.disturbance == "sharing":
            a, _ = self.start(s.credential)
            if s.delay_ms:
                time.sleep(s.delay_ms / 1000)  # the offset between the starts is the case
            b, _ = self.start(s.target)
            return {s.credential: self.finish(a), s.target: self.finish(b)}
        proc, journal = self.start(s.credential)
        self.journal = journal
        codes: dict[str, int] = {}
        try:
            if self.at_kind(proc, journal):
                codes = self.act(proc)
        finally:
            if proc.poll() is None:
                thaw(proc)
        codes[s.credential] = self.finish(proc)
        if s.disturbance in ("fault-during", "canary"):
            w.fault(s.fault, s.target, clear=True)
        if s.disturbance == "journal-down":
            w.fault("journal-unreachable", clear=True)
        return codes

    def watch_leader(self) -> dict[str, int]:
        """bench/fault_watch.py: the leader killed with its adopt run; resumed by the other
        replica, or (rollback) both stopped and the run rolled back by hand."""
        s, w = self.spec, self.world
        cred = self.creds[s.credential]
        fault_adopt.chain_written(w, cred)
        self.rebase()
        self.journal, self.out.reached, problems = fault_watch.kill_leader_mid_run(
            w, s.credential, self.known, s.kind, s.recovery,
            lambda: fault_adopt.put_by_hand(w, cred))
        self.out.problems += problems
        return {s.credential: -signal.SIGKILL}

    def several(self) -> str:
        """The credential of a run of the spec's two credentials (names sorted, "+")."""
        return "+".join(sorted((self.spec.credential, self.spec.target)))

    def disturb_several(self) -> dict[str, int]:
        """Both credentials as one run, killed at the spec's kind: {"A+B": exit code}."""
        s = self.spec
        proc = self.world.spawn(s.credential, s.target, "--confirm")
        journal = Journal(self.world.runs, self.several(), self.known)
        self.journal = journal
        try:
            if self.at_kind(proc, journal):
                os.kill(proc.pid, SIGS[s.sig])
        finally:
            if proc.poll() is None:
                thaw(proc)
        return {self.several(): self.finish(proc)}

    def recover_several(self) -> dict[str, str]:
        """One resume, or one rollback, of the run of both; both credentials then show it."""
        s, w = self.spec, self.world
        expect = {c: "unchanged" for c in self.creds}
        run_id = self.journal.run_id_now() if self.journal else None
        if run_id is None:
            self.out.problems.append("no journal for the run of both credentials")
            return expect
        code = w.rotate(s.recovery, run_id, "--confirm").returncode
        self.out.exit_codes.append(code)
        if code != 0:
            self.out.problems.append(f"{s.recovery} did not exit 0")
        for cred in (s.credential, s.target):
            changed = w.bao_version(self.creds[cred]) != self.v0[cred]
            expect[cred] = "rotated" if s.recovery == "resume" else (
                "restored" if changed else "unchanged")
        settled = "succeeded" if s.recovery == "resume" else "rolled-back"
        if (status := w.run_status(run_id)) != settled:
            self.out.problems.append(f"the run of both reads {status}, not {settled}")
        return expect

    def two_machines(self) -> dict[str, int]:
        """The credential started from two state directories at once: one runs, the other
        exits 4 (the Lease) — or runs after it, never beside it."""
        cred = self.spec.credential
        a = self.world.spawn(cred, "--confirm")
        b = self.world.spawn(cred, "--confirm", *("--state-dir", str(self.world.machine_b)))
        codes = sorted((self.finish(a), self.finish(b)))
        self.both = codes  # both machines' exit codes, for the table
        self.out.reached = "preflight"
        if codes != [0, 4]:
            self.out.problems.append(f"two machines at once exited {codes}, not 0 and 4")
        return {cred: codes[0]}

    def act(self, proc: subprocess.Popen[str]) -> dict[str, int]:
        """Do the spec's disturbance to a frozen run; exit codes of other runs it started."""
        s, w = self.spec, self.world
        if s.disturbance in ("signal", "adopt"):
            if s.delay_ms:
                thaw(proc)
                time.sleep(s.delay_ms / 1000)  # "a few ms into the step" is the disturbance
            os.kill(proc.pid, SIGS[s.sig])
        elif s.disturbance in ("fault-during", "canary"):
            w.fault(s.fault, s.target)
        elif s.disturbance == "human":
            w.rollout_restart(s.target)
        elif s.disturbance == "secret-edit":
            fault_adopt.edit_secret(w, self.creds[s.credential])
        elif s.disturbance == "bao-write":  # a human's `bao kv put` of the path
            cred = self.creds[s.credential]
            data = w.bao_data(cred, w.bao_version(cred))
            w.bao_put(cred, {**data, cred.bao_key: BY_HAND})
        elif s.disturbance == "human-edit":
            cred = self.creds[s.credential]
            self.kept = str(w.document_at(s.target, HUMAN_KEEP)).capitalize()
            w.edit_document(s.target, cred.doc_pointer, "h" * 40, (HUMAN_KEEP, self.kept))
        elif s.disturbance == "shared":
            other = OTHER if s.credential == MAIN else MAIN
            second, _ = self.start(other)
            return {other: self.finish(second)}
        elif s.disturbance in ("journal-down", "machines"):
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
            if s.disturbance == "machines":  # machine B, the lock taken: the guard refuses
                b = w.rotate(s.credential, "--confirm", "--take-over-lock", *self.where)
                if b.returncode != 3 or "runs.unfinished" not in b.stdout + b.stderr:
                    self.out.problems.append(f"machine B started {s.credential} on top of "
                                             f"the unfinished run: exit {b.returncode}")
                return {}
        elif s.disturbance == "torn":
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
            self.tear()
        elif s.disturbance == "takeover":
            self.take_over()
        return {}

    def tear(self) -> None:
        """Append a record cut off mid-write to the killed run's journal."""
        run_id = self.journal.run_id_now() if self.journal else None
        if run_id is None:
            raise BenchError("torn: the killed run has no journal")
        with (self.world.runs / run_id / "journal.jsonl").open("ab") as fh:
            fh.write(TORN_RECORD)

    def take_over(self) -> None:
        """Wait (frozen run) until every Lease it holds is stale, then take them over with
        `rotate resume RUN --confirm --take-over-lock`; its exit code joins the case's."""
        run_id = self.journal.run_id_now() if self.journal else None
        if run_id is None:
            raise BenchError("takeover: the frozen run has no journal")
        if not wait(lambda: self.world.leases_stale(run_id), 120, every=1.0):
            raise BenchError(f"the Leases of the frozen run {run_id} never went stale")
        self.taker = self.world.rotate("resume", run_id, "--confirm", "--take-over-lock")

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
        if self.spec.disturbance == "several":
            return self.recover_several()
        expect = {c: "unchanged" for c in self.creds}
        if self.spec.disturbance == "adopt-noop":
            return expect  # nothing ran, nothing to recover
        if self.spec.disturbance == "machines" and not self.spec.kind:
            expect[self.spec.credential] = "rotated"
            return expect
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
            if code in (2, 3, 4) and not changed:
                continue  # stopped before changing anything: nothing to recover
            run_id = Journal(self.world.runs, cred, self.known).run_id_now()
            if run_id is None:
                self.out.problems.append(f"{cred}: no journal for a run that exited {code}")
                continue
            how, drifted = self.spec.recovery, self.spec.disturbance == "bao-write"
            if drifted:  # as exit 17 says: the run's version back as the current one first
                c = self.creds[cred]
                self.world.bao_put(c, self.world.bao_data(c, self.v0[cred] + 1))
            if how == "resume":
                if self.world.run_status(run_id) != "succeeded":
                    self.out.exit_codes.append(self.world.rotate(
                        "resume", run_id, "--confirm", *self.where).returncode)
                expect[cred] = "rotated"
            else:  # exit 17 names it: the version number moved since the run: --force
                force = ("--force",) if drifted else ()
                self.out.exit_codes.append(self.world.rotate(
                    "rollback", run_id, "--confirm", *force, *self.where).returncode)
                expect[cred] = "restored" if changed else "unchanged"
            settled = "succeeded" if how == "resume" else "rolled-back"
            if self.spec.disturbance in ("journal-down", "machines"):
                self.nothing_lost(run_id, settled)
            if self.spec.disturbance == "torn" and (
                    status := self.world.run_status(run_id)) != settled:
                self.out.problems.append(f"{cred}: the run reads {status}, not {settled}, "
                                         "after its torn record")
        if any(c != 0 for c in self.out.exit_codes[len(codes):]):
            self.out.problems.append(f"{self.spec.recovery} did not exit 0")
        return expect

    def nothing_lost(self, run_id: str, settled: str) -> None:
        """The run settled, read from either machine, and the cluster holds its whole
        journal, byte for byte the state directory's that wrote it last."""
        w, p = self.world, self.out.problems
        status = w.run_status(run_id)
        if status != settled:
            p.append(f"the run reads {status}, not {settled}")
        local = (w.machine_b / "runs" if self.where else w.runs) / run_id / "journal.jsonl"
        if not local.is_file() or w.cluster_journal(run_id) != local.read_text():
            p.append("the cluster's copy of the journal is not the whole local journal")

    # -- check
    def check(self, expect: dict[str, str], v1: dict[str, int]) -> None:
        w, p = self.world, self.out.problems
        # a human restart / a roll may still be under way: judge the state it settles in
        workloads = ["dragonfly/dragonfly", *(f"shop/{s}" for s in w.shop()), *READERS]
        if not wait(lambda: all(w.rolled_out(t) for t in workloads), 120, every=0.5):
            p.append("rollout not finished: " + ", ".join(
                t for t in workloads if not w.rolled_out(t)))
        if not wait(lambda: all(w.readyz(s) for s in w.shop()), 90, every=0.5):
            p.append("readyz: " + ", ".join(s for s in w.shop() if not w.readyz(s)))
        drifted = self.spec.disturbance == "bao-write"
        for name, cred in self.creds.items():
            version, value = w.bao_version(cred), w.bao_value(cred)
            added, was = version - self.v0[name], expect[name]
            # a drift adds the human's write and, on resume, the run's version put back
            want = cred.per_rotation + (2 if drifted and name == self.spec.credential else 0)
            if was == "rotated" and (added != want or value == self.value0[name]):
                p.append(f"{name}: OpenBao +{added} version(s), expected +{want}"
                         f"{' and a new value' if value == self.value0[name] else ''}")
            if drifted and name == self.spec.credential and str(w.bao_data(
                    cred, self.v0[name] + 2).get(cred.bao_key)) != BY_HAND:
                p.append(f"{name}: the human's write is not in OpenBao's history any more")
            # a rollback is a rotation back: restore (+ its retire under overlap)
            back = version - v1[name]
            # after a drift, the run's version put back before the rollback adds one more
            want_back = cred.per_rotation + (1 if drifted and name == self.spec.credential
                                             else 0)
            if was == "restored" and (back != want_back or value != self.value0[name]):
                lost = ", not the value before the run" if value != self.value0[name] else ""
                p.append(f"{name}: rollback added +{back} version(s), expected "
                         f"+{want_back}{lost}")
            if was == "unchanged" and (added or value != self.value0[name]):
                p.append(f"{name}: OpenBao changed (+{added}) by a run that should not")
            self.check_copies(cred, value, version)

    def check_copies(self, cred: Credential, value: str, version: int) -> None:
        w, p = self.world, self.out.problems
        if w.secret_value(cred) != value:
            p.append(f"{cred.name}: Secret differs from OpenBao")
        for copy in cred.copies:
            if w.secret_value(cred, copy) != value:
                p.append(f"{cred.name}: Secret {copy[0]}/{copy[1]} differs from OpenBao")
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
        self.out.exit_codes = self.both or list(codes.values())
        if self.spec.sig == "term" and codes[self.spec.credential] not in (0, 130):
            self.out.problems.append("SIGTERM: exit is not 130 (docs/cli.md)")
        if self.spec.disturbance == "takeover":
            self.out.exit_codes.append(self.taker.returncode if self.taker else -1)
            if codes[self.spec.credential] != 5:
                self.out.problems.append("the run whose lock was taken over did not exit 5 "
                                         "(docs/cli.md)")
            run_id = self.journal.run_id_now() if self.journal else None
            if run_id and (status := self.world.run_status(run_id)) != "succeeded":
                self.out.problems.append(f"the run reads {status} after the take-over's "
                                         "resume finished it: the process that lost its "
                                         "lock journaled on")
        if self.spec.disturbance == "canary" and codes[self.spec.credential] != 19:
            self.out.problems.append("a canary failing its bake: exit is not 19 "
                                     "(docs/cli.md)")
        if self.spec.disturbance == "bao-write" and codes[self.spec.credential] != 17:
            self.out.problems.append("backend write after sync.wait: exit is not 17 "
                                     "(docs/cli.md)")
        v1 = {c: self.world.bao_version(cred) for c, cred in self.creds.items()}
        self.check(self.recover(codes), v1)
        self.out.seconds = time.monotonic() - began
        return self.out


class JobCase(Case):
    """A case of ``apply: job`` (bench/fault_job.py): the human deletes the rotator's Job,
    and the check is Bugsink's login instead of Dragonfly's and the shop's."""

    def act(self, proc: subprocess.Popen[str]) -> dict[str, int]:
        if self.spec.disturbance != "human":
            return super().act(proc)
        self.world.fault("rotator-hang", "set")
        thaw(proc)
        try:
            fault_job.delete_running_job(self.world)
        finally:
            self.world.fault("rotator-hang", "set", clear=True)
        return {}

    def check(self, expect: dict[str, str], v1: dict[str, int]) -> None:
        w, p = self.world, self.out.problems
        for name, cred in self.creds.items():
            version, value = w.bao_version(cred), w.bao_value(cred)
            added, back, was = version - self.v0[name], version - v1[name], expect[name]
            if was == "rotated" and (added != 1 or value == self.value0[name]):
                p.append(f"{name}: OpenBao +{added} version(s), expected +1 and a new value")
            if was == "restored" and (back != 1 or value != self.value0[name]):
                p.append(f"{name}: rollback added +{back}, expected +1 and the value before")
            if was == "unchanged" and (added or value != self.value0[name]):
                p.append(f"{name}: OpenBao changed (+{added}) by a run that should not")
            p += fault_job.check_job(w, value, version)


class PluginCase(Case):
    """A provider plug-in's case (bench/fault_plugin.py): MariaDB frozen under the plug-in,
    and the check is MariaDB's own accounts and log beside the matrix's."""

    def act(self, proc: subprocess.Popen[str]) -> dict[str, int]:
        if self.spec.disturbance != fault_plugin.FREEZE:
            return super().act(proc)
        fault_plugin.freeze_provider_until_done(self.world, proc)
        return {}

    def check(self, expect: dict[str, str], v1: dict[str, int]) -> None:
        super().check(expect, v1)
        cred = self.creds[fault_plugin.PLUGIN]
        self.out.problems += fault_plugin.check_plugin(self.world, self.world.bao_version(cred))


def pinned(credential: str) -> tuple[str, ...]:
    """The ``--strategy`` the matrix names for ``credential`` (fault_world.CREDENTIALS)."""
    cred = CREDENTIALS.get(credential)
    return cred.strategy_args() if cred else ()


def heal_job(world: World) -> list[str]:
    """After an inconsistent job case: faults off, a fresh rotation (resumed if it fails)."""
    world.lab.run("fault", "--clear")
    known = world.known_runs()
    if world.rotate(fault_job.JOB, "--confirm").returncode != 0:
        run_id = Journal(world.runs, fault_job.JOB, known).run_id_now()
        if run_id:
            world.rotate("resume", run_id, "--confirm")
    cred = fault_job.CREDENTIAL
    return fault_job.check_job(world, world.bao_value(cred), world.bao_version(cred))


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
