"""What a run, a resume and a rollback share before their first step: the strategy, the
candidate value, the run id, the Leases, the ``run.start`` record, the unfinished-run check
(rotate.engine.api, rotate.engine.several)."""

from __future__ import annotations

import dataclasses
import secrets as _secrets
from collections.abc import Sequence
from typing import TYPE_CHECKING

from rotate.chain.model import Chain, Credential
from rotate.chain.strategy_rules import strategy_problem
from rotate.core.errors import ClientError, LockHeld, PreflightFailed, UsageError
from rotate.core.fingerprint import fingerprint
from rotate.core.secret import Secret, generate
from rotate.core.strategy import Strategy
from rotate.core.timestamps import utcnow
from rotate.engine import journal as journal_mod
from rotate.engine.model import Adapters, Adoption, Operation, Options, PlannedStep, PreflightResult
from rotate.engine.run_start import RunStart
from rotate.engine.targets import backend_target

if TYPE_CHECKING:
    from rotate.engine.kinds.base import Restore
    from rotate.engine.lock import Locks
    from rotate.engine.runstore import RunStore


def strategy_for(options: Options, credential: Credential) -> Strategy:
    strategy = options.strategy or credential.strategy
    if strategy not in set(Strategy):
        raise UsageError(f"unknown strategy {strategy!r} (restart or overlap)")
    problem = strategy_problem(credential, strategy)
    if problem is not None:
        raise UsageError(problem)
    if strategy == Strategy.restart and (credential.waves or credential.canary):
        raise UsageError(f"credential {credential.name!r} orders its consumers in waves or "
                         "bakes a canary: that needs strategy overlap (under restart the "
                         "provider accepts only the new value, so a later wave would fail "
                         "while an earlier one moves or bakes): "
                         + ("drop --strategy restart" if options.strategy else
                            "its providers must hold two values (chain-file.md "
                            "\"The strategy rule\")"))
    return Strategy(strategy)


def candidate_for(credential: Credential, new_value: Secret | None) -> Secret:
    if new_value is not None:
        return new_value
    gen = credential.generate
    if gen is None:
        # Plan of a stdin credential: validate the documents with a value of the usual shape.
        return generate()
    return generate(gen.length, gen.alphabet)


def new_run_id(credential: str) -> str:
    return f"{utcnow():%Y%m%dT%H%M%SZ}-{credential}-{_secrets.token_hex(2)}"


def holder_of(run_id: str) -> str:
    import getpass
    import socket

    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = "unknown"
    return f"{user}@{socket.gethostname()}/{run_id}"


def lease_for(chain: Chain, adapters: Adapters, credential: str | Sequence[str], run_id: str,
              runs: RunStore) -> Locks:
    """The credential's Lease and one per provider it rolls (lock.py): a second credential
    on a shared provider exits 4 naming the holder instead of rolling it at the same time.
    A run of several credentials takes one Lease per credential, in sorted order, then the
    providers' Leases (each once, sorted): every run takes Leases in one global order, so
    two runs never wait on each other's, and a refused run releases what it took."""
    from rotate.engine.lock import Lease, Locks, provider_lease_name

    holder = holder_of(run_id)
    names = [credential] if isinstance(credential, str) else sorted(credential)

    def one(cred: str, name: str | None = None) -> Lease:
        return Lease(adapters.kube, chain.cluster.lock_namespace, cred, holder,
                     duration=chain.defaults.lease_duration, name=name,
                     run_ended=runs.has_ended, run_started=runs.has_started)

    providers = {provider_lease_name(p): name for name in names if name in chain.credentials
                 for p in chain.credentials[name].providers}
    order = providers if len(names) == 1 else dict(sorted(providers.items()))
    return Locks(one(names[0]), [*(one(n) for n in names[1:]),
                                 *(one(cred, lease) for lease, cred in order.items())])


def acquire(lease: Locks, options: Options, reclaim_run: str | None = None) -> None:
    """Take the lock; a failure other than "held" means nothing could start (exit 3)."""
    try:
        lease.acquire(take_over=options.take_over_lock, reclaim_run=reclaim_run)
    except LockHeld:
        raise
    except ClientError as exc:
        raise PreflightFailed(
            f"cannot take the lock Lease {lease.namespace}/{lease.name}: {exc.message} "
            f"(does namespace {lease.namespace} exist, may you create leases in it?)") from None


def run_start_record(
    chain: Chain, cred: Credential, run_id: str, operation: Operation, strategy: Strategy,
    steps: list[PlannedStep], current_version: int | None, consumers: tuple[str, ...],
    holder: str, *, of_run: str | None = None, restore: Restore | None = None,
    supplied: Secret | None = None, adopt: Adoption | None = None,
) -> RunStart:
    return RunStart(
        run_id=run_id, credential=cred.name, operation=operation, strategy=strategy,
        chain_file=str(chain.file), backend_path=backend_target(chain, cred).split("#")[0],
        current_version=current_version, consumers=consumers,
        providers=tuple(str(p) for p in cred.providers), steps=tuple(steps), holder=holder,
        of_run=of_run,
        restore_backend_version=restore.backend_version if restore else None,
        restore_config=dict(restore.config_versions) if restore else {},
        restore_config_match=dict(restore.config_match) if restore else {},
        value_fingerprint=fingerprint(supplied) if supplied is not None else None,
        adopted=adopt.version if adopt is not None else None,
        adopted_from=adopt.chain_version if adopt is not None else None)


def mark_rolled_back(runs: RunStore, original: str | None, by: str) -> None:
    if not original:
        return
    j = runs.open_journal(original)
    try:
        j.append("run.rolled-back", data={"by": by})
    finally:
        j.close()


def with_unfinished(observed: PreflightResult, options: Options,
                     cred: Credential, runs: RunStore) -> PreflightResult:
    """Preflight's checks with ``runs.unfinished`` first (rotate.engine.unfinished)."""
    from rotate.engine.unfinished import unfinished_check

    check = unfinished_check(runs, cred.name, force=options.force)
    return dataclasses.replace(observed, checks=(check, *observed.checks))


def refuse_overtaken(runs: RunStore, state: journal_mod.RunState) -> None:
    """PreflightFailed (exit 3, nothing changed) when a later run of the credential changed
    the chain: resuming this one would continue with a value the chain no longer holds."""
    from rotate.engine.unfinished import describe, later_runs

    later = later_runs(runs, state)
    if later:
        raise PreflightFailed(
            f"run {state.run_id} cannot be resumed, nothing was changed: a later run of "
            f"{state.credential} changed the chain since — {describe(later[0])}",
            hint=f"act on the latest run instead (`rotate resume {later[0].run_id} --confirm` "
                 f"or `rotate rollback {later[0].run_id} --confirm`)")
