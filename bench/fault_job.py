"""The rotator Job's cases of the fault matrix (``apply: job``): credential
``bugsink-admin`` in a lab started with ``--with bugsink`` (``python -m bench.faults --job``).

Cases, each recovered by resume and by rollback: the rotator exits 1 in each phase (lab
fault ``rotator-fail set|test|finish``), hangs in ``set`` until the Job's deadline
(``rotator-hang set``), its Job deleted by a human while it runs, and kill -9 / SIGTERM at
the start of ``provider.apply``.  Checked from outside the tool: OpenBao's versions (a
resume +1 and a new value, a rollback +1 and the value from before), the Secret holds
OpenBao's value, Bugsink's own login page accepts it and refuses the value it replaced, and
no values Secret is left in the namespace.
``JobCase`` runs a case (bench/fault_case.py with this check instead of the matrix's);
``heal_job`` makes the credential consistent again after an inconsistent one.
"""

from __future__ import annotations

import subprocess
from typing import Any

from bench.fault_case import Case
from bench.fault_matrix import RECOVERIES, SIGNALS, Spec
from bench.fault_world import Credential, Journal, World, thaw, wait

JOB = "bugsink-admin"
NAMESPACE = "bugsink"
ADMIN = "admin@shop.example"
CREDENTIAL = Credential(JOB, "infra/bugsink", "password",
                        (NAMESPACE, "bugsink-admin-secret", "password"), ADMIN, (), 1)
#: lab fault → the phases it is switched on for, before the run
FAULTS = {"rotator-fail": ("set", "test", "finish"), "rotator-hang": ("set",)}


def job_specs(signals: tuple[str, ...] = SIGNALS) -> list[Spec]:
    specs: list[Spec] = []
    for how in RECOVERIES:
        for fault, phases in FAULTS.items():
            specs += [Spec("fault-before", JOB, how, fault=fault, target=phase, tagged=True)
                      for phase in phases]
        specs.append(Spec("human", JOB, how, kind="provider.apply", target="delete job",
                          tagged=True))
        specs += [Spec("signal", JOB, how, kind="provider.apply", sig=sig, tagged=True)
                  for sig in signals]
    return specs


def delete_running_job(world: World) -> None:
    """What a human does mid-run: ``kubectl delete job`` of the rotator Job still running
    (the rotator hangs in ``set`` meanwhile: lab fault ``rotator-hang set``)."""

    def running() -> list[str]:
        jobs = world.lab.kubectl_json("get", "jobs", "-n", NAMESPACE)["items"]
        return [j["metadata"]["name"] for j in jobs
                if not (j.get("status") or {}).get("conditions")]

    if not wait(lambda: bool(running()), 60, every=0.2):
        raise RuntimeError("no rotator Job ran")
    for name in running():
        subprocess.run(["kubectl", "delete", "job", "-n", NAMESPACE, name], env=world.env,
                       capture_output=True, text=True, timeout=30, check=False)


def bugsink_accepts(world: World, password: str) -> bool:
    from rotate_lab.systems import bugsink_web

    svc: dict[str, Any] = world.lab.kubectl_json("get", "service", "-n", NAMESPACE, "bugsink")
    return bugsink_web.accepts(f"http://{svc['spec']['clusterIP']}:8000", ADMIN, password)


def check_job(world: World, value: str, version: int) -> list[str]:
    """What must hold of bugsink-admin after any recovery (the value OpenBao holds)."""
    problems: list[str] = []
    if world.secret_value(CREDENTIAL) != value:
        problems.append(f"{JOB}: Secret differs from OpenBao")
    if not bugsink_accepts(world, value):
        problems.append(f"{JOB}: Bugsink's login refuses OpenBao's value")
    if version > 1:
        old = str(world.bao(f"secret/data/{CREDENTIAL.bao_path}?version={version - 1}")
                  ["data"][CREDENTIAL.bao_key])
        if old != value and bugsink_accepts(world, old):
            problems.append(f"{JOB}: Bugsink still accepts the replaced value")
    secrets = world.lab.kubectl_json("get", "secrets", "-n", NAMESPACE)["items"]
    left = [s["metadata"]["name"] for s in secrets if s["metadata"]["name"].endswith("-values")]
    if left:
        problems.append(f"{JOB}: values Secrets left: {', '.join(left)}")
    return problems


class JobCase(Case):
    """A case of ``apply: job``: the human deletes the rotator's Job, and the
    check is Bugsink's login instead of Dragonfly's and the shop's."""

    def act(self, proc: subprocess.Popen[str]) -> dict[str, int]:
        if self.spec.disturbance != "human":
            return super().act(proc)
        self.world.fault("rotator-hang", "set")
        thaw(proc)
        try:
            delete_running_job(self.world)
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
            p += check_job(w, value, version)


def heal_job(world: World) -> list[str]:
    """After an inconsistent job case: faults off, a fresh rotation (resumed if it fails)."""
    world.lab.run("fault", "--clear")
    known = world.known_runs()
    if world.rotate(JOB, "--confirm").returncode != 0:
        run_id = Journal(world.runs, JOB, known).run_id_now()
        if run_id:
            world.rotate("resume", run_id, "--confirm")
    cred = CREDENTIAL
    return check_job(world, world.bao_value(cred), world.bao_version(cred))
