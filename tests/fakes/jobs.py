"""A fake batch/v1 Job controller for ``apply: job`` on the fake world (FakeKube): when a
Job is created it "runs" the rotator at once — reads ``old``/``new`` from the values Secret
the Job mounts (never from its env or args), plays the phase against :class:`FakeApp`, gives
the Job a pod with a log and the status the real controller writes (``Complete``, or
``Failed`` with ``BackoffLimitExceeded`` / ``DeadlineExceeded``).

Faults, per phase name: ``fail`` (the rotator exits 1 and logs both values, which rotate
must redact), ``hang`` (it never ends: the Job's deadline fails it), ``delete`` (the Job is
deleted while it runs), ``pending`` (it never ends and no deadline comes: rotate's own wait
times out).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from rotate.core.secret import Secret
from tests.fakes.kube import FakeKube


@dataclass
class FakeApp:
    """An init-only app's admin account: one password, changed only by the rotator."""

    password: str
    changes: list[str] = field(default_factory=list)  # phases that changed it

    def accepts(self, value: str) -> bool:
        return value == self.password


@dataclass
class FakeJobs:
    app: FakeApp
    faults: dict[str, str] = field(default_factory=dict)  # phase → fail | hang | delete
    runs: list[str] = field(default_factory=list)  # phases run, in order
    seen_specs: list[dict[str, Any]] = field(default_factory=list)

    def __call__(self, kube: FakeKube, kind: str, ns: str, name: str) -> None:
        if kind != "Job" or (kind, ns, name) not in kube.objects:
            return
        job = kube.raw(kind, ns, name)
        if job.get("status") or job["metadata"].get("x-fake-ran"):
            return
        job["metadata"]["x-fake-ran"] = True
        self.seen_specs.append(job["spec"])
        container = job["spec"]["template"]["spec"]["containers"][0]
        env = {e["name"]: e["value"] for e in container.get("env") or []}
        phase = env["ROTATE_PHASE"]
        secret = job["spec"]["template"]["spec"]["volumes"][0]["secret"]["secretName"]
        old = kube.read_secret_key(ns, secret, "old") or Secret("")
        new = kube.read_secret_key(ns, secret, "new") or Secret("")
        self.runs.append(phase)
        pod = f"{name}-x{len(self.runs):04d}"
        now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        kube.put({"kind": "Pod", "metadata": {"name": pod, "namespace": ns,
                                               "creationTimestamp": now,
                                               "labels": {"job-name": name}}})
        fault = self.faults.get(phase)
        if fault == "delete":
            kube.pod_logs[(ns, pod)] = "started\n"
            kube.delete("Job", ns, name)
            return
        if fault == "pending":
            kube.pod_logs[(ns, pod)] = "waiting for the app\n"
            return
        if fault == "hang":
            kube.pod_logs[(ns, pod)] = "waiting for the app\n"
            self._status(kube, ns, name, "Failed", "DeadlineExceeded")
            return
        if fault == "fail":
            kube.pod_logs[(ns, pod)] = (f"{phase}: login with {new.reveal()} refused\n"
                                        f"old was {old.reveal()}\nexit 1\n")
            self._status(kube, ns, name, "Failed", "BackoffLimitExceeded")
            return
        ok = self._play(phase, old.reveal(), new.reveal())
        kube.pod_logs[(ns, pod)] = f"{phase}: {'ok' if ok else 'failed'}\n"
        self._status(kube, ns, name, "Complete" if ok else "Failed",
                     "CompletionsReached" if ok else "BackoffLimitExceeded")

    def _play(self, phase: str, old: str, new: str) -> bool:
        app = self.app
        if phase.endswith("set"):
            if not (app.accepts(old) or app.accepts(new)):
                return False  # neither value logs in: nothing to change from
            if not app.accepts(new):
                app.password = new
                app.changes.append(phase)
            return True
        if phase.endswith("test"):
            return app.accepts(new) and not app.accepts(old)
        return True  # finish: set already cut the old value

    @staticmethod
    def _status(kube: FakeKube, ns: str, name: str, ctype: str, reason: str) -> None:
        kube.set_status("Job", ns, name, {"conditions": [
            {"type": ctype, "status": "True", "reason": reason}]})
