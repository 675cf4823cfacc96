"""③ What the live provider kinds share (not a kind): which providers they act on, the old and
new values of this run, the accounts, and the sessions they open.

A run's *old* value is the one the backend held before ``backend.write`` (version N), its
*new* value the one written (:func:`~rotate.engine.kinds.backend_write.ensure_value`).  A
rollback's *restored* value is version N's again and its *replaced* value the one it wrote
over.  Values are re-read from the backend by version on every attempt (resume re-reads,
never regenerates); none is returned or journaled.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from rotate.chain.model import Credential, ProviderApply
from rotate.clients.seams import AuthProbe, PostgresAdmin, ProviderConnector, RedisAclAdmin
from rotate.core.errors import StepFailed
from rotate.core.secret import Secret
from rotate.engine.kinds.backend_write import BackendRestore, BackendWrite, ensure_value
from rotate.engine.kinds.base import Run, StepData
from rotate.engine.targets import parse_workload
from rotate.stages import backend
from rotate.stages import provider_access as access
from rotate.stages.provider_apply import Accounts, accounts_for


@dataclass(frozen=True)
class Applied(StepData):
    """What ``provider.apply`` and ``provider.retire`` (either form) journal when done."""

    method: str
    account: str  # the ACL user / role that took the value (a name, never a value)
    changed: bool


def live(credential: Credential) -> Iterator[ProviderApply]:
    """The providers changed over an admin connection (``apply: redis-acl | postgres``)."""
    for ref in credential.providers:
        applied = credential.apply_of(ref)
        if applied.live:
            yield applied


def probed(credential: Credential) -> Iterator[ProviderApply]:
    """The providers ``provider.verify`` logs in to: every live one, and a rollout provider
    with ``probe``."""
    for ref in credential.providers:
        applied = credential.apply_of(ref)
        if applied.connection is not None:
            yield applied


def applied_of(run: Run, subject: str) -> ProviderApply:
    return run.credential.apply_of(parse_workload(subject))


def connector(run: Run) -> ProviderConnector:
    if run.adapters.providers is None:
        raise StepFailed("no provider connector was wired for this run (internal)")
    return run.adapters.providers


def _value_at(run: Run, version: int) -> Secret:
    return backend.read_value(run.adapters.vault, run.path, run.credential.backend.key, version)


def _role_at(run: Run, applied: ProviderApply, version: int) -> str | None:
    if applied.username_key is None:
        return None
    return access.active_username(run.adapters.vault, run.path, applied.username_key, version)


def previous_version(run: Run) -> int:
    """N: the version the rotation's ``backend.write`` replaced."""
    done = run.result(BackendWrite)
    if done is None or done.previous_version < 1:
        raise StepFailed("the provider steps run after backend.write replaced a version; "
                         "this run has none (the path was created: nothing to change live)")
    return done.previous_version


def rotation_values(run: Run, applied: ProviderApply) -> tuple[Accounts, Secret, Secret]:
    """(accounts, old, new) of a rotation."""
    n = previous_version(run)
    accounts = accounts_for(applied, str(run.start.strategy), _role_at(run, applied, n))
    return accounts, _value_at(run, n), ensure_value(run)


def rollback_values(run: Run, applied: ProviderApply) -> tuple[Accounts, Secret, Secret]:
    """(accounts, restored, replaced) of a rollback; ``accounts.old`` is the account that
    gets its value back, ``accounts.new`` the one the rolled-back run moved the consumers to."""
    done = run.result(BackendRestore)
    restored_version = run.start.restore_backend_version
    if done is None or restored_version is None:
        raise StepFailed("the provider restore runs after backend.write restored a version")
    restored_role = _role_at(run, applied, restored_version)
    replaced_role = _role_at(run, applied, done.previous_version)
    user = applied.user or ""
    accounts = Accounts(new=replaced_role or restored_role or user,
                        old=restored_role or user)
    if applied.users is not None and restored_role is None:
        accounts = Accounts(new=replaced_role or applied.users[0], old=applied.users[0])
    return accounts, ensure_value(run), _value_at(run, done.previous_version)


def probe(run: Run, applied: ProviderApply) -> AuthProbe:
    opened = access.open_probe(connector(run), run.adapters.kube, applied, run.environ)
    if opened is None:
        raise StepFailed(f"provider {applied.provider} has no probe (internal)")
    return opened


@contextmanager
def redis_admin(run: Run, applied: ProviderApply, first: Secret,
                then: Secret) -> Iterator[RedisAclAdmin]:
    """An admin session; with the credential itself as admin, ``first`` is tried, then
    ``then`` (before the change the old value works, after it the new one)."""
    candidates = access.admin_candidates(run.adapters.kube, applied, run.credential.secret,
                                         first, then)
    admin = access.open_redis_admin(connector(run), run.adapters.kube, applied, candidates,
                                    run.environ)
    try:
        yield admin
    finally:
        admin.close()


@contextmanager
def postgres_admin(run: Run, applied: ProviderApply, first: Secret,
                   then: Secret) -> Iterator[PostgresAdmin]:
    candidates = access.admin_candidates(run.adapters.kube, applied, run.credential.secret,
                                         first, then)
    admin = access.open_postgres_admin(connector(run), run.adapters.kube, applied,
                                       candidates, run.environ)
    try:
        yield admin
    finally:
        admin.close()


def protocol(applied: ProviderApply) -> str:
    return applied.connection.protocol if applied.connection is not None else "rollout"
