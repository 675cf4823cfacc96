"""``apply: job``: a custom rotator, run as a Kubernetes Job per phase — what AWS Secrets
Manager does with a rotation Lambda (setSecret, testSecret, finishSecret), on Kubernetes.

The chain names the rotator's container (``job``: image, command, args, plain env, service
account, deadline).  rotate runs it once per *phase* with ``ROTATE_PHASE`` set:

* ``set``: make ``new`` the provider's value (``old`` still holds it now);
* ``test``: prove ``new`` is accepted (and, for a hard cut, ``old`` refused); exit 0 or not;
* ``finish``: retire ``old`` (nothing, when ``set`` already cut it).

Invariants:

* **Values only in files.**  ``old`` and ``new`` are the keys of a Secret rotate creates for
  the Job (``<job>-values``), mounted read-only at :data:`VALUES_DIR`, deleted once the Job
  ended.  Never in env, argv or the Job spec: preflight refuses a template whose command,
  args or env holds the current value (exit 3), and the schema allows env only as plain
  name/value pairs.
* **Once per run and phase.**  The Job's name is derived from the run id and the phase
  (:func:`job_name`): a resumed run finds the Job an earlier attempt created, waits for it
  if it still runs, and takes a succeeded one as done without running it again.  A failed
  one is deleted and run again on resume (a rotator, like a rotation Lambda, must be
  idempotent per phase).
* **Bounded.**  Each Job has ``activeDeadlineSeconds`` (the template's ``deadline``) and
  ``backoffLimit: 0``; rotate waits no longer than that or the step's deadline.
* **Failures say what the rotator said.**  A failed Job's message carries its pod's log
  tail with every occurrence of ``old`` and ``new`` redacted.

Undo (a rollback) is the ``set`` phase with the values swapped: ``new`` = the restored
value, ``old`` = the replaced one, then ``test``.
"""

from __future__ import annotations

import contextlib
import hashlib
from dataclasses import dataclass
from typing import Any

from rotate.chain.model import JobTemplate, ProviderApply
from rotate.clients.provider_seams import AuthProbe
from rotate.clients.seams import Endpoint, Kube
from rotate.core.durations import format_duration
from rotate.core.errors import ClientError, ConflictError, NotFoundError, PermanentError
from rotate.core.secret import Secret
from rotate.core.waiting import Deadline, WaitTimeout, wait_for
from rotate.providers.method import Change, InCluster, Link, Progress, Target, ValueRule

SYSTEM = "job"
#: where the rotator finds the files ``old`` and ``new``
VALUES_DIR = "/var/run/rotate"
MANAGED = {"app.kubernetes.io/managed-by": "rotate"}
LOG_LINES = 20
#: how long after the Job's own deadline rotate still waits for its status to say so
_STATUS_GRACE = 15.0
REDACTED = "(redacted)"


def job_name(credential: str, run_id: str, phase: str) -> str:
    """``rotate-<credential>-<digest of run id and phase>-<phase>``: the same run and phase
    always name the same Job (at most 63 characters: it is also a label value)."""
    digest = hashlib.sha256(f"{run_id}/{phase}".encode()).hexdigest()[:10]
    return f"rotate-{credential[:30].rstrip('-')}-{digest}-{phase}"


def template_leaks(template: JobTemplate, value: Secret) -> list[str]:
    """Where the template itself holds ``value`` (the fields' names, never the value)."""
    secret = value.reveal()
    if not secret:
        return []
    found = [f"command[{i}]" for i, w in enumerate(template.command) if secret in w]
    found += [f"args[{i}]" for i, w in enumerate(template.args) if secret in w]
    found += [f"env {name}" for name, v in template.env if secret in v]
    return found


def _span(seconds: float) -> str:
    return f"{int(seconds)}s" if float(seconds).is_integer() else format_duration(seconds)


def redact(text: str, *values: Secret) -> str:
    for value in values:
        if value.reveal():
            text = text.replace(value.reveal(), REDACTED)
    return text


def _condition(job: dict[str, Any], ctype: str) -> dict[str, Any] | None:
    for c in (job.get("status") or {}).get("conditions") or []:
        if c.get("type") == ctype and c.get("status") == "True":
            return dict(c)
    return None


class JobDeleted(PermanentError):
    """The phase's Job disappeared while rotate waited for it."""


class JobFailed(PermanentError):
    """The phase's Job ended Failed (the rotator exited non-zero, or its deadline passed)."""


@dataclass(frozen=True)
class JobRunner:
    """The ``admin session`` of ``apply: job``: runs the phases' Jobs in the provider's
    namespace through the Kube seam."""

    cluster: InCluster
    applied: ProviderApply

    @property
    def template(self) -> JobTemplate:
        if self.applied.job is None:
            raise PermanentError(SYSTEM, f"provider {self.applied.provider}",
                                 "apply: job without job")
        return self.applied.job

    @property
    def kube(self) -> Kube:
        return self.cluster.kube

    @property
    def namespace(self) -> str:
        return self.applied.provider.namespace

    def close(self) -> None:
        return None

    def name(self, phase: str) -> str:
        return job_name(self.cluster.credential, self.cluster.run_id, phase)

    def _get(self, name: str) -> dict[str, Any] | None:
        try:
            return self.kube.get("Job", self.namespace, name)
        except NotFoundError:
            return None

    def run(self, phase: str, target: Target, *, old: Secret, new: Secret) -> Change:
        """Run ``phase`` once for this run: a succeeded Job is observed, not run again."""
        name = self.name(phase)
        job = self._get(name)
        if job is not None and _condition(job, "Complete"):
            return Change(False, f"job {self.namespace}/{name} ({phase}) had succeeded")
        if job is not None and _condition(job, "Failed"):
            self.kube.delete("Job", self.namespace, name)  # an earlier attempt's: run again
            job = None
        inherited = job is not None  # still running: an earlier attempt's (rotate killed)
        if job is None:
            self._create(name, phase, target, old, new)
        try:
            try:
                self._wait(name, phase, old, new)
            except JobFailed:
                if not inherited:
                    raise
                # the earlier attempt's Job failed while this one waited: run it once more
                self.kube.delete("Job", self.namespace, name)
                self._create(name, phase, target, old, new)
                self._wait(name, phase, old, new)
        finally:
            self._forget_values(name)
        return Change(True, f"job {self.namespace}/{name} ({phase}) succeeded")

    def _create(self, name: str, phase: str, target: Target, old: Secret,
                new: Secret) -> None:
        labels = {**MANAGED, "rotate.dev/phase": phase}
        # ConflictError: an earlier attempt of this run made it (same run: same values)
        with contextlib.suppress(ConflictError):
            self.kube.create_secret(self.namespace, f"{name}-values",
                                    {"old": old, "new": new}, labels=labels)
        # ConflictError: created meanwhile by another attempt: wait for that one
        with contextlib.suppress(ConflictError):
            self.kube.create("Job", self.namespace, self._body(name, phase, target, labels))

    def _body(self, name: str, phase: str, target: Target,
              labels: dict[str, str]) -> dict[str, Any]:
        t = self.template
        env = [{"name": n, "value": v} for n, v in t.env]
        env += [{"name": "ROTATE_PHASE", "value": phase},
                {"name": "ROTATE_VALUES_DIR", "value": VALUES_DIR},
                {"name": "ROTATE_USER", "value": target.accounts.new},
                {"name": "ROTATE_CREDENTIAL", "value": self.cluster.credential}]
        container: dict[str, Any] = {
            "name": "rotator", "image": t.image, "command": list(t.command), "env": env,
            "volumeMounts": [{"name": "values", "mountPath": VALUES_DIR, "readOnly": True}]}
        if t.args:
            container["args"] = list(t.args)
        pod: dict[str, Any] = {
            "restartPolicy": "Never", "containers": [container],
            "volumes": [{"name": "values", "secret": {"secretName": f"{name}-values",
                                                      "defaultMode": 0o400}}]}
        if t.service_account:
            pod["serviceAccountName"] = t.service_account
        return {"metadata": {"name": name, "labels": labels,
                             "annotations": {"rotate.dev/run-id": self.cluster.run_id}},
                "spec": {"backoffLimit": 0, "activeDeadlineSeconds": max(1, int(t.deadline)),
                         "template": {"metadata": {"labels": labels}, "spec": pod}}}

    def _wait(self, name: str, phase: str, old: Secret, new: Secret) -> None:
        where = f"{phase} job {self.namespace}/{name}"
        limit = Deadline.after(self.template.deadline + _STATUS_GRACE)
        by_step = self.cluster.deadline is not None and self.cluster.deadline.at < limit.at
        if by_step and self.cluster.deadline is not None:
            limit = self.cluster.deadline

        def ended() -> dict[str, Any] | None:
            job = self._get(name)
            if job is None:
                raise JobDeleted(SYSTEM, where, "the Job was deleted while it ran; whether the "
                                 "phase took effect is unknown (resume runs it again)")
            if _condition(job, "Complete") or _condition(job, "Failed"):
                return job
            return None

        try:
            job = wait_for(ended, deadline=limit, what=f"{where} to end",
                           cancel=self.cluster.cancel)
        except WaitTimeout:
            why = ("did not end before the step's deadline (its own is "
                   f"{_span(self.template.deadline)}); it may still run: resume waits for it"
                   if by_step else
                   f"did not end within {_span(self.template.deadline)} (its deadline)")
            raise PermanentError(SYSTEM, where,
                                 f"{why}{self._tail(name, old, new)}") from None
        failed = _condition(job, "Failed")
        if failed is None:
            return
        why = ("exceeded its deadline of " + _span(self.template.deadline)
               if failed.get("reason") == "DeadlineExceeded" else "the rotator exited non-zero")
        raise JobFailed(SYSTEM, where, f"{why}{self._tail(name, old, new)}")

    def _tail(self, name: str, old: Secret, new: Secret) -> str:
        """The log tail of the Job's newest pod, values redacted; empty when none is left."""
        try:
            pods = self.kube.list("Pod", self.namespace, label_selector=f"job-name={name}")
            if not pods:
                return "; its pod is gone (no log)"
            pod = max(pods, key=lambda p: str(p["metadata"].get("creationTimestamp") or ""))
            text = self.kube.pod_log_tail(self.namespace, pod["metadata"]["name"], LOG_LINES)
        except ClientError as exc:
            return f"; its log could not be read ({exc.reason})"
        lines = redact(text, old, new).strip()
        return f"; log tail of pod {pod['metadata']['name']}:\n{lines}" if lines else (
            f"; pod {pod['metadata']['name']} logged nothing")

    def _forget_values(self, name: str) -> None:
        with contextlib.suppress(NotFoundError):
            self.kube.delete("Secret", self.namespace, f"{name}-values")


class _NoProbe:
    """``apply: job`` proves through its own ``test`` phase: there is no login from outside."""

    @property
    def endpoint(self) -> Endpoint:
        return Endpoint("", 0)  # nowhere: the rotator reaches the provider, rotate does not

    def accepts(self, user: str, password: Secret) -> bool:
        raise PermanentError(SYSTEM, "probe", "apply: job is proven by its test phase")


class JobMethod:
    """:class:`~rotate.providers.method.ProviderMethod` running the chain's rotator Job."""

    values = ValueRule()
    restart_hint = "the provider keeps its value inside itself: use apply: job"

    def describe_apply(self, applied: ProviderApply, *, overlap: bool) -> str:
        image = applied.job.image if applied.job else "?"
        return (f"job {image}: set (new), test" + ("" if overlap else ", finish") +
                "; values mounted from a Secret made for the run")

    def describe_retire(self, applied: ProviderApply) -> str:
        return "job: finish (the old value retired)"

    def retires_replaced(self, applied: ProviderApply) -> bool:
        return False  # the undo is the set phase with the old value: that is the cut

    def open_probe(self, link: Link) -> AuthProbe:
        return _NoProbe()

    def open_admin(self, link: Link, user: str, password: Secret) -> JobRunner:
        """The runner of the phases' Jobs; no password is tried (the rotator authenticates
        itself, from inside the cluster)."""
        cluster = link.cluster
        if cluster is None or cluster.applied is None:
            raise PermanentError(SYSTEM, "reach the provider",
                                 "no cluster access was wired for apply: job (internal)")
        return JobRunner(cluster, cluster.applied)

    def preflight(self, admin: JobRunner, probe: AuthProbe, target: Target) -> str:
        """The template holds no value; the service account exists.  Observe only."""
        t = admin.template
        leaks = template_leaks(t, target.old)
        if leaks:
            raise PermanentError(SYSTEM, f"job template of {target.applied.provider}",
                                 "the current value appears in " + ", ".join(leaks) +
                                 f": a value reaches the rotator only as a file under "
                                 f"{VALUES_DIR} (old, new); remove it from the chain's job")
        if t.service_account:
            admin.kube.get("ServiceAccount", admin.namespace, t.service_account)
        return (f"job {t.image} in {admin.namespace}: no value in command, args or env; "
                f"deadline {_span(t.deadline)} per phase")

    def apply(self, admin: JobRunner, probe: AuthProbe, target: Target,
              progress: Progress) -> Change:
        progress.record(set_job=admin.name("set"))
        steps = [admin.run("set", target, old=target.old, new=target.new),
                 admin.run("test", target, old=target.old, new=target.new)]
        if target.strategy != "overlap":
            steps.append(admin.run("finish", target, old=target.old, new=target.new))
        return Change(any(s.changed for s in steps), "; ".join(s.detail for s in steps))

    def retire(self, admin: JobRunner, probe: AuthProbe, target: Target) -> Change:
        return admin.run("finish", target, old=target.old, new=target.new)

    def restore(self, admin: JobRunner, probe: AuthProbe, target: Target) -> Change:
        """The set phase with the restored value as ``new``, then its test."""
        a = admin.run("undo-set", target, old=target.new, new=target.old)
        b = admin.run("undo-test", target, old=target.new, new=target.old)
        return Change(a.changed or b.changed, f"{a.detail}; {b.detail}")

    def retire_replaced(self, admin: JobRunner, probe: AuthProbe, target: Target) -> Change:
        return Change(False, "the undo's set phase already replaced the value")
