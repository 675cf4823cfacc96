"""The engine's facade: the only module the CLI calls (docs/design.md "Engine ↔ CLI").

``run``/``resume``/``rollback`` return a RunReport whose ``exit_code`` follows cli.md; they
raise RotateError subclasses only *before* anything changed: UsageError, ChainFileError,
PreflightFailed (with ``.plan`` attached for display), LockHeld.  The lock is always
released when they return, whatever happened.
"""

from __future__ import annotations

import getpass
import os
import secrets as _secrets
import socket
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rotate.chain.model import Chain, Credential, consumers_of
from rotate.core.errors import ClientError, LockHeld, PreflightFailed, RotateError, UsageError
from rotate.core.secret import Secret, generate
from rotate.core.waiting import CancelToken
from rotate.engine import journal as journal_mod
from rotate.engine import wiring
from rotate.engine.executor import Executor, report_from
from rotate.engine.journal import Journal
from rotate.engine.lock import Lease
from rotate.engine.model import (
    Check,
    CredentialSummary,
    Observer,
    Plan,
    PlannedStep,
    RunReport,
    RunSummary,
    StepRecord,
)
from rotate.engine.plan import backend_target, build_plan
from rotate.engine.preflight import Adapters, describe_failures, doctor_checks, preflight
from rotate.engine.rollback import backend_written, build_rollback
from rotate.engine.steps import Context
from rotate.stages.timestamps import utcnow


@dataclass(frozen=True)
class Options:
    chain_file: Path
    state_dir: Path
    strategy: str | None = None
    max_parallel: int | None = None
    timeout: float | None = None
    context: str | None = None
    kubeconfig: str | None = None
    value_stdin: bool = False
    take_over_lock: bool = False


#: Tests replace this to hand the engine fakes instead of real adapters.
AdapterFactory = Callable[[Chain, Options, Mapping[str, str]], Adapters]
adapter_factory: AdapterFactory = wiring.build


def load_chain(options: Options, *, schema_check: bool = True) -> Chain:
    from rotate.chain.loader import load_chain as _load

    return _load(options.chain_file, schema_check=schema_check)


def _adapters(chain: Chain, options: Options) -> Adapters:
    return adapter_factory(chain, options, os.environ)


def _strategy(options: Options, credential: Credential) -> str:
    strategy = options.strategy or credential.strategy
    if strategy not in ("restart", "overlap"):
        raise UsageError(f"unknown strategy {strategy!r} (restart or overlap)")
    return strategy


def _candidate(credential: Credential, new_value: Secret | None) -> Secret:
    if new_value is not None:
        return new_value
    gen = credential.generate
    if gen is None:
        # Plan of a stdin credential: validate the documents with a value of the usual shape.
        return generate()
    return generate(gen.length, gen.alphabet)


def new_run_id(credential: str) -> str:
    return f"{utcnow():%Y%m%dT%H%M%SZ}-{credential}-{_secrets.token_hex(2)}"


def _holder(run_id: str) -> str:
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = "unknown"
    return f"{user}@{socket.gethostname()}/{run_id}"


def _settings(chain: Chain, credential: Credential, options: Options) -> tuple[float, int]:
    timeout = options.timeout if options.timeout is not None else chain.timeout_for(credential)
    parallel = options.max_parallel or chain.defaults.max_parallel
    return timeout, max(1, parallel)


def _lease(chain: Chain, adapters: Adapters, credential: str, run_id: str,
           state_dir: Path) -> Lease:
    return Lease(adapters.kube, chain.cluster.lock_namespace, credential, _holder(run_id),
                 duration=chain.defaults.lease_duration,
                 run_ended=lambda rid: journal_mod.has_ended(state_dir, rid))


def _acquire(lease: Lease, options: Options, reclaim_run: str | None = None) -> None:
    """Take the lock; a failure other than "held" means nothing could start (exit 3)."""
    try:
        lease.acquire(take_over=options.take_over_lock, reclaim_run=reclaim_run)
    except LockHeld:
        raise
    except ClientError as exc:
        raise PreflightFailed(
            f"cannot take the lock Lease {lease.namespace}/{lease.name}: {exc.message} "
            f"(does namespace {lease.namespace} exist, may you create leases in it?)") from None


# --------------------------------------------------------------------------- plan / run


def plan(options: Options, credential: str) -> Plan:
    """Preflight + the ordered steps. Changes nothing."""
    chain = load_chain(options)
    cred = chain.credential(credential)
    strategy = _strategy(options, cred)
    adapters = _adapters(chain, options)
    observed = preflight(chain, cred, adapters, strategy=strategy,
                         candidate=_candidate(cred, None))
    return build_plan(chain, cred, strategy, observed)


def _start_data(
    chain: Chain, cred: Credential, run_id: str, operation: str, strategy: str,
    steps: list[PlannedStep], current_version: int | None, consumers: list[str],
    extra: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    return {
        "run_id": run_id, "credential": cred.name, "operation": operation,
        "strategy": strategy, "chain_file": str(chain.file),
        "backend_path": backend_target(chain, cred).split("#")[0],
        "current_version": current_version, "consumers": consumers,
        "providers": [str(p) for p in cred.providers],
        "steps": [s.to_json() for s in steps], **(extra or {}),
    }


def run(
    options: Options, credential: str, observer: Observer, cancel: CancelToken,
    new_value: Secret | None = None,
) -> RunReport:
    chain = load_chain(options)
    cred = chain.credential(credential)
    strategy = _strategy(options, cred)
    if cred.value_from == "stdin" and new_value is None:
        raise UsageError(f"credential {cred.name} takes its value from stdin: use --value-stdin")
    adapters = _adapters(chain, options)
    run_id = new_run_id(cred.name)
    lease = _lease(chain, adapters, cred.name, run_id, options.state_dir)
    _acquire(lease, options)
    try:
        candidate = _candidate(cred, new_value)
        pre = PlannedStep(0, 0, "preflight", cred.name, "connectivity, permissions, traps")
        observer.step_started(pre)
        began = time.monotonic()
        observed = preflight(chain, cred, adapters, strategy=strategy, candidate=candidate)
        preflight_seconds = round(time.monotonic() - began, 3)
        the_plan = build_plan(chain, cred, strategy, observed)
        passed = sum(1 for c in the_plan.preflight if c.ok)
        observer.step_finished(pre, StepRecord(0, 0, "preflight", cred.name,
                                               "done" if the_plan.ok else "failed",
                                               seconds=preflight_seconds,
                                               detail=f"{passed}/{len(the_plan.preflight)} ok"))
        if not the_plan.ok:
            exc = PreflightFailed(describe_failures(the_plan.preflight, the_plan.traps))
            exc.plan = the_plan  # type: ignore[attr-defined]
            raise exc
        timeout, parallel = _settings(chain, cred, options)
        steps = [pre, *the_plan.steps]
        journal = Journal.open(options.state_dir, run_id)
        try:
            start = _start_data(chain, cred, run_id, "rotate", strategy, steps,
                                observed.current_version, list(observed.consumers),
                                {"holder": lease.holder})
            journal.append("run.start", data=start)
            journal.append("step.start", step=pre, data={})
            journal.append("step.done", step=pre, data={
                "detail": f"{passed} checks passed", "seconds": preflight_seconds,
                "traps": [t.name for t in the_plan.traps]})
            ctx = Context(chain, cred, adapters, run_id, journal, cancel, timeout, parallel,
                          "rotate", start, new_value=candidate)
            Executor(ctx, observer, lease=lease).execute(the_plan.steps)
        finally:
            journal.close()
        return report_from(journal_mod.load(options.state_dir, run_id))
    finally:
        lease.release()


def resume(options: Options, run_id: str, observer: Observer, cancel: CancelToken) -> RunReport:
    """Continue from the first unfinished step; the value is re-read, never regenerated."""
    state = journal_mod.load(options.state_dir, run_id)
    if state.status in ("succeeded", "rolled-back"):
        raise UsageError(f"run {run_id} is {state.status}; nothing to resume")
    chain = load_chain(options)
    cred = chain.credential(state.credential)
    adapters = _adapters(chain, options)
    lease = _lease(chain, adapters, cred.name, run_id, options.state_dir)
    _acquire(lease, options, reclaim_run=run_id)
    try:
        timeout, parallel = _settings(chain, cred, options)
        journal = Journal.open(options.state_dir, run_id)
        try:
            journal.append("run.resume", data={"holder": lease.holder})
            ctx = Context(chain, cred, adapters, run_id, journal, cancel, timeout, parallel,
                          state.operation, state.start)
            for st in state.steps:
                if st.status == "done":
                    ctx.done[(st.step.kind, st.step.subject)] = st.data
            prior = {st.step.index: st.data for st in state.steps if st.status != "done"}
            remaining = [st.step for st in state.steps if st.status not in ("done", "skipped")]
            if remaining and remaining[0].kind == "sync.wait" and not remaining[0].subject:
                # ESO may have missed the first trigger (it was down or stalled): trigger
                # again, so the wait has a fresh request and a fresh trigger time to prove.
                # (The overlap strategy's phase-2 sync.wait triggers by itself.)
                remaining[:0] = [st.step for st in state.steps if st.step.kind == "sync.trigger"]
            Executor(ctx, observer, lease=lease, prior=prior).execute(remaining)
        finally:
            journal.close()
        final = journal_mod.load(options.state_dir, run_id)
        if final.operation == "rollback" and final.status == "succeeded":
            _mark_rolled_back(options, str(final.start.get("of_run", "")), run_id)
        return report_from(journal_mod.load(options.state_dir, run_id))
    finally:
        lease.release()


def _mark_rolled_back(options: Options, original: str, by: str) -> None:
    if not original:
        return
    j = Journal.open(options.state_dir, original)
    try:
        j.append("run.rolled-back", data={"by": by})
    finally:
        j.close()


def rollback(options: Options, run_id: str, observer: Observer, cancel: CancelToken) -> RunReport:
    """Restore what run ``run_id`` replaced, as a run of its own (operation rollback)."""
    orig = journal_mod.load(options.state_dir, run_id)
    if orig.operation != "rotate":
        raise UsageError(f"run {run_id} is a {orig.operation}; roll back the rotation it undid")
    if orig.status == "rolled-back":
        raise UsageError(f"run {run_id} was already rolled back by {orig.rolled_back_by}")
    chain = load_chain(options)
    cred = chain.credential(orig.credential)
    adapters = _adapters(chain, options)
    rb_id = new_run_id(cred.name)
    lease = _lease(chain, adapters, cred.name, rb_id, options.state_dir)
    _acquire(lease, options, reclaim_run=run_id)
    try:
        written_from = backend_written(adapters.vault, cred, orig)
        steps, extra = build_rollback(chain, cred, orig, written_from)
        timeout, parallel = _settings(chain, cred, options)
        journal = Journal.open(options.state_dir, rb_id)
        try:
            start = _start_data(chain, cred, rb_id, "rollback", orig.strategy, steps,
                                written_from, list(extra.get("consumers", [])),
                                {**extra, "of_run": run_id, "holder": lease.holder})
            journal.append("run.start", data=start)
            if not steps:
                journal.append("run.end", data={
                    "status": "succeeded", "exit_code": 0,
                    "message": f"run {run_id} never wrote a value; nothing to roll back"})
            else:
                ctx = Context(chain, cred, adapters, rb_id, journal, cancel, timeout, parallel,
                              "rollback", start)
                Executor(ctx, observer, lease=lease).execute(steps)
        finally:
            journal.close()
        final = journal_mod.load(options.state_dir, rb_id)
        if final.status == "succeeded" and steps:
            _mark_rolled_back(options, run_id, rb_id)
        return report_from(final)
    finally:
        lease.release()


# --------------------------------------------------------------------------- read-only views


def _summary(state: journal_mod.RunState) -> RunSummary:
    failed = next((f"{s.step.kind} {s.step.target}" for s in state.steps
                   if s.status in ("failed", "interrupted")), None)
    return RunSummary(state.run_id, state.credential, state.started_at,
                      state.status,  # type: ignore[arg-type]
                      failed, state.operation)


def runs(options: Options) -> list[RunSummary]:
    out: list[RunSummary] = []
    for run_id in journal_mod.list_run_ids(options.state_dir):
        try:
            out.append(_summary(journal_mod.load(options.state_dir, run_id)))
        except (UsageError, KeyError, ValueError, TypeError):
            continue  # an unreadable journal must not hide the others
    return out


def show(options: Options, run_id: str) -> RunReport:
    return report_from(journal_mod.load(options.state_dir, run_id))


def list_credentials(options: Options) -> list[CredentialSummary]:
    # Validated as fully as a rotation: a file `rotate CRED` refuses must not list (issue 10).
    chain = load_chain(options)
    history = runs(options)
    out = []
    for name, cred in chain.credentials.items():
        last = next((r for r in history if r.credential == name), None)
        out.append(CredentialSummary(name, cred.description,
                                     tuple(str(p) for p in cred.providers),
                                     consumers_of(chain, name), cred.strategy, last))
    return out


def doctor(options: Options) -> list[Check]:
    """Connectivity and every permission any run needs, for every credential in the chain."""
    chain = load_chain(options)
    env = os.environ
    checks: list[Check] = []

    def build(name: str, fn: Callable[[], Any]) -> Any:
        try:
            return fn()
        except RotateError as exc:
            checks.append(Check(f"{name}.config", False, exc.message))
            return None

    if adapter_factory is not wiring.build:
        adapters = adapter_factory(chain, options, env)
        vault, kube, cc = adapters.vault, adapters.kube, adapters.config_center
    else:
        vault = build("backend", lambda: wiring.build_vault(chain, env))
        kube = build("kubernetes", lambda: wiring.build_kube(chain, options, env))
        cc = build("configcenter", lambda: wiring.build_config_center(chain, env))
    return checks + doctor_checks(chain, vault, kube, cc)
