"""One case of the fault matrix against the world (bench/faults.py runs them): the disturbed
run(s), the recovery, and the outside check it inherits (bench/fault_check.py).

Invariants:

- A run is disturbed at a step by freezing it (SIGSTOP) the moment its journal shows that
  step's ``step.start``, never by timing: the kind, not the clock, places the disturbance.
  A frozen run is always thawed before the case waits for it (``finally``), so no process
  the case started outlives it stopped.
- The recovery goes through ``rotate`` exactly as an operator would (``resume``,
  ``rollback``, with ``--force`` or a fix first only where the exit code says so), and each
  of its exit codes joins the case's: a recovery that does not exit 0 is a problem.
- A run that stopped before changing anything (exit 2, 3, 4, OpenBao unchanged) has
  nothing to recover and is expected ``unchanged``.
- ``pinned`` gives the ``--strategy`` the matrix names for a credential, so a case runs
  the strategy its expected version count (``Credential.per_rotation``) assumes.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from dataclasses import replace

from bench import fault_adopt, fault_canary, fault_watch
from bench.fault_check import BY_HAND, HUMAN_KEEP, Checked
from bench.fault_matrix import PREFLIGHT_FAULTS, TORN_RECORD, Outcome, Spec
from bench.fault_world import CREDENTIALS, Credential, Journal, World, freeze, thaw, wait
from bench.world import BenchError

MAIN, OTHER = "dragonfly", "dragonfly-acl"  # two credentials on one provider
SHARING = "postgres"  # shares consumers (order, user) with MAIN, not a provider
SIGS = {"kill": signal.SIGKILL, "term": signal.SIGTERM}
FAULT_TIMEOUT = "8s"


class Case(Checked):
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


def pinned(credential: str) -> tuple[str, ...]:
    """The ``--strategy`` the matrix names for ``credential`` (fault_world.CREDENTIALS)."""
    cred = CREDENTIALS.get(credential)
    return cred.strategy_args() if cred else ()

