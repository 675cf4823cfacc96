"""A fake engine facade for the CLI tests, injected through ``CliState`` (no patching).

It implements the methods of ``rotate.engine.api.Engine`` the CLI calls, with canned plans and
reports shaped like the real ones (cli.md), and records what the CLI handed it.
"""

from __future__ import annotations

import os
import signal
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from rotate.core.errors import (
    ChainFileError,
    ChainFileProblem,
    LockHeld,
    NothingToAdopt,
    PreflightFailed,
    UsageError,
)
from rotate.core.secret import Secret
from rotate.core.waiting import CancelToken
from rotate.engine.model import (
    Adoption,
    Check,
    Observer,
    Plan,
    PlannedStep,
    RunReport,
    RunSummary,
    StepRecord,
    Trap,
)
from rotate.engine.model import Options as FakeOptions  # the real one: the CLI must fit it

RUN_ID = "20261202T140300Z-dragonfly-a1b2"
FIXED_NOW = datetime(2026, 12, 2, 14, 3, 5, tzinfo=UTC)


@dataclass(frozen=True)
class FakeCredential:
    name: str
    providers: tuple[str, ...]
    consumers: tuple[str, ...]
    last_run: RunSummary | None


STEPS = (
    PlannedStep(1, 1, "backend.write", "secret/infra/dragonfly#password", "version 7 → 8"),
    PlannedStep(2, 2, "sync.trigger", "dragonfly/dragonfly-password", "force-sync annotation"),
    PlannedStep(3, 2, "sync.wait", "dragonfly/dragonfly-password"),
    PlannedStep(4, 3, "provider.restart", "Deployment dragonfly/dragonfly"),
    PlannedStep(5, 3, "provider.wait", "Deployment dragonfly/dragonfly"),
    PlannedStep(6, 4, "config.harvest", "shop/cart"),
    PlannedStep(7, 4, "config.write", "shop/cart bootstrap"),
    PlannedStep(8, 4, "consumer.restart", "Deployment shop/cart"),
    PlannedStep(9, 4, "consumer.wait", "Deployment shop/cart"),
    PlannedStep(10, 4, "readyz.check", "shop/cart"),
)

CHECKS_OK = (
    Check("vault.capabilities", True, "token may read, write secret/data/infra/dragonfly"),
    Check("kube.permissions", True, "patch deployments in dragonfly, shop"),
    Check("reloader.present", False, "Reloader annotations on shop/cart", fatal=False),
)

TRAP = Trap("refresh-created-once", "dragonfly/dragonfly-password",
            "refreshPolicy CreatedOnce never syncs again",
            "refuse: change refreshPolicy to Periodic first", blocking=False)


def make_plan(ok: bool = True) -> Plan:
    checks = CHECKS_OK if ok else (
        *CHECKS_OK[:1],
        Check("kube.permissions", False, "missing: patch deployments in shop (restricted)"),
    )
    return Plan(credential="dragonfly", strategy="restart", consumers=("cart", "order", "user"),
                providers=("Deployment dragonfly/dragonfly",),
                backend_path="secret/infra/dragonfly#password", current_version=7,
                preflight=checks, traps=(TRAP,), steps=STEPS,
                strategy_reason=("default restart: deployment/dragonfly/dragonfly (apply: "
                                 "rollout) holds one value without overlap.previousKey"))


def _record(step: PlannedStep, status: str, seconds: float | None = 0.5,
            detail: str = "") -> StepRecord:
    started = None if status == "pending" else "2026-12-02T14:03:01Z"
    finished = None if status in ("pending", "running") else "2026-12-02T14:03:02Z"
    return StepRecord(step.index, step.stage, step.kind, step.target, status,  # type: ignore[arg-type]
                      started, finished, None if status == "pending" else seconds, detail)


def make_report(outcome: str) -> RunReport:
    """succeeded | failed (consumer.wait) | interrupted (after step 3)."""
    failed_at = {"succeeded": None, "failed": 9, "interrupted": 4}[outcome]
    records = []
    for s in STEPS:
        if failed_at is None or s.index < failed_at:
            records.append(_record(s, "done", 0.25 * s.index))
        elif s.index == failed_at:
            records.append(_record(s, "failed" if outcome == "failed" else "pending",
                                   120.0 if outcome == "failed" else None,
                                   "0 of 2 new pods Ready after 120s" if outcome == "failed"
                                   else ""))
        else:
            records.append(_record(s, "pending"))
    code = {"succeeded": 0, "failed": 15, "interrupted": 130}[outcome]
    message = {
        "succeeded": "",
        "failed": "Consumer shop/cart did not become Ready within 120s: its new pods fail "
                  "readiness. Dragonfly already has the new password (version 8) and the "
                  "Config Center documents of cart were written; order and user were not "
                  "touched yet.",
        "interrupted": "Interrupted after step 3; nothing is half-done. The run is resumable.",
    }[outcome]
    failed = outcome != "succeeded"
    return RunReport(
        run_id=RUN_ID, credential="dragonfly", status=outcome, exit_code=code,  # type: ignore[arg-type]
        started_at="2026-12-02T14:03:00Z",
        finished_at="2026-12-02T14:05:10Z",
        backend={"path": "secret/infra/dragonfly#password", "previous_version": 7,
                 "version": 8},
        steps=tuple(records), message=message,
        resume=f"rotate resume {RUN_ID} --confirm" if failed else "",
        rollback=f"rotate rollback {RUN_ID} --confirm" if failed else "",
    )


@dataclass
class FakeEngine:
    """``outcome`` for run/resume/rollback: succeeded, failed, interrupted (the fake sends
    itself SIGINT), signal-twice, lock, preflight, bug, leak (bug whose text holds the
    value), nothing-to-adopt (``--adopt`` when the backend holds the chain's value)."""

    outcome: str = "succeeded"
    plan_ok: bool = True
    #: what ``status`` finds: ``closed``, or the link it reports broken (``secret``)
    chain: str = "closed"
    status_warning: str | None = None
    #: what ``due`` finds: ``due`` (dragonfly due), ``none`` (nothing due), ``error`` (the
    #: backend unreadable), ``stdin`` (dragonfly due, its value from stdin)
    due_found: str = "due"
    checks: tuple[Check, ...] = CHECKS_OK
    calls: list[tuple[str, Any]] = field(default_factory=list)
    received: list[Secret | None] = field(default_factory=list)

    Options = FakeOptions

    def _chain(self, options: FakeOptions) -> None:
        if not options.chain_file.exists():
            raise ChainFileError([ChainFileProblem(str(options.chain_file), None, "",
                                                   "no such file")])
        if options.chain_file.read_text().strip() == "broken":
            raise ChainFileError([ChainFileProblem(str(options.chain_file), 3,
                                                   "/credentials/dragonfly/backend",
                                                   "'path' is a required property")])

    def load_chain(self, options: FakeOptions) -> Any:
        self._chain(options)
        return object()

    def plan(self, options: FakeOptions, credential: str) -> Plan:
        self.calls.append(("plan", options))
        self._chain(options)
        if credential != "dragonfly":
            raise UsageError(f"unknown credential {credential!r}; the chain file has: dragonfly")
        return make_plan(self.plan_ok)

    def _operate(self, name: str, options: FakeOptions, observer: Observer,
                 cancel: CancelToken) -> RunReport:
        self.calls.append((name, options))
        self._chain(options)
        if self.outcome == "lock":
            raise LockHeld("another run holds the lock: Lease rotate-system/rotate-dragonfly "
                           "(run 20261202T120000Z-dragonfly-ffff)")
        if self.outcome == "preflight":
            exc = PreflightFailed("preflight failed: 1 check (kube.permissions)")
            exc.plan = make_plan(ok=False)  # type: ignore[attr-defined]
            raise exc
        if self.outcome == "nothing-to-adopt":
            done = NothingToAdopt("nothing to adopt: v8 already holds it; nothing was changed")
            done.plan = replace(  # type: ignore[attr-defined]
                make_plan(True), steps=(),
                adopt=Adoption(8, 8, True, "v8, the current version, is the one rotate "
                               "wrote last: the chain already holds it"))
            raise done
        if self.outcome == "bug":
            raise KeyError("some-internal-key")
        final = {"interrupted": "interrupted", "signal-twice": "interrupted",
                 "failed": "failed"}.get(self.outcome, "succeeded")
        report = make_report(final)
        for step, record in zip(STEPS, report.steps, strict=True):
            if record.status == "pending":
                break
            observer.step_started(step)
            observer.step_finished(step, record)
            if step.index == 3 and final == "interrupted":
                for _ in range(2 if self.outcome == "signal-twice" else 1):
                    os.kill(os.getpid(), signal.SIGINT)
                if not cancel.cancelled:
                    raise AssertionError("SIGINT did not reach the cancel token")
                observer.note("abandoning: step 3 is journaled")
                break
        return report

    def run(self, options: FakeOptions, credential: str, observer: Observer,
            cancel: CancelToken, new_value: Secret | None = None) -> RunReport:
        self.received.append(new_value)
        if self.outcome == "leak" and new_value is not None:
            raise RuntimeError(f"adapter failed with body {new_value.reveal()}")
        if new_value is not None:
            observer.note(f"using the value from stdin: {new_value}")
        return self._operate("run", options, observer, cancel)

    def plan_several(self, options: FakeOptions, credentials: list[str]) -> Plan:
        from rotate.engine.several import unknown_names

        self.calls.append(("plan_several", options))
        self._chain(options)
        error = unknown_names(["dragonfly", "postgres"], credentials)
        if error is not None:
            raise error
        return make_plan(self.plan_ok)

    def run_several(self, options: FakeOptions, credentials: list[str], observer: Observer,
                    cancel: CancelToken) -> RunReport:
        self.plan_several(options, credentials)
        return make_report(self.outcome)

    def resume(self, options: FakeOptions, run_id: str, observer: Observer,
               cancel: CancelToken, new_value: Any = None) -> RunReport:
        self.received.append(new_value)
        return self._operate("resume", options, observer, cancel)

    def rollback(self, options: FakeOptions, run_id: str, observer: Observer,
                 cancel: CancelToken) -> RunReport:
        report = self._operate("rollback", options, observer, cancel)
        return replace(report, status="rolled-back") if report.exit_code == 0 else report

    def runs(self, options: FakeOptions, unreadable: list[Any] | None = None,
             ) -> list[RunSummary]:
        self.calls.append(("runs", options))
        return [
            RunSummary(RUN_ID, "dragonfly", "2026-12-02T14:03:00Z", "failed", "consumer.wait"),
            RunSummary("20261201T090000Z-dragonfly-0c0c", "dragonfly", "2026-12-01T09:00:00Z",
                       "succeeded", None),
            RunSummary("20261201T091500Z-dragonfly-0d0d", "dragonfly", "2026-12-01T09:15:00Z",
                       "rolled-back", None, operation="rollback"),
        ]

    def show(self, options: FakeOptions, run_id: str) -> RunReport:
        self.calls.append(("show", options))
        if run_id != RUN_ID:
            raise UsageError(f"no run {run_id!r} in {options.state_dir}")
        return make_report("failed")

    def list_credentials(self, options: FakeOptions) -> list[FakeCredential]:
        self.calls.append(("list", options))
        self._chain(options)
        return [
            FakeCredential("dragonfly", ("Deployment dragonfly/dragonfly",),
                           ("cart", "order", "user"), self.runs(options)[0]),
            FakeCredential("payments-db", ("StatefulSet payments/postgres",), ("payment",),
                           None),
        ]

    def doctor(self, options: FakeOptions) -> tuple[Check, ...]:
        self.calls.append(("doctor", options))
        return self.checks

    def status(self, options: FakeOptions, credentials: Any = ()) -> list[Any]:
        self.calls.append(("status", (options, tuple(credentials))))
        self._chain(options)
        for name in credentials:
            if name != "dragonfly":
                raise UsageError(f"unknown credential {name!r}; the chain file has: dragonfly")
        return [make_status(self.chain)]

    def watch(self, options: FakeOptions, credentials: Any, settings: Any, stop: Any,
              child_args: Any, log: Any) -> None:
        """Returns at once (a real watcher runs until ``stop``), saying one line."""
        self.calls.append(("watch", (options, tuple(credentials), settings, list(child_args))))
        self._chain(options)
        log("leading: this replica acts now")

    def due(self, options: FakeOptions, credentials: Any = ()) -> list[Any]:
        self.calls.append(("due", (options, tuple(credentials))))
        self._chain(options)
        found = make_due(self.due_found)
        known = [d.credential for d in found]
        for name in credentials:
            if name not in known:
                raise UsageError(f"unknown credential {name!r} (the chain file defines: "
                                 f"{', '.join(known)})")
        return [d for d in found if d.credential in credentials] if credentials else found


def make_due(found: str) -> list[Any]:
    """``rotate due`` findings shaped like the engine's: dragonfly (maxAge), postgres (a
    schedule) and redis (neither)."""
    from datetime import UTC, datetime

    from rotate.engine.due import Due

    at = datetime(2026, 12, 2, 14, 3, tzinfo=UTC)
    dragonfly = Due(
        "dragonfly", found == "due", ("maxAge",) if found == "due" else (),
        "value 31d0h old ≥ maxAge 30d0h" if found == "due" else "value 2h00m old < maxAge 30d0h",
        datetime(2026, 12, 1, 14, 3, tzinfo=UTC) if found == "due"
        else datetime(2027, 1, 1, 12, 3, tzinfo=UTC),
        "secret/infra/dragonfly#password", 4,
        datetime(2026, 11, 1, 14, 3, tzinfo=UTC) if found == "due"
        else datetime(2026, 12, 2, 12, 3, tzinfo=UTC),
        None, 2678400.0 if found == "due" else 7200.0, 2592000.0, None)
    if found == "stdin":
        dragonfly = replace(make_due("due")[0], manual=True)
    postgres = Due("postgres", False, (), "schedule '0 3 * * *'",
                   datetime(2026, 12, 3, 3, 0, tzinfo=UTC), "secret/infra/postgres#password",
                   7, datetime(2026, 12, 2, 3, 1, tzinfo=UTC), at, 39720.0, None, "0 3 * * *")
    redis = Due("redis", False, (), "no schedule (neither maxAge nor schedule)", None,
                "secret/infra/redis#password", None, None, None, None, None, None)
    if found == "error":
        postgres = Due("postgres", False, (), "the backend cannot be read: vault: "
                       "read_metadata: permission denied (HTTP 403)", None,
                       "secret/infra/postgres#password", None, None, None, None, None,
                       "0 3 * * *", error="cannot read secret/infra/postgres#password: vault: "
                       "read_metadata: permission denied (HTTP 403)")
    return [dragonfly, postgres, redis]


def make_status(chain: str) -> Any:
    """A ``rotate status`` finding shaped like the engine's: closed, or the Secret holding
    another value than the backend (a hand ``bao kv put``)."""
    from rotate.engine.status import CredentialStatus
    from rotate.engine.status_model import Link

    fp, other = "3f1c9a0be27d4c55", "9b0e17c2d4a8f631"
    broken = chain == "secret"
    links = [
        Link("backend", "secret/infra/dragonfly#password", True,
             f"v4, written 2026-12-02T14:03:00Z, fingerprint {fp}"),
        Link("secret", "dragonfly/dragonfly-password-secret#password", not broken,
             f"fingerprint {other} ≠ backend v4's {fp} (ExternalSecret "
             "dragonfly/dragonfly-password last synced 2026-12-02T13:00:00Z)" if broken
             else f"fingerprint {fp} = backend v4"),
        Link("externalsecret", "dragonfly/dragonfly-password", not broken,
             "Ready=True reason=SecretSynced, last synced 2026-12-02T13:00:00Z"
             + (", before v4 was written" if broken else "")),
        Link("provider", "deployment/dragonfly/dragonfly", not broken,
             f"redis login as default from outside: the current value "
             f"{'refused' if broken else 'accepted'}"),
        Link("provider.retired", "deployment/dragonfly/dragonfly", True,
             "default with v3's value refused"),
        Link("consumer.document", "shop/cart bootstrap", True,
             f"v5 holds fingerprint {fp} at /dragonfly/password, /dragonfly/url"),
        Link("consumer.pods", "deployment/shop/cart", True,
             "1 pod(s) started after v5 was written (2026-12-02T14:03:01Z)"),
        Link("consumer.readyz", "shop/cart:http/readyz", not broken,
             "HTTP 503" if broken else "HTTP 200"),
        Link("consumer.token", "cart", True,
             "1 live token tok_7, the one Secret shop/cart-config-token holds"),
        Link("value.age", "secret/infra/dragonfly#password", True, "2m05s old, maxAge 30d0h"),
    ]
    return CredentialStatus(
        "dragonfly", "secret/infra/dragonfly#password", 4, fp, FIXED_NOW, 125.0, 2592000.0,
        tuple(links), "rotate dragonfly --adopt --confirm" if broken else "", 0.41)
