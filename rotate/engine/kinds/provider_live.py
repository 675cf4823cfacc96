"""③ What the live provider kinds share (not a kind): which providers they act on, the
:class:`~rotate.providers.Target` of this run (accounts, old and new values) and the
attempt's :class:`~rotate.providers.access.Reach` (the method, the Service read once, the
probe, admin sessions).

A run's *old* value is the one the backend held before ``backend.write`` (version N), its
*new* value the one written (:func:`~rotate.engine.kinds.backend_write.ensure_value`).  A
rollback's *restored* value is version N's again and its *replaced* value the one it wrote
over (the target's ``old`` and ``new``).  Values are re-read from the backend by version on
every attempt (resume re-reads, never regenerates); none is returned or journaled.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from typing import Any

from rotate.chain.model import Credential, ProviderApply
from rotate.core.errors import EXIT_RESTORE_REFUSED, PermanentError, StepFailed
from rotate.core.secret import Secret
from rotate.core.waiting import WaitTimeout
from rotate.engine.kinds.backend_write import (
    BackendAdopt,
    BackendRestore,
    BackendWrite,
    ensure_value,
)
from rotate.engine.kinds.base import Run, StepData
from rotate.engine.targets import parse_workload
from rotate.providers import Target, method_of
from rotate.providers import access as providers_access
from rotate.providers.access import Reach
from rotate.providers.accounts import accounts_for, active_username, rollback_accounts
from rotate.providers.method import ProviderMethod
from rotate.providers.proof import ProviderProofFailed
from rotate.stages import backend


@dataclass(frozen=True)
class Applied(StepData):
    """What ``provider.apply`` and ``provider.retire`` (either form) journal when done."""

    method: str
    account: str  # the ACL user / role that took the value (a name, never a value)
    changed: bool


def live(credential: Credential) -> Iterator[tuple[ProviderApply, ProviderMethod[Any]]]:
    """The providers changed over an admin connection (a live ``apply:``), with their
    method."""
    for ref in credential.providers:
        applied = credential.apply_of(ref)
        if applied.live:
            yield applied, method_of(applied.method)


def probed(credential: Credential) -> Iterator[ProviderApply]:
    """The providers ``provider.verify`` logs in to: every live one, and a rollout provider
    with ``probe``."""
    for ref in credential.providers:
        applied = credential.apply_of(ref)
        if applied.connection is not None:
            yield applied


def applied_of(run: Run, subject: str) -> ProviderApply:
    return run.credential.apply_of(parse_workload(subject))


def reach(run: Run, applied: ProviderApply) -> Reach:
    """This attempt's way to the provider (its Service read once)."""
    if run.adapters.providers is None:
        raise StepFailed("no provider connector was wired for this run (internal)")
    return providers_access.reach(run.adapters.providers, run.adapters.kube, applied,
                                  run.environ, run_id=run.run_id,
                                  credential=run.credential.name, deadline=run.deadline(),
                                  cancel=run.cancel)


def admin(run: Run, found: Reach, first: Secret, then: Secret) -> AbstractContextManager[Any]:
    """An admin session; with the credential itself as admin, ``first`` is tried, then
    ``then`` (before the change the old value works, after it the new one)."""
    candidates = providers_access.admin_candidates(run.adapters.kube, found.applied,
                                                   run.credential.secret, first, then)
    return found.admin(candidates)


def _value_at(run: Run, version: int) -> Secret:
    return backend.read_value(run.adapters.vault, run.path, run.credential.backend.key, version)


def _role_at(run: Run, applied: ProviderApply, version: int) -> str | None:
    if applied.username_key is None:
        return None
    return active_username(run.adapters.vault, run.path, applied.username_key, version)


def previous_version(run: Run) -> int:
    """N: the version the rotation's ``backend.write`` replaced (``--adopt``: W, the version
    the chain held, whose value the provider is moved off)."""
    done = run.result(BackendWrite) or run.result(BackendAdopt)
    if done is None or done.previous_version < 1:
        raise StepFailed("the provider steps run after backend.write replaced a version; "
                         "this run has none (the path was created: nothing to change live)")
    return done.previous_version


def rotation_target(run: Run, applied: ProviderApply) -> Target:
    """A rotation's accounts, old and new values."""
    n = previous_version(run)
    strategy = str(run.start.strategy)
    accounts = accounts_for(applied, strategy, _role_at(run, applied, n))
    return Target(applied, accounts, _value_at(run, n), ensure_value(run), strategy)


def rollback_target(run: Run, applied: ProviderApply) -> Target:
    """A rollback's: ``old`` is the restored value (``accounts.old`` gets it back), ``new``
    the replaced one (``accounts.new``: where the rolled-back run moved the consumers)."""
    done = run.result(BackendRestore)
    restored_version = run.start.restore_backend_version
    if done is None or restored_version is None:
        raise StepFailed("the provider restore runs after backend.write restored a version")
    accounts = rollback_accounts(applied, _role_at(run, applied, restored_version),
                                 _role_at(run, applied, done.previous_version))
    return Target(applied, accounts, ensure_value(run),
                  _value_at(run, done.previous_version), str(run.start.strategy))


def protocol(applied: ProviderApply) -> str:
    return applied.connection.protocol if applied.connection is not None else "rollout"


def refuse_unfit(run: Run, found: Reach, target: Target) -> None:
    """A rollback presents both values to the provider (as admin candidates and in its
    probes): one its method's ValueRule refuses — an oversized value from a run made before
    the rule — is one the provider cannot even be asked with (Redis closes the connection:
    an "unreachable" retried until the deadline, on every resume).  Stop at once instead,
    with exit 18 and the way out; nothing is sent to the provider."""
    for what, value in (("the value the rolled-back run wrote", target.new),
                        ("the restored value", target.old)):
        why = found.method.values.refuses(value)
        if why is not None:
            raise StepFailed(
                f"{found.applied.provider} refuses the rollback's restore for good: {what} "
                f"is one it cannot take ({why}); a resume of this rollback meets the same "
                "refusal", exit_code=EXIT_RESTORE_REFUSED,
                next_step=_restore_way_out(run, found.applied))


@contextmanager
def restore_refused(run: Run, applied: ProviderApply) -> Iterator[None]:
    """A rollback's provider step whose provider refuses it for good (a PermanentError: the
    replaced value is one the provider cannot even be asked with, an admin refused, a user
    gone): stop with exit 18 and the way out, instead of a failure that every resume of the
    rollback meets again (cli.md "Exit codes")."""
    try:
        yield
    except (WaitTimeout, ProviderProofFailed):
        raise  # a proof that ran out of time: the provider may still come round
    except PermanentError as exc:
        raise StepFailed(
            f"{applied.provider} refuses the rollback's restore for good ({exc.message}); "
            "a resume of this rollback meets the same refusal",
            exit_code=EXIT_RESTORE_REFUSED, next_step=_restore_way_out(run, applied)) from None


def _restore_way_out(run: Run, applied: ProviderApply) -> str:
    done = run.result(BackendRestore)
    held = f"v{done.version}" if done is not None else "its current version"
    sec = run.credential.secret
    name = run.credential.name
    return (f"What to do: make {applied.provider} accept the restored value by hand — the "
            f"one the backend holds as {held} and the Secret {sec.namespace}/{sec.name} "
            f"holds once synced — or check that it already does; then rotate from it with "
            f"`rotate {name} --confirm --force` (add the same --chain/--state-dir options; "
            "--force: this rollback is left unfinished). `rotate resume "
            f"{run.run_id} --confirm` stops here again with exit 18.")
