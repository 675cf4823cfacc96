"""Which accounts of a provider a run moves: one user, or the two of alternating users.

Method-independent: it reads only the chain's ``user``/``users`` and, for alternating users,
the active role's name the backend holds under ``usernameKey``.
"""

from __future__ import annotations

from rotate.chain.model import ProviderApply
from rotate.clients.seams import Vault
from rotate.core.errors import PermanentError
from rotate.providers.method import Accounts


def accounts_for(applied: ProviderApply, strategy: str, active: str | None) -> Accounts:
    """The accounts of this run.  ``active``: the username the backend holds now (alternating
    users only; absent means the first of ``users``)."""
    if applied.users is None:
        user = applied.user or ""
        return Accounts(user, user)
    first, second = applied.users
    current = active or first
    if current not in applied.users:
        raise PermanentError(applied.method, f"alternating users of {applied.provider}",
                             f"the backend names role {current!r}, which is not one of "
                             f"users [{first}, {second}]")
    if strategy != "overlap":
        return Accounts(current, current)  # a hard cut on the active role
    return Accounts(second if current == first else first, current)


def rollback_accounts(applied: ProviderApply, restored_role: str | None,
                      replaced_role: str | None) -> Accounts:
    """A rollback's accounts: ``old`` gets its value back, ``new`` is the one the rolled-back
    run moved the consumers to.  The roles are what the backend named at the restored and the
    replaced version (None: no ``usernameKey`` there)."""
    if applied.users is not None and restored_role is None:
        return Accounts(new=replaced_role or applied.users[0], old=applied.users[0])
    user = applied.user or ""
    return Accounts(new=replaced_role or restored_role or user, old=restored_role or user)


def active_username(vault: Vault, path: str, username_key: str, version: int) -> str | None:
    """The alternating users' active role as the backend holds it at ``version`` (None when
    the key is absent: the first of ``users`` is active).  Not a secret, but stored wrapped
    like every backend value."""
    if version < 1:
        return None
    value = vault.read(path, version).get(username_key)
    return value.reveal() if value is not None else None
